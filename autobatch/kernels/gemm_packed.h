/* A gemm whose weight operand is packed once and reused by every product of a pass.
 *
 * Column-major C (M x N) = op(A) (M x K) op(B) (K x N) + beta C, with op(A) = A or A^T
 * packed by ab_pk_pack into panels of MR rows (K groups of MR floats, rows past M
 * zero) and B read in place, column-major K x N (tb 'N') or its transpose N x K
 * (tb 'T': a weight gradient dW += dY X^T, where the panel operand is dY). OpenBLAS
 * repacks A on every call, which at the few columns of a batch is most of its time (benchmarks/packed_gemm.md on branch
 * gemm-eval). Two kernels, chosen at run time: AVX-512 (MR = 32, a 32 x 12 register
 * tile) and AVX2 + FMA (MR = 16, 16 x 6); MR = 0 means neither (use sgemm).
 *
 * Each element of C sums its products in k order, K cut into blocks as OpenBLAS's
 * level-3 driver cuts it: so a column's result does not depend on the other columns
 * (nor on how the columns or panels are split over threads), and on the forward
 * shapes it equals OpenBLAS 0.3.30's SkylakeX sgemm bit for bit. */
#ifndef AUTOBATCH_GEMM_PACKED_H
#define AUTOBATCH_GEMM_PACKED_H
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(AB_NO_CLONES)
#define AB_PK_SIMD 1
#include <immintrin.h>
#endif

/* rows of a panel of the best kernel this processor runs (32, 16, or 0: none) */
static inline int ab_pk_best_mr(void) {
#ifdef AB_PK_SIMD
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 32;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 16;
#endif
    return 0;
}

static inline size_t ab_pk_floats(int M, int K, int mr) {
    return (size_t)((M + mr - 1) / mr) * mr * K;
}

/* op(A) (M x K) into panels; ta 'N': A is M x K (lda >= M), 'T': A is K x M. */
static void ab_pk_pack(char ta, int M, int K, const float* A, int lda, float* P, int mr) {
    for (int p = 0; p * mr < M; p++) {
        float* d = P + (size_t)p * mr * K;
        int rows = M - p * mr < mr ? M - p * mr : mr;
        if (ta == 'N' && rows == mr && (mr == 16 || mr == 32)) {
            /* full panels, the common case: a copy of a constant size per k, which the
               compiler turns into a few vector moves (the loop below, whose trip count
               is known only at run time, cost about 3 instructions per float) */
            for (int k = 0; k < K; k++) {
                const float* s = A + (size_t)k * lda + (size_t)p * mr;
                if (mr == 16) memcpy(d + (size_t)k * 16, s, 16 * sizeof(float));
                else memcpy(d + (size_t)k * 32, s, 32 * sizeof(float));
            }
        } else if (ta == 'N') {
            for (int k = 0; k < K; k++) {
                const float* s = A + (size_t)k * lda + (size_t)p * mr;
                for (int i = 0; i < rows; i++) d[(size_t)k * mr + i] = s[i];
                for (int i = rows; i < mr; i++) d[(size_t)k * mr + i] = 0.0f;
            }
        } else {    /* 16 k at a time, so the part of d being written stays in L1 */
            for (int k0 = 0; k0 < K; k0 += 16) {
                int kn = K - k0 < 16 ? K - k0 : 16;
                for (int i = 0; i < rows; i++) {
                    const float* s = A + (size_t)(p * mr + i) * lda + k0;
                    for (int kk = 0; kk < kn; kk++) d[(size_t)(k0 + kk) * mr + i] = s[kk];
                }
                for (int i = rows; i < mr; i++)
                    for (int kk = 0; kk < kn; kk++) d[(size_t)(k0 + kk) * mr + i] = 0.0f;
            }
        }
    }
}

/* OpenBLAS's cut of K: blocks of 384, a remainder between 384 and 768 halved (rounded
 * up to 16); found by matching its results (benchmarks/packed_gemm.c, gemm-eval) */
#define AB_PK_KQ 384
static inline int ab_pk_kblock(int left) {
    if (left >= 2 * AB_PK_KQ) return AB_PK_KQ;
    if (left > AB_PK_KQ) return (left / 2 + 15) / 16 * 16;
    return left;
}

#ifdef AB_PK_SIMD
/* the two cases of a tile width n in a blk function's switch (nr + 16 bt): B as
 * stored, B transposed; nr and bt constants in each call keep the tile in registers */
#define AB_PK_CASES(tile, n) \
    case n: tile(n, 0, kc, P, ps, B, ldb, C, ldc, rows, beta); break; \
    case n + 16: tile(n, 1, kc, P, ps, B, ldb, C, ldc, rows, beta); break;

/* C[0:rows, 0:nr] = P[kc] B[0:kc, 0:nr] + beta C; the nr accumulators stay in zmm
 * because nr is a constant in every call (blk512's switch) */
__attribute__((target("avx512f"), always_inline)) static inline void
ab_pk_tile512(int nr, int bt, int kc, const float* P, size_t ps, const float* B, int ldb,
              float* C, int ldc, int rows, float beta) {
    __m512 c0[12], c1[12];
    _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++) {
        c0[j] = _mm512_setzero_ps();
        c1[j] = _mm512_setzero_ps();
    }
    for (int k = 0; k < kc; k++) {
        __m512 a0 = _mm512_loadu_ps(P + ps * k), a1 = _mm512_loadu_ps(P + ps * k + 16);
        _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++) {
            __m512 b = _mm512_set1_ps(bt ? B[(size_t)k * ldb + j] : B[(size_t)j * ldb + k]);
            c0[j] = _mm512_fmadd_ps(a0, b, c0[j]);
            c1[j] = _mm512_fmadd_ps(a1, b, c1[j]);
        }
    }
    __mmask16 m0 = rows >= 16 ? 0xffff : (__mmask16)((1u << rows) - 1);
    __mmask16 m1 = rows >= 32 ? 0xffff : rows <= 16 ? 0 : (__mmask16)((1u << (rows - 16)) - 1);
    _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++) {
        float* c = C + (size_t)j * ldc;
        if (beta != 0.0f) {
            __m512 bb = _mm512_set1_ps(beta);
            c0[j] = _mm512_fmadd_ps(bb, _mm512_maskz_loadu_ps(m0, c), c0[j]);
            c1[j] = _mm512_fmadd_ps(bb, _mm512_maskz_loadu_ps(m1, c + 16), c1[j]);
        }
        _mm512_mask_storeu_ps(c, m0, c0[j]);
        _mm512_mask_storeu_ps(c + 16, m1, c1[j]);
    }
}

__attribute__((target("avx512f"))) static void
ab_pk_blk512(int nr, int bt, int kc, const float* P, size_t ps, const float* B, int ldb,
             float* C, int ldc, int rows, float beta) {
    switch (nr + 16 * bt) {
#define AB_PK_CASE(n) AB_PK_CASES(ab_pk_tile512, n)
    AB_PK_CASE(1) AB_PK_CASE(2) AB_PK_CASE(3) AB_PK_CASE(4) AB_PK_CASE(5) AB_PK_CASE(6)
    AB_PK_CASE(7) AB_PK_CASE(8) AB_PK_CASE(9) AB_PK_CASE(10) AB_PK_CASE(11) AB_PK_CASE(12)
#undef AB_PK_CASE
    }
}

/* AVX2 + FMA: two ymm of rows times 6 columns: 12 accumulators, 2 of A, 1 broadcast */
__attribute__((target("avx2,fma"), always_inline)) static inline void
ab_pk_tile256(int nr, int bt, int kc, const float* P, size_t ps, const float* B, int ldb,
              float* C, int ldc, int rows, float beta) {
    __m256 c0[6], c1[6];
    _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++) {
        c0[j] = _mm256_setzero_ps();
        c1[j] = _mm256_setzero_ps();
    }
    for (int k = 0; k < kc; k++) {
        __m256 a0 = _mm256_loadu_ps(P + ps * k), a1 = _mm256_loadu_ps(P + ps * k + 8);
        _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++) {
            __m256 b = _mm256_broadcast_ss(bt ? B + (size_t)k * ldb + j : B + (size_t)j * ldb + k);
            c0[j] = _mm256_fmadd_ps(a0, b, c0[j]);
            c1[j] = _mm256_fmadd_ps(a1, b, c1[j]);
        }
    }
    /* masked loads and stores only for a last panel of fewer rows (a scalar tail through
     * a stack array would make GCC keep the accumulators in memory); a full panel uses
     * plain ones: AMD's vmaskmovps store is microcoded, ~12 cycles each (the kernel
     * 1.04-1.10x faster on a Zen 3 without it) */
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), lane);
    __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows - 8), lane);
    int full = rows >= 16;
    _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++) {
        float* c = C + (size_t)j * ldc;
        if (beta != 0.0f) {
            __m256 bb = _mm256_set1_ps(beta);
            c0[j] = _mm256_fmadd_ps(bb, full ? _mm256_loadu_ps(c) : _mm256_maskload_ps(c, m0), c0[j]);
            c1[j] = _mm256_fmadd_ps(bb, full ? _mm256_loadu_ps(c + 8) : _mm256_maskload_ps(c + 8, m1),
                                    c1[j]);
        }
        if (full) {
            _mm256_storeu_ps(c, c0[j]);
            _mm256_storeu_ps(c + 8, c1[j]);
        } else {
            _mm256_maskstore_ps(c, m0, c0[j]);
            _mm256_maskstore_ps(c + 8, m1, c1[j]);
        }
    }
}

__attribute__((target("avx2,fma"))) static void
ab_pk_blk256(int nr, int bt, int kc, const float* P, size_t ps, const float* B, int ldb,
             float* C, int ldc, int rows, float beta) {
    switch (nr + 16 * bt) {
#define AB_PK_CASE(n) AB_PK_CASES(ab_pk_tile256, n)
    AB_PK_CASE(1) AB_PK_CASE(2) AB_PK_CASE(3) AB_PK_CASE(4) AB_PK_CASE(5) AB_PK_CASE(6)
#undef AB_PK_CASE
    }
}
#undef AB_PK_CASES
#endif

/* C = op(A) op(B) + beta C with op(A) packed for panels of mr rows (32 or 16) (lda 0),
 * or A itself, column-major with leading dimension lda, when M is a multiple of mr (its
 * columns' runs of mr rows are the panels, read in place); op(B) = B (tb 'N') or B^T
 * ('T'). K blocks outermost, so a panel's block stays in L1 while it meets every
 * column of B; within a K block, columns in chunks of nc (0: all), so
 * that a wide B's block stays in L2 while every panel meets it. Neither loop changes
 * the order in which an element of C sums its products. */
static void ab_pk_gemm(int mr, char tb, int nc, int M, int N, int K, const float* P, int lda,
                       const float* B, int ldb, float beta, float* C, int ldc) {
#ifdef AB_PK_SIMD
    int nr_max = mr == 32 ? 12 : 6, bt = tb == 'T';
    size_t ps = lda ? (size_t)lda : (size_t)mr;      /* from one k to the next in a panel */
    if (nc <= 0 || nc > N) nc = N;
    for (int k0 = 0, kc; k0 < K; k0 += kc) {
        kc = ab_pk_kblock(K - k0);
        float bk = k0 == 0 ? beta : 1.0f;
        for (int j0 = 0; j0 < N; j0 += nc) {
            int j1 = N - j0 < nc ? N : j0 + nc;
            for (int p = 0; p * mr < M; p++) {
                const float* pp = lda ? P + (size_t)p * mr + (size_t)k0 * lda
                                      : P + (size_t)p * mr * K + (size_t)k0 * mr;
                int rows = M - p * mr < mr ? M - p * mr : mr;
                for (int j = j0; j < j1; j += nr_max) {
                    int nr = j1 - j < nr_max ? j1 - j : nr_max;
                    const float* b = bt ? B + (size_t)k0 * ldb + j : B + (size_t)j * ldb + k0;
                    float* c = C + (size_t)j * ldc + (size_t)p * mr;
                    if (mr == 32) ab_pk_blk512(nr, bt, kc, pp, ps, b, ldb, c, ldc, rows, bk);
                    else ab_pk_blk256(nr, bt, kc, pp, ps, b, ldb, c, ldc, rows, bk);
                }
            }
        }
    }
#endif
}

#endif
