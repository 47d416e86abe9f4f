# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Products split over the engine's threads (runtime/threads.pyx).

A product large enough to gain is cut into one block per thread along the larger
of its output's two dimensions (each block one single-threaded sgemm: splitting the
rows packs half of W per thread, splitting the columns half of X). The calling thread
computes blocks too and never waits for a block no worker has started, so a worker
that a busy machine does not schedule costs little. Blocks write disjoint parts of
C and each sums over the whole of k, so the numbers are those of one call."""
from autobatch.runtime.threads cimport gemm_split_worthwhile, pool_run, pool_threads

cdef int ALIGN = 16                 # block starts are multiples of 16 floats (64 bytes)


ctypedef struct GemmJob:
    char ta, tb
    int m, n, k, lda, ldb, ldc
    float alpha, beta
    float* A
    float* B
    float* C
    bint split_rows         # blocks of C's rows (else of its columns)
    int block               # rows or columns of a block


cdef void gemm_block(void* ctx, int c) noexcept nogil:
    cdef GemmJob* g = <GemmJob*>ctx
    cdef int at = c * g.block
    cdef int size = min(g.block, (g.m if g.split_rows else g.n) - at)
    if g.split_rows:        # rows at.. of op(A) and C
        gemm_serial(g.ta, g.tb, size, g.n, g.k, g.alpha,
                    g.A + (at if g.ta == b'N' else <size_t>at * g.lda), g.lda, g.B, g.ldb,
                    g.beta, g.C + at, g.ldc)
    else:                   # columns at.. of op(B) and C
        gemm_serial(g.ta, g.tb, g.m, size, g.k, g.alpha, g.A, g.lda,
                    g.B + (<size_t>at * g.ldb if g.tb == b'N' else at), g.ldb,
                    g.beta, g.C + <size_t>at * g.ldc, g.ldc)


cdef void gemm_threaded(char ta, char tb, int m, int n, int k, float alpha,
                        float* A, int lda, float* B, int ldb, float beta,
                        float* C, int ldc) noexcept nogil:
    """gemm_serial's C = alpha op(A) op(B) + beta C, in blocks over the pool's threads
    when it is large enough to gain."""
    cdef int threads = pool_threads(), along
    cdef GemmJob g
    if not gemm_split_worthwhile(m, n, k):
        gemm_serial(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
        return
    g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc = ta, tb, m, n, k, lda, ldb, ldc
    g.alpha, g.beta, g.A, g.B, g.C = alpha, beta, A, B, C
    g.split_rows = m > n
    along = m if g.split_rows else n
    g.block = (along + threads - 1) // threads
    g.block = (g.block + ALIGN - 1) // ALIGN * ALIGN
    if g.block >= along:
        gemm_serial(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
        return
    pool_run(gemm_block, &g, (along + g.block - 1) // g.block)


def gemm_for_tests(str ta, str tb, float alpha, float[::1, :] A, float[::1, :] B, float beta,
                   float[::1, :] C):
    """C = alpha op(A) op(B) + beta C on Fortran-ordered float32 arrays, through the
    engine's gemm (split over the threads when large): for the tests of the split."""
    cdef char cta = ord(ta), ctb = ord(tb)
    cdef int m = C.shape[0], n = C.shape[1]
    cdef int k = A.shape[1] if cta == b'N' else A.shape[0]
    if (A.shape[0] if cta == b'N' else A.shape[1]) != m or \
            (B.shape[0] if ctb == b'N' else B.shape[1]) != k or \
            (B.shape[1] if ctb == b'N' else B.shape[0]) != n:
        raise ValueError("gemm_for_tests: shapes do not agree")
    with nogil:
        gemm_threaded(cta, ctb, m, n, k, alpha, &A[0, 0], A.shape[0], &B[0, 0], B.shape[0],
                      beta, &C[0, 0], m)
