# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Products whose weight is packed once per pass (the kernel: kernels/gemm_packed.h).

A graph owns one PackCache. packs_begin empties it at the start of every forward and
backward pass (and after each call of a strategy written in Python), so a packed copy
lives only while the engine runs batches without handing control to user code. That
is what makes it correct without tracking writes: parameter values are written by
trainers, set_value, load, clip_inplace, scale, or through the writable `values` view,
all of which are user code that runs between passes; inside a pass the kernels write
only node values and gradients. (A signal handler or another Python thread writing a
parameter during a pass races with the pass's reads of it, packed or not.)

A typical step runs one forward pass (each weight packed as W) and one backward pass
(packed as W^T), so each weight is packed once per orientation and step."""
import os

from libc.stdlib cimport free, realloc
from libc.string cimport memset

from autobatch.runtime.memory cimport arena_alloc, arena_free, arena_reset
from autobatch.runtime.profile cimport P_GATHER, P_GEMM, prof_start, prof_stop
from autobatch.runtime.threads cimport gemm_split_worthwhile, pool_run, pool_threads

cdef extern from "gemm_packed.h" nogil:
    int ab_pk_best_mr()
    size_t ab_pk_floats(int M, int K, int mr)
    void ab_pk_pack(char ta, int M, int K, const float* A, int lda, float* P, int mr)
    void ab_pk_gemm(int mr, char tb, int nc, int M, int N, int K, const float* P, int lda,
                    const float* B, int ldb, float beta, float* C, int ldc)

# below this many rows OpenBLAS's small-matrix kernel is faster and more accurate.
# Against an OpenBLAS kernel of the same vector width, the kernel wins by not repacking
# W; above this many columns that packing is a small share of a call and OpenBLAS's
# blocking for a wide B is better (measured against SkylakeX on an Intel Xeon: the
# language model's output layer, 1,344 columns, 0.97-1.00x on the packed kernel). One
# column stays on sgemv, which reads W once: level with the packed kernel when W is
# reused 64 times in a pass, and 3.8x faster when W is used once (packing it costs more)
cdef int PACK_MIN_ROWS = 32
cdef int PACK_MIN_COLUMNS = 2
cdef int PACK_MAX_COLUMNS = 1024
cdef int BEST_MR = ab_pk_best_mr()
cdef int MR = BEST_MR              # the kernel in use: 32 (AVX-512), 16 (AVX2), 0 (sgemm)
ISA_MR = {"avx512": 32, "avx2": 16, "off": 0}


cdef void packs_begin(PackCache* c) noexcept nogil:
    arena_reset(&c.mem)
    c.n = 0


cdef void packs_free(PackCache* c) noexcept nogil:
    arena_free(&c.mem)
    free(c.items)
    memset(c, 0, sizeof(PackCache))


cdef const float* find_or_pack(PackCache* c, Profile* prof, char ta, int m, int k,
                               const float* A, int lda) noexcept nogil:
    """op(A) packed for the kernel in use, packing it on its first use in this pass;
    NULL if there is no memory for it."""
    cdef int i
    cdef PackEntry* e
    for i in range(c.n):
        e = &c.items[i]
        if e.src == A and e.ta == ta and e.m == m and e.k == k and e.lda == lda and e.mr == MR:
            return e.panels
    if c.n == c.cap:
        e = <PackEntry*>realloc(c.items, (2 * c.cap + 8) * sizeof(PackEntry))
        if e == NULL:
            return NULL
        c.items = e
        c.cap = 2 * c.cap + 8
    cdef float* panels = arena_alloc(&c.mem, ab_pk_floats(m, k, MR))
    if panels == NULL:
        c.mem.failed = False        # not an error: the product falls back to sgemm
        return NULL
    cdef double t0 = prof_start(prof)
    ab_pk_pack(ta, m, k, A, lda, panels, MR)
    prof_stop(prof, P_GATHER, t0)
    c.items[c.n] = PackEntry(A, ta, m, k, lda, MR, panels)
    c.n += 1
    return panels


ctypedef struct PackedJob:
    int mr, m, n, k, ldb, ldc
    char tb                 # B as stored ('N') or transposed ('T')
    int nc                  # columns per chunk (ab_pk_gemm; 0: all)
    int lda                 # 0: P is packed; else A in place, column-major (ab_pk_gemm)
    const float* P
    const float* B
    float beta
    float* C
    bint split_rows         # blocks of whole panels (else of columns)
    int block


cdef void packed_block(void* ctx, int c) noexcept nogil:
    cdef PackedJob* g = <PackedJob*>ctx
    cdef int at = c * g.block
    cdef int size = min(g.block, (g.m if g.split_rows else g.n) - at)
    if g.split_rows:        # at is a multiple of mr: panels at / mr ..
        ab_pk_gemm(g.mr, g.tb, g.nc, size, g.n, g.k,
                   g.P + (at if g.lda else <size_t>at * g.k), g.lda, g.B, g.ldb,
                   g.beta, g.C + at, g.ldc)
    else:
        ab_pk_gemm(g.mr, g.tb, g.nc, g.m, size, g.k, g.P, g.lda,
                   g.B + (at if g.tb == b'T' else <size_t>at * g.ldb), g.ldb, g.beta,
                   g.C + <size_t>at * g.ldc, g.ldc)


cdef void run_packed(int mr, char tb, int nc, int m, int n, int k, const float* P, int lda,
                     const float* B, int ldb, float beta, float* C, int ldc) noexcept nogil:
    """The kernel, in blocks over the engine's threads when the product is large. Each
    column sums over all of k in the same order whatever the blocks: the numbers are
    those of one thread."""
    cdef PackedJob g
    cdef int threads = pool_threads(), along, unit
    if not gemm_split_worthwhile(m, n, k):
        ab_pk_gemm(mr, tb, nc, m, n, k, P, lda, B, ldb, beta, C, ldc)
        return
    g = PackedJob(mr, m, n, k, ldb, ldc, tb, nc, lda, P, B, beta, C, m > n, 0)
    along = m if g.split_rows else n
    unit = mr if g.split_rows else (12 if mr == 32 else 6)   # panels, register tiles
    g.block = ((along + threads - 1) // threads + unit - 1) // unit * unit
    if g.block >= along:
        ab_pk_gemm(mr, tb, nc, m, n, k, P, lda, B, ldb, beta, C, ldc)
        return
    pool_run(packed_block, &g, (along + g.block - 1) // g.block)


cdef bint packed_gemm(PackCache* c, Profile* prof, char ta, int m, int n, int k,
                      const float* A, int lda, const float* B, int ldb, float beta,
                      float* C, int ldc) noexcept nogil:
    """C = op(A) B + beta C (B not transposed) with op(A) packed once per pass, if
    this product should: A a weight (the caller's choice), m and n within the limits
    above and a kernel for this processor. False: nothing was done, use sgemm."""
    if c == NULL or MR == 0 or m < PACK_MIN_ROWS or n < PACK_MIN_COLUMNS or \
            (n > PACK_MAX_COLUMNS and not unlimited()) or k < 1:
        return False
    cdef const float* P = find_or_pack(c, prof, ta, m, k, A, lda)
    if P == NULL:
        return False
    cdef double t0 = prof_start(prof)
    run_packed(MR, b'N', 0, m, n, k, P, 0, B, ldb, beta, C, ldc)
    prof_stop(prof, P_GEMM, t0)
    return True


# a weight gradient's columns in chunks of this many, so that a block of X (384 of its
# columns by this many rows) stays in L2 while every panel of dY meets it
cdef int GRAD_CHUNK = 256
# above this many rows of dW, streaming dY's panels and dW through memory once per block
# of 384 columns costs more than sgemm's blocking of the same vector width (against
# Haswell's AVX2 sgemm on a Zen 5 the AVX-512 kernel still wins there: see below)
cdef int GRAD_MAX_ROWS = 4096
# the AVX2 kernel (16-row panels) on dW of more than this many elements: slower than an
# sgemm of the same vector width (OpenBLAS Haswell on a Zen 3: 0.53-0.87x from 128 x 256
# up, level at 128 x 128, up to 1.7x below), since dY's panels read in place and X read
# transposed both stride through memory and thrash a 32 KB L1; sgemm packs both
cdef long GRAD_MAX_ELEMS_AVX2 = 16384

# OpenBLAS's kernels (its get_corename) that compute with AVX-512 vectors. Against any
# other, the AVX-512 kernel does twice the work per instruction, and wins at every
# size (on a Zen 5 with OpenBLAS's Haswell kernel: 1.8x on the output layer's 10,000 x
# 256 product over 1,344 columns, 1.5-2.1x over 600-1,300 columns, packing included;
# dW of 10,000 x 256 from 1,344 columns 1.8x): then the two limits above are lifted.
AVX512_BLAS_KERNELS = {"skylakex", "cooperlake", "sapphirerapids"}
cdef bint BLAS_NARROW = False       # OpenBLAS's kernel has no AVX-512 (configure_for_blas)


cdef inline bint unlimited() noexcept nogil:
    return MR == 32 and BLAS_NARROW


cdef bint packed_weight_grad(Arena* scratch, Profile* prof, int m, int n, int k,
                             const float* dY, const float* X, float beta,
                             float* dW) noexcept nogil:
    """dW (m x n) = dY (m x k) X^T (X: n x k) + beta dW, all column-major and
    contiguous. dY's full panels are read in place (a panel is a run of rows of every
    column); only its last rows, when m is not a multiple of the panel height, are
    packed into scratch. (dY is not reused: k is every column of the weight's uses, in
    one stacked product.) Faster than sgemm, which packs both operands, on the
    shapes it takes, and exactly as accurate. False: nothing was done (too few rows,
    too large for the AVX2 kernel, no kernel, no memory), use sgemm."""
    if MR == 0 or m < PACK_MIN_ROWS or (m > GRAD_MAX_ROWS and not unlimited()) or \
            (MR == 16 and <long>m * n > GRAD_MAX_ELEMS_AVX2) or n < 1 or k < 1:
        return False
    cdef int full = m - m % MR, tail = m % MR
    cdef float* P = NULL
    cdef double t0
    if tail:                # the last rows, fewer than a panel: packed (zero-padded)
        P = arena_alloc(scratch, ab_pk_floats(tail, k, MR))
        if P == NULL:
            scratch.failed = False
            return False
        t0 = prof_start(prof)
        ab_pk_pack(b'N', tail, k, dY + full, m, P, MR)
        prof_stop(prof, P_GATHER, t0)
    t0 = prof_start(prof)
    if full:                # dY's columns hold these panels as they are: read in place
        run_packed(MR, b'T', GRAD_CHUNK, full, n, k, dY, m, X, n, beta, dW, m)
    if tail:
        run_packed(MR, b'T', GRAD_CHUNK, tail, n, k, P, 0, X, n, beta, dW + full, m)
    prof_stop(prof, P_GEMM, t0)
    return True


def packed_isa():
    """The packed-weight kernel in use: "avx512", "avx2" or "off" (products use sgemm)."""
    return {32: "avx512", 16: "avx2", 0: "off"}[MR]


def set_packed_isa(name):
    """Use the packed-weight kernel `name` ("avx512", "avx2", "off" or "auto": the best
    this processor runs); returns the previous one. For tests and measurements; also
    set at import from AUTOBATCH_PACKED_GEMM. ValueError for a kernel the processor
    lacks. Takes effect at the next pass of a graph."""
    global MR
    old = packed_isa()
    if name == "auto":
        MR = BEST_MR
        return old
    if name not in ISA_MR:
        raise ValueError(f"packed gemm kernel must be auto, avx512, avx2 or off, got {name!r}")
    want = ISA_MR[name]
    if want > BEST_MR:
        raise ValueError(f"this processor cannot run the {name} packed gemm kernel")
    MR = want
    return old


def set_packed_limits(int min_rows=-1, int max_columns=-1, int grad_max_rows=-1,
                      long grad_max_elems_avx2=-1):
    """Products with op(W) of at least `min_rows` rows and at most `max_columns`
    columns use the packed kernel, and weight gradients of `min_rows` to
    `grad_max_rows` rows and, on the AVX2 kernel, at most `grad_max_elems_avx2`
    elements; -1 (the default) leaves a limit unchanged. Returns the old four, which
    set_packed_limits(*old) restores. For tests and measurements."""
    global PACK_MIN_ROWS, PACK_MAX_COLUMNS, GRAD_MAX_ROWS, GRAD_MAX_ELEMS_AVX2
    old = (PACK_MIN_ROWS, PACK_MAX_COLUMNS, GRAD_MAX_ROWS, GRAD_MAX_ELEMS_AVX2)
    if min_rows >= 0:
        PACK_MIN_ROWS = min_rows
    if max_columns >= 0:
        PACK_MAX_COLUMNS = max_columns
    if grad_max_rows >= 0:
        GRAD_MAX_ROWS = grad_max_rows
    if grad_max_elems_avx2 >= 0:
        GRAD_MAX_ELEMS_AVX2 = grad_max_elems_avx2
    return old


def packed_limits():
    """(min_rows, max_columns, grad_max_rows) in use now; None for a limit that is
    lifted (the AVX-512 kernel against an OpenBLAS kernel without AVX-512)."""
    if unlimited():
        return (PACK_MIN_ROWS, None, None)
    return (PACK_MIN_ROWS, PACK_MAX_COLUMNS, GRAD_MAX_ROWS)


def configure_for_blas(kernel):
    """Tell the products which OpenBLAS kernel sgemm runs (its core name, e.g.
    'Haswell'; None when the BLAS is not OpenBLAS or does not say): against one
    without AVX-512 the AVX-512 kernel's size limits are lifted. Returns the old
    setting (whether the BLAS was taken to lack AVX-512). At import."""
    global BLAS_NARROW
    old = BLAS_NARROW
    BLAS_NARROW = kernel is not None and kernel.lower() not in AVX512_BLAS_KERNELS
    return old


def configure_from_environment():
    """The kernel from ``AUTOBATCH_PACKED_GEMM`` (default auto), at import."""
    set_packed_isa(os.environ.get("AUTOBATCH_PACKED_GEMM", "auto") or "auto")


def packed_gemm_for_tests(str ta, float[::1, :] A, float[::1, :] B, float beta,
                          float[::1, :] C):
    """C = op(A) B + beta C on Fortran-ordered float32 arrays through the packed kernel
    (packed once, split over the threads when large). Returns False, leaving C alone,
    where the engine would use sgemm (too few rows, one column or too many, no kernel)."""
    cdef char cta = ord(ta)
    cdef int m = C.shape[0], n = C.shape[1]
    cdef int k = A.shape[1] if cta == b'N' else A.shape[0]
    if (A.shape[0] if cta == b'N' else A.shape[1]) != m or B.shape[0] != k or B.shape[1] != n:
        raise ValueError("packed_gemm_for_tests: shapes do not agree")
    cdef PackCache cache
    cdef bint done
    memset(&cache, 0, sizeof(PackCache))
    with nogil:
        done = packed_gemm(&cache, NULL, cta, m, n, k, &A[0, 0], A.shape[0], &B[0, 0], k,
                           beta, &C[0, 0], m)
    packs_free(&cache)
    return done


def packed_weight_grad_for_tests(float[::1, :] dY, float[::1, :] X, float beta,
                                 float[::1, :] dW):
    """dW = dY X^T + beta dW on Fortran-ordered float32 arrays through the packed kernel
    (dY's whole panels read in place, its last rows packed, X read transposed in
    place; split over the threads when large).
    Returns False, leaving dW alone, where the engine would use sgemm."""
    cdef int m = dW.shape[0], n = dW.shape[1], k = dY.shape[1]
    if dY.shape[0] != m or X.shape[0] != n or X.shape[1] != k:
        raise ValueError("packed_weight_grad_for_tests: shapes do not agree")
    cdef Arena scratch
    cdef bint done
    memset(&scratch, 0, sizeof(Arena))
    with nogil:
        done = packed_weight_grad(&scratch, NULL, m, n, k, &dY[0, 0], &X[0, 0], beta,
                                  &dW[0, 0])
    arena_free(&scratch)
    return done
