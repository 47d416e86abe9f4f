/* The packed-weight kernel (autobatch/kernels/gemm_packed.h, AVX2: panels of 16 rows) against
 * scipy's OpenBLAS sgemm on one shape, best of 30 interleaved rounds, one thread.
 *
 *   LIB=$(python -c "import scipy, os; print(os.path.join(os.path.dirname(scipy.__file__) + '.libs'))")
 *   gcc -O2 -o packed_vs_sgemm benchmarks/packed_vs_sgemm.c $LIB/libscipy_openblas-*.so -Wl,-rpath,$LIB
 *   OPENBLAS_NUM_THREADS=1 ./packed_vs_sgemm M N K F [USES]   # C = W X, W packed once per USES products
 *   OPENBLAS_NUM_THREADS=1 ./packed_vs_sgemm M N K T          # dW = dY X^T, dY's panels read in place (M a multiple of 16)
 *
 * Prints both rates and packed ÷ sgemm in speed (> 1: the packed kernel is faster). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "../autobatch/kernels/gemm_packed.h"

void scipy_sgemm_(const char*, const char*, const int*, const int*, const int*, const float*,
                  const float*, const int*, const float*, const int*, const float*, float*,
                  const int*);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s M N K F|T [uses per pack]\n", argv[0]);
        return 2;
    }
    int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), mr = 16;
    char mode = argv[4][0];
    int uses = argc > 5 ? atoi(argv[5]) : 1;
    if (M < 1 || N < 1 || K < 1 || uses < 1 || (mode != 'F' && mode != 'T') ||
        (mode == 'T' && M % mr)) {          /* T reads dY's panels in place: whole ones */
        fprintf(stderr, "sizes must be positive, the mode F or T, and M a multiple of %d for T\n", mr);
        return 2;
    }
    /* F: A is W (M x K), B is X (K x N); T: A is dY (M x K), B is X (N x K) */
    float* A = malloc(sizeof(float) * M * K);
    float* B = malloc(sizeof(float) * K * N);
    float* C = malloc(sizeof(float) * M * N);
    float* P = aligned_alloc(64, ab_pk_floats(M, K, mr) * sizeof(float) + 64);
    for (long i = 0; i < (long)M * K; i++) A[i] = (i % 7) * 0.1f;
    for (long i = 0; i < (long)K * N; i++) B[i] = (i % 5) * 0.1f;
    float one = 1, zero = 0;
    int reps = (int)(1e9 / (2.0 * M * N * K)) + 1;
    double best[2] = {1e9, 1e9};
    for (int r = 0; r < 30; r++) {
        double t = now();
        for (int i = 0; i < reps; i++) {
            if (mode == 'F') {
                if (i % uses == 0) ab_pk_pack('N', M, K, A, M, P, mr);
                ab_pk_gemm(mr, 'N', 0, M, N, K, P, 0, B, K, 0.0f, C, M);
            } else {
                ab_pk_gemm(mr, 'T', 256, M, N, K, A, M, B, N, 0.0f, C, M);
            }
        }
        t = (now() - t) / reps;
        if (t < best[0]) best[0] = t;
        t = now();
        for (int i = 0; i < reps; i++) {
            if (mode == 'F') scipy_sgemm_("N", "N", &M, &N, &K, &one, A, &M, B, &K, &zero, C, &M);
            else scipy_sgemm_("N", "T", &M, &N, &K, &one, A, &M, B, &N, &zero, C, &M);
        }
        t = (now() - t) / reps;
        if (t < best[1]) best[1] = t;
    }
    double flop = 2.0 * M * N * K;
    printf("%c M=%d N=%d K=%d uses/pack=%d: packed %.1f sgemm %.1f GFLOP/s  packed/sgemm %.3f\n",
           mode, M, N, K, uses, flop / best[0] / 1e9, flop / best[1] / 1e9, best[1] / best[0]);
    free(A); free(B); free(C); free(P);
    return 0;
}
