# The engine's products: gemm_serial, the one-thread BLAS call (column-major gemm through
# scipy's cython_blas, with gemv/ger for the shapes sgemm handles badly); gemm_threaded,
# the same product split over the engine's threads when large (kernels/gemm.pyx); and
# what kernels call: gemm, and tgemm (timed when profiling). The packed-weight products
# are beside it (kernels/packed.pyx).
from libc.string cimport memset
from scipy.linalg.cython_blas cimport sgemm, sgemv, sger

from autobatch.runtime.profile cimport P_GEMM, Profile, prof_start, prof_stop

cdef inline void gemm_serial(char ta, char tb, int m, int n, int k, float alpha,
                             float* A, int lda, float* B, int ldb, float beta,
                             float* C, int ldc) noexcept nogil:
    """Column-major C = alpha op(A) op(B) + beta C. One column goes to gemv and a
    rank-1 update to ger: sgemm would pack the whole of A for them on every call."""
    cdef int i, j, one = 1, inc
    if m == 0 or n == 0:
        return
    if k == 0:          # an empty inner dimension: the product is 0, C = beta C
        for i in range(n):
            if beta == 0.0:
                memset(C + i * ldc, 0, m * sizeof(float))
            elif beta != 1.0:
                for j in range(m):
                    C[i * ldc + j] *= beta
        return
    if n == 1:
        inc = 1 if tb == b'N' else ldb
        if ta == b'N':
            sgemv(&ta, &m, &k, &alpha, A, &lda, B, &inc, &beta, C, &one)
        else:
            sgemv(&ta, &k, &m, &alpha, A, &lda, B, &inc, &beta, C, &one)
        return
    if k == 1 and beta == 1.0:
        inc = 1 if ta == b'N' else lda
        i = 1 if tb == b'T' else ldb
        sger(&m, &n, &alpha, A, &inc, B, &i, C, &ldc)
        return
    sgemm(&ta, &tb, &m, &n, &k, &alpha, A, &lda, B, &ldb, &beta, C, &ldc)


cdef void gemm_threaded(char ta, char tb, int m, int n, int k, float alpha,
                        float* A, int lda, float* B, int ldb, float beta,
                        float* C, int ldc) noexcept nogil


cdef inline void gemm(char ta, char tb, int m, int n, int k, float alpha,
                      float* A, int lda, float* B, int ldb, float beta,
                      float* C, int ldc) noexcept nogil:
    """Column-major C = alpha op(A) op(B) + beta C (gemm_serial), split over the
    engine's threads when it is large (kernels/gemm.pyx)."""
    gemm_threaded(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)

cdef inline void tgemm(Profile* prof, char ta, char tb, int m, int n, int k, float alpha,
                       float* A, int lda, float* B, int ldb, float beta,
                       float* C, int ldc) noexcept nogil:
    """gemm, timed when profiling (prof != NULL)."""
    cdef double t0 = prof_start(prof)
    gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
    prof_stop(prof, P_GEMM, t0)
