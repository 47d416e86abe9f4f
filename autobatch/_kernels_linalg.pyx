# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Linear algebra on each matrix of a batch: inverse and logdet through LAPACK's LU
factorisation, in float64 (the matrix is copied to doubles, factorised, and the
result rounded to float32: n^2 conversions next to an n^3 factorisation, and a
result as accurate as float32 can hold, where DyNet's float32 Eigen LU loses digits
on ill-conditioned matrices). A singular matrix gives what DyNet gives: inverse is
NaN, logdet is -inf (renew_cg(check_validity=True) reports either).

The 3-d contractions of DyNet (contract3d_1d[_1d][_bias]) are BLAS gemv/ger calls on
the tensor seen as an (I*J, K) matrix, per batch element; an argument with a batch
of 1 repeats over the others'."""
from libc.math cimport log, fabs, NAN
from libc.stdint cimport int32_t
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport sgemv, sger
from scipy.linalg.cython_lapack cimport dgetrf, dgetri

from autobatch._memory cimport arena_alloc
from autobatch._nodes cimport *
from autobatch._kernel_util cimport *


cdef inline float* elem(Node* x, int e) noexcept nogil:
    """Batch element e of x's values (element 0 when x is not batched)."""
    return x.val + (0 if x.bs == 1 else e * elems(x))

cdef inline float* gelem(Node* x, int e) noexcept nogil:
    return x.grad + (0 if x.bs == 1 else e * elems(x))


# --------------------------------------------------------------- LU ----

cdef int lu_inverse(const float* a, int n, double* work, int* ipiv, float* inv,
                    double* logabs, int* sign) noexcept nogil:
    """LU-factorise the n x n matrix a (in doubles in work[0 : n*n]); the log of
    |det a| and its sign; with inv != NULL, a's inverse (NaN when a is singular).
    work holds 2 n^2 doubles. Returns LAPACK's info (> 0: singular)."""
    cdef int i, info = 0, lwork = n * n
    for i in range(n * n):
        work[i] = a[i]
    dgetrf(&n, &n, work, &n, ipiv, &info)
    logabs[0] = 0.0
    sign[0] = 1
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
    cdef double* w = <double*>arena_alloc(b.scratch, 4 * n * n + n)   # 2 n^2 doubles, n ints
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
            lu_inverse(elem(ARG(b, j, 0), e), n, work, ipiv, NODE(b, j).val + e * m, &logabs, &sign)

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
            gemm(b'N', b'T', n, n, n, -1.0, t, n, y, n, 1.0, gelem(ARG(b, j, 0), e), n)


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
            lu_inverse(elem(ARG(b, j, 0), e), n, work, ipiv, inv, &logabs, &sign)
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
            dx = gelem(ARG(b, j, 0), e)
            inv_t = NODE(b, j).aux + e * m
            for i in range(m):
                dx[i] += g * inv_t[i]


# ------------------------------------------------------- contractions ----
# A (I, J, K) seen as the column-major (I*J, K) matrix; y (K), z (J).
# contract3d_1d:    Y(i, j) = sum_k A_ijk y_k (+ B_ij)     args A, y [, B]
# contract3d_1d_1d: t_i = sum_jk A_ijk y_k z_j (+ b_i)     args A, y, z [, b]

cdef inline void gemv(char tr, int m, int n, float alpha, const float* A, const float* x,
                      float beta, float* y) noexcept nogil:
    cdef int one = 1
    sgemv(&tr, &m, &n, &alpha, <float*>A, &m, <float*>x, &one, &beta, y, &one)

cdef inline void ger(int m, int n, float alpha, const float* x, const float* y, float* A) noexcept nogil:
    cdef int one = 1
    sger(&m, &n, &alpha, <float*>x, &one, <float*>y, &one, A, &m)

cdef inline void add_into(float* dst, const float* src, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        dst[i] += src[i]


cdef void contract3d_1d_fwd(Batch* b) noexcept nogil:
    cdef Node* A0 = ARG(b, 0, 0)
    cdef Node* n0 = NODE(b, 0)
    cdef int IJ = A0.d[0] * A0.d[1], K = A0.d[2], j, e
    cdef bint bias = n0.nargs == 3
    cdef float* out
    for j in range(b.n):
        for e in range(n0.bs):
            out = NODE(b, j).val + e * IJ
            if bias:
                memcpy(out, elem(ARG(b, j, 2), e), IJ * sizeof(float))
            gemv(b'N', IJ, K, 1.0, elem(ARG(b, j, 0), e), elem(ARG(b, j, 1), e),
                 1.0 if bias else 0.0, out)

cdef void contract3d_1d_bwd(Batch* b) noexcept nogil:
    cdef Node* A0 = ARG(b, 0, 0)
    cdef Node* n0 = NODE(b, 0)
    cdef int IJ = A0.d[0] * A0.d[1], K = A0.d[2], j, e
    cdef bint want_A = batch_arg_needs_grad(b, 0), want_y = batch_arg_needs_grad(b, 1)
    cdef bint want_b = n0.nargs == 3 and batch_arg_needs_grad(b, 2)
    cdef float* dY
    for j in range(b.n):
        for e in range(n0.bs):
            dY = NODE(b, j).grad + e * IJ
            if want_A:              # dA += dY y^T
                ger(IJ, K, 1.0, dY, elem(ARG(b, j, 1), e), gelem(ARG(b, j, 0), e))
            if want_y:              # dy += A^T dY
                gemv(b'T', IJ, K, 1.0, elem(ARG(b, j, 0), e), dY, 1.0, gelem(ARG(b, j, 1), e))
            if want_b:
                add_into(gelem(ARG(b, j, 2), e), dY, IJ)


cdef void contract3d_1d_1d_fwd(Batch* b) noexcept nogil:
    cdef Node* A0 = ARG(b, 0, 0)
    cdef Node* n0 = NODE(b, 0)
    cdef int I = A0.d[0], J = A0.d[1], K = A0.d[2], j, e
    cdef bint bias = n0.nargs == 4
    cdef float* out
    cdef float* Ay = arena_alloc(b.scratch, I * J)
    if Ay == NULL:
        return
    for j in range(b.n):
        for e in range(n0.bs):
            out = NODE(b, j).val + e * I
            gemv(b'N', I * J, K, 1.0, elem(ARG(b, j, 0), e), elem(ARG(b, j, 1), e), 0.0, Ay)
            if bias:
                memcpy(out, elem(ARG(b, j, 3), e), I * sizeof(float))
            gemv(b'N', I, J, 1.0, Ay, elem(ARG(b, j, 2), e), 1.0 if bias else 0.0, out)

cdef void contract3d_1d_1d_bwd(Batch* b) noexcept nogil:
    cdef Node* A0 = ARG(b, 0, 0)
    cdef Node* n0 = NODE(b, 0)
    cdef int I = A0.d[0], J = A0.d[1], K = A0.d[2], j, e
    cdef bint want_A = batch_arg_needs_grad(b, 0), want_y = batch_arg_needs_grad(b, 1)
    cdef bint want_z = batch_arg_needs_grad(b, 2)
    cdef bint want_b = n0.nargs == 4 and batch_arg_needs_grad(b, 3)
    cdef float* dt
    cdef float* dz_outer = arena_alloc(b.scratch, I * J)     # dt z^T, then A y
    if dz_outer == NULL:
        return
    for j in range(b.n):
        for e in range(n0.bs):
            dt = NODE(b, j).grad + e * I
            if want_A or want_y:    # W = dt z^T (I x J): dA += W y^T, dy += A^T W
                memset(dz_outer, 0, I * J * sizeof(float))
                ger(I, J, 1.0, dt, elem(ARG(b, j, 2), e), dz_outer)
                if want_A:
                    ger(I * J, K, 1.0, dz_outer, elem(ARG(b, j, 1), e), gelem(ARG(b, j, 0), e))
                if want_y:
                    gemv(b'T', I * J, K, 1.0, elem(ARG(b, j, 0), e), dz_outer, 1.0,
                         gelem(ARG(b, j, 1), e))
            if want_z:              # dz += (A y)^T dt
                gemv(b'N', I * J, K, 1.0, elem(ARG(b, j, 0), e), elem(ARG(b, j, 1), e), 0.0, dz_outer)
                gemv(b'T', I, J, 1.0, dz_outer, dt, 1.0, gelem(ARG(b, j, 2), e))
            if want_b:
                add_into(gelem(ARG(b, j, 3), e), dt, I)
