# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""DyNet's 3-d tensor contractions, with the tensor A (I, J, K) seen as the
column-major (I*J, K) matrix:

    contract3d_1d:    Y(i, j) = sum_k A_ijk y_k (+ B_ij)     arguments A, y [, B]
    contract3d_1d_1d: t_i = sum_jk A_ijk y_k z_j (+ b_i)     arguments A, y, z [, b]

A is shared by identity (its node id is in the signature, as matmul's W): when it is
not batched and y has the output's batch, the A y of every node and batch element is
one gemm over the stacked y's, and backward's dA and dy are one gemm each. Otherwise
(a batched A, or a y that repeats over a batched z or bias) a gemv per batch element;
an argument with a batch of 1 repeats over the others'."""
from libc.string cimport memcpy, memset

from autobatch.runtime.memory cimport arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.kernels.common cimport *
from autobatch.kernels.gemm cimport gemm


cdef inline bint one_gemm(Batch* b) noexcept nogil:
    """Whether A y of the whole batch is one gemm: A (shared) unbatched, and the y's
    stacked are the output's columns, one per node and batch element."""
    return ARG(b, 0, 0).bs == 1 and ARG(b, 0, 1).bs == NODE(b, 0).bs

cdef float* stacked_grads(Batch* b) noexcept nogil:
    """The output gradients of the batch, one column per node and batch element."""
    if b.block != NULL:
        return b.block
    cdef int j, per = NODE(b, 0).size
    cdef float* out = arena_alloc(b.scratch, <size_t>per * b.n)
    if out != NULL:
        for j in range(b.n):
            memcpy(out + j * per, NODE(b, j).grad, per * sizeof(float))
    return out

cdef float* stacked_Ay(Batch* b) noexcept nogil:
    """A y for every node and batch element (one_gemm), I*J rows, in scratch."""
    cdef Node* A = ARG(b, 0, 0)
    cdef int IJ = A.d[0] * A.d[1], K = A.d[2]
    cdef float* Y = gather_arg(b, 1, b.scratch)
    cdef float* out = arena_alloc(b.scratch, <size_t>IJ * NODE(b, 0).bs * b.n)
    if Y == NULL or out == NULL:
        return NULL
    gemm(b'N', b'N', IJ, NODE(b, 0).bs * b.n, K, 1.0, A.val, IJ, Y, K, 0.0, out, IJ)
    return out

cdef void shared_grads(Batch* b, float* W) noexcept nogil:
    """dA += W Y^T and dy += A^T W for W = dLoss/d(A y), one column per node and batch
    element (one_gemm)."""
    cdef Node* A = ARG(b, 0, 0)
    cdef int IJ = A.d[0] * A.d[1], K = A.d[2], M = NODE(b, 0).bs * b.n
    cdef float* Y
    cdef float* dY
    if A.flags & F_NEEDS_GRAD:
        Y = gather_arg(b, 1, b.scratch)
        if Y == NULL:
            return
        gemm(b'N', b'T', IJ, K, M, 1.0, W, IJ, Y, K, 1.0, A.grad, IJ)
    if batch_arg_needs_grad(b, 1):
        dY = arena_alloc(b.scratch, <size_t>K * M)
        if dY == NULL:
            return
        gemm(b'T', b'N', K, M, IJ, 1.0, A.val, IJ, W, IJ, 0.0, dY, K)
        add_grad_from_stack(b, 1, dY)

cdef void add_bias(Batch* b, int arg, bint backward) noexcept nogil:
    """Forward: each output = its bias (repeated over the batch if it has none);
    backward: the bias's gradient += the output's."""
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(n0), j, e, i
    cdef float* g
    cdef float* dy
    if backward and not batch_arg_needs_grad(b, arg):
        return
    for j in range(b.n):
        for e in range(n0.bs):
            if not backward:
                memcpy(NODE(b, j).val + e * m, elem_val(ARG(b, j, arg), e), m * sizeof(float))
                continue
            g = elem_grad(ARG(b, j, arg), e)
            dy = NODE(b, j).grad + e * m
            for i in range(m):
                g[i] += dy[i]


# ---------------------------------------------------------- contract3d_1d ----

cdef void contract3d_1d_fwd(Batch* b) noexcept nogil:
    cdef Node* A0 = ARG(b, 0, 0)
    cdef Node* n0 = NODE(b, 0)
    cdef int IJ = A0.d[0] * A0.d[1], K = A0.d[2], j, e
    cdef bint bias = n0.nargs == 3
    cdef float* Y
    if bias:
        add_bias(b, 2, False)
    if one_gemm(b):
        Y = gather_arg(b, 1, b.scratch)
        if Y != NULL:
            gemm(b'N', b'N', IJ, n0.bs * b.n, K, 1.0, A0.val, IJ, Y, K, 1.0 if bias else 0.0,
                 b.block, IJ)
        return
    for j in range(b.n):
        for e in range(n0.bs):
            gemv(b'N', IJ, K, 1.0, elem_val(ARG(b, j, 0), e), elem_val(ARG(b, j, 1), e),
                 1.0 if bias else 0.0, NODE(b, j).val + e * IJ)

cdef void contract3d_1d_bwd(Batch* b) noexcept nogil:
    cdef Node* A0 = ARG(b, 0, 0)
    cdef Node* n0 = NODE(b, 0)
    cdef int IJ = A0.d[0] * A0.d[1], K = A0.d[2], j, e
    cdef float* dY
    if n0.nargs == 3:
        add_bias(b, 2, True)
    if one_gemm(b):
        dY = stacked_grads(b)
        if dY != NULL:
            shared_grads(b, dY)
        return
    for j in range(b.n):
        for e in range(n0.bs):
            dY = NODE(b, j).grad + e * IJ
            if ARG(b, j, 0).flags & F_NEEDS_GRAD:       # dA += dY y^T
                ger(IJ, K, 1.0, dY, elem_val(ARG(b, j, 1), e), elem_grad(ARG(b, j, 0), e))
            if ARG(b, j, 1).flags & F_NEEDS_GRAD:       # dy += A^T dY
                gemv(b'T', IJ, K, 1.0, elem_val(ARG(b, j, 0), e), dY, 1.0, elem_grad(ARG(b, j, 1), e))


# ------------------------------------------------------- contract3d_1d_1d ----
# t = (A y) z with A y an (I, J) matrix; backward through W = dt z^T = dLoss/d(A y).

cdef void contract3d_1d_1d_fwd(Batch* b) noexcept nogil:
    cdef Node* A0 = ARG(b, 0, 0)
    cdef Node* n0 = NODE(b, 0)
    cdef int I = A0.d[0], J = A0.d[1], K = A0.d[2], j, e
    cdef bint bias = n0.nargs == 4, shared = one_gemm(b)
    cdef float* Ay = stacked_Ay(b) if shared else arena_alloc(b.scratch, I * J)
    if Ay == NULL:
        return
    if bias:
        add_bias(b, 3, False)
    for j in range(b.n):
        for e in range(n0.bs):
            if not shared:
                gemv(b'N', I * J, K, 1.0, elem_val(ARG(b, j, 0), e), elem_val(ARG(b, j, 1), e), 0.0, Ay)
            gemv(b'N', I, J, 1.0, Ay + (<size_t>(j * n0.bs + e) * I * J if shared else 0),
                 elem_val(ARG(b, j, 2), e), 1.0 if bias else 0.0, NODE(b, j).val + e * I)

cdef void contract3d_1d_1d_bwd(Batch* b) noexcept nogil:
    cdef Node* A0 = ARG(b, 0, 0)
    cdef Node* n0 = NODE(b, 0)
    cdef int I = A0.d[0], J = A0.d[1], K = A0.d[2], IJ = A0.d[0] * A0.d[1], j, e
    cdef size_t col                 # the stacked columns may hold more than 2^31 floats
    cdef bint shared = one_gemm(b)
    cdef int M = n0.bs * b.n if shared else 1
    if n0.nargs == 4:
        add_bias(b, 3, True)
    cdef float* W = arena_alloc(b.scratch, <size_t>IJ * M)
    cdef float* Ay = stacked_Ay(b) if shared else arena_alloc(b.scratch, IJ)
    if W == NULL or Ay == NULL:
        return
    cdef float* dt
    cdef Node* A
    cdef Node* y
    memset(W, 0, <size_t>IJ * M * sizeof(float))
    for j in range(b.n):
        A, y = ARG(b, j, 0), ARG(b, j, 1)
        for e in range(n0.bs):
            dt = NODE(b, j).grad + e * I
            col = <size_t>(j * n0.bs + e) * IJ if shared else 0
            if not shared:
                gemv(b'N', IJ, K, 1.0, elem_val(A, e), elem_val(y, e), 0.0, Ay)
            if ARG(b, j, 2).flags & F_NEEDS_GRAD:       # dz += (A y)^T dt
                gemv(b'T', I, J, 1.0, Ay + col, dt, 1.0, elem_grad(ARG(b, j, 2), e))
            ger(I, J, 1.0, dt, elem_val(ARG(b, j, 2), e), W + col)
            if shared:
                continue
            if A.flags & F_NEEDS_GRAD:                  # dA += W y^T, dy += A^T W
                ger(IJ, K, 1.0, W, elem_val(y, e), elem_grad(A, e))
            if y.flags & F_NEEDS_GRAD:
                gemv(b'T', IJ, K, 1.0, elem_val(A, e), W, 1.0, elem_grad(y, e))
            memset(W, 0, IJ * sizeof(float))
    if shared:
        shared_grads(b, W)
