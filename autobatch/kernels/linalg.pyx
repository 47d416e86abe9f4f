# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Linear algebra on each matrix of a batch: inverse and logdet through LAPACK's LU
factorisation, in float64 (the matrix is copied to doubles, factorised, and the
result rounded to float32: n^2 conversions next to an n^3 factorisation, and a
result as accurate as float32 can hold, where DyNet's float32 Eigen LU loses digits
on ill-conditioned matrices). A singular matrix gives what DyNet gives: inverse is
NaN, logdet is -inf (renew_cg(check_validity=True) reports either)."""
from libc.math cimport log, fabs, NAN
from libc.stdint cimport int32_t
from libc.string cimport memcpy, memset
from scipy.linalg.cython_lapack cimport dgetrf, dgetri

from autobatch.runtime.memory cimport arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.kernels.common cimport *
from autobatch.kernels.gemm cimport gemm


# --------------------------------------------------------------- LU ----

cdef int lu_inverse(const float* a, int n, double* work, int* ipiv, float* inv,
                    double* logabs, int* sign) noexcept nogil:
    """LU-factorise the n x n matrix a (in doubles in work[0 : n*n]); the log of
    |det a| and its sign; with inv != NULL, a's inverse (NaN when a is singular).
    work holds 2 n^2 doubles. Returns LAPACK's info (> 0: singular)."""
    cdef int i, info = 0, lwork = n * n
    logabs[0] = 0.0
    sign[0] = 1
    if n == 0:          # the empty matrix: det 1, its own inverse (LAPACK refuses n = 0's lda)
        return 0
    for i in range(n * n):
        work[i] = a[i]
    dgetrf(&n, &n, work, &n, ipiv, &info)
    for i in range(n):
        if ipiv[i] != i + 1:
            sign[0] = -sign[0]
        if work[i * n + i] < 0:
            sign[0] = -sign[0]
        logabs[0] += log(fabs(work[i * n + i]))      # -inf for a zero pivot
    if inv == NULL:
        return info
    if info == 0:
        dgetri(&n, work, &n, ipiv, work + n * n, &lwork, &info)
    for i in range(n * n):
        inv[i] = <float>work[i] if info == 0 else NAN
    return info

cdef double* lu_work(Batch* b, int n, int** ipiv) noexcept nogil:
    cdef double* w = <double*>arena_alloc(b.scratch, <size_t>4 * n * n + n)   # 2 n^2 doubles, n ints
    if w != NULL:
        ipiv[0] = <int*>(w + 2 * n * n)
    return w


cdef void inverse_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int n = rows(n0), m = elems(n0), j, e, sign
    cdef double logabs
    cdef int* ipiv
    cdef double* work = lu_work(b, n, &ipiv)
    if work == NULL:
        return
    for j in range(b.n):
        for e in range(n0.bs):
            lu_inverse(elem_val(ARG(b, j, 0), e), n, work, ipiv, NODE(b, j).val + e * m, &logabs, &sign)

cdef void inverse_bwd(Batch* b) noexcept nogil:
    # Y = X^-1: dX -= Y^T dY Y^T
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int n = rows(n0), m = elems(n0), j, e
    cdef float* t = arena_alloc(b.scratch, m)
    if t == NULL:
        return
    cdef float* y
    for j in range(b.n):
        for e in range(n0.bs):
            y = NODE(b, j).val + e * m
            gemm(b'T', b'N', n, n, n, 1.0, y, n, NODE(b, j).grad + e * m, n, 0.0, t, n)
            gemm(b'N', b'T', n, n, n, -1.0, t, n, y, n, 1.0, elem_grad(ARG(b, j, 0), e), n)


cdef void logdet_fwd(Batch* b) noexcept nogil:
    # log det X = sum log |u_ii| + log(sign): NaN for a negative determinant, as
    # DyNet; X^-T is kept in aux for backward
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int n = rows(x0), m = elems(x0), j, e, sign, r, c
    cdef double logabs
    cdef int* ipiv
    cdef float* inv
    cdef double* work = lu_work(b, n, &ipiv)
    if work == NULL:
        return
    for j in range(b.n):
        NODE(b, j).aux = arena_alloc(b.arena, <size_t>m * n0.bs)
        if NODE(b, j).aux == NULL:
            return
        for e in range(n0.bs):
            inv = NODE(b, j).aux + e * m
            lu_inverse(elem_val(ARG(b, j, 0), e), n, work, ipiv, inv, &logabs, &sign)
            NODE(b, j).val[e] = <float>logabs if sign > 0 else NAN
            for r in range(n):              # transpose in place: aux holds X^-T
                for c in range(r + 1, n):
                    inv[r * n + c], inv[c * n + r] = inv[c * n + r], inv[r * n + c]

cdef void logdet_bwd(Batch* b) noexcept nogil:
    # d log det X / dX = X^-T
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(ARG(b, 0, 0)), j, e, i
    cdef float g
    cdef float* dx
    cdef float* inv_t
    for j in range(b.n):
        for e in range(n0.bs):
            g = NODE(b, j).grad[e]
            dx = elem_grad(ARG(b, j, 0), e)
            inv_t = NODE(b, j).aux + e * m
            for i in range(m):
                dx[i] += g * inv_t[i]
