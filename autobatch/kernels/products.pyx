# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Matrix products: W (shared by identity) times the stacked other arguments of a batch
as one gemm, and their backward (the weight gradients go to kernels/weight_grads.pyx,
which may postpone them)."""
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy

from autobatch.runtime.memory cimport Arena, arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.runtime.op_ids cimport *
from autobatch.kernels.common cimport *
from autobatch.kernels.gemm cimport gemm, tgemm
from autobatch.kernels.packed cimport packed_gemm
from autobatch.kernels.weight_grads cimport postpone_weight_grad, weight_grad_gemm
from autobatch.runtime.profile cimport Profile, P_GEMM, P_GATHER, prof_start, prof_stop
from autobatch.runtime.threads cimport pool_run, pool_threads, split_worthwhile

cdef inline void weight_gemm(Batch* b, Node* w, char ta, int m, int n, int k, float* B,
                             int ldb, float beta, float* C, int ldc) noexcept nogil:
    """C = op(W) B + beta C for a W shared by the batch: a parameter's W is packed once
    per pass and reused by every batch (_packed); a computed one goes to sgemm."""
    if w.op == OP_PARAM and packed_gemm(b.packs, b.prof, ta, m, n, k, w.val, rows(w), B, ldb,
                                        beta, C, ldc):
        return
    tgemm(b.prof, ta, b'N', m, n, k, 1.0, w.val, rows(w), B, ldb, beta, C, ldc)

# W (r x k) times X (k x c): with W shared and unbatched, the batch is one gemm over
# the stacked columns of every node's X (a batched X adds its columns too).

cdef void product_fwd(Batch* b, int w_arg, int x_arg, float beta, bint keep_x) noexcept nogil:
    """Y (+)= W X for the argument pair (w_arg, x_arg) of every node; with keep_x the
    stacked X is remembered in the first node's aux for backward."""
    cdef Node* w = ARG(b, 0, w_arg)
    cdef Node* x0 = ARG(b, 0, x_arg)
    cdef Node* n0 = NODE(b, 0)
    cdef int r = rows(w), k = cols(w), c = cols(x0), j, e
    cdef float* X
    cdef Node* wj
    cdef Node* xj
    if w.bs == 1 and x0.bs == n0.bs:
        X = gather_arg(b, x_arg, b.arena)
        if X == NULL:
            return
        if keep_x:
            n0.aux = X
        weight_gemm(b, w, b'N', r, c * x0.bs * b.n, k, X, k, beta, b.block, r)
        return
    for j in range(b.n):      # batched W: one product per batch element
        wj = ARG(b, j, w_arg)
        xj = ARG(b, j, x_arg)
        for e in range(n0.bs):
            tgemm(b.prof, b'N', b'N', r, c, k, 1.0, wj.val + (0 if wj.bs == 1 else e * r * k), r,
                 xj.val + (0 if xj.bs == 1 else e * k * c), k, beta,
                 NODE(b, j).val + e * r * c, r)

cdef inline bint stacked_fresh(Batch* b, int a) noexcept nogil:
    """For argument a of every node (gradients consecutive in memory, so distinct
    nodes): True if none was written yet, then the gemm assigns (beta = 0); else the
    ones not written yet are zeroed and the gemm adds. All count as written after."""
    cdef int j
    cdef bint all_fresh = True
    for j in range(b.n):
        if not grad_fresh(ARG(b, j, a)):
            all_fresh = False
    for j in range(b.n):
        if not all_fresh:
            grad_ready(ARG(b, j, a))
        grad_mark(ARG(b, j, a))
    return all_fresh

cdef void product_bwd(Batch* b, int w_arg, int x_arg, float* X) noexcept nogil:
    """dW += dY X^T and dX += W^T dY for the pair (w_arg, x_arg); X is the stacked
    forward input of these nodes when W is shared (NULL: gather again)."""
    cdef Node* w = ARG(b, 0, w_arg)
    cdef Node* x0 = ARG(b, 0, x_arg)
    cdef Node* n0 = NODE(b, 0)
    cdef int r = rows(w), k = cols(w), c = cols(x0), j, e, M
    cdef float* dX
    cdef float* dY
    cdef Node* wj
    cdef Node* xj
    cdef float* dy
    cdef double t0
    if w.bs == 1 and x0.bs == n0.bs:
        M = c * x0.bs * b.n
        dY = b.block
        if dY == NULL:      # part of a batch: stack the output gradients
            dY = arena_alloc(b.scratch, <size_t>r * M)
            if dY == NULL:
                return
            t0 = prof_start(b.prof)
            for j in range(b.n):
                memcpy(dY + j * n0.size, NODE(b, j).grad, n0.size * sizeof(float))
            prof_stop(b.prof, P_GATHER, t0)
        if w.flags & F_NEEDS_GRAD:
            if X == NULL:
                X = gather_arg(b, x_arg, b.scratch)
                if X == NULL:
                    return
            if not (w.op == OP_PARAM and postpone_weight_grad(b.defer, w.grad, dY, X, r, k, M)):
                # W written for the first time: beta = 0
                weight_grad_gemm(b.scratch, b.prof, r, k, M, dY, X,
                                 0.0 if grad_fresh(w) else 1.0, w.grad)
                grad_mark(w)
        if batch_arg_needs_grad(b, x_arg):
            if consecutive(b, x_arg, True) != NULL:
                b.traffic.grads_in_place += 1
                weight_gemm(b, w, b'T', k, M, r, dY, r,
                            0.0 if stacked_fresh(b, x_arg) else 1.0, x0.grad, k)
            else:
                b.traffic.grads_scattered += 1
                dX = arena_alloc(b.scratch, <size_t>k * M)
                if dX == NULL:
                    return
                weight_gemm(b, w, b'T', k, M, r, dY, r, 0.0, dX, k)
                add_grad_from_stack(b, x_arg, dX)
        return
    for j in range(b.n):          # one product per batch element: add into ready gradients
        wj = ARG(b, j, w_arg)
        xj = ARG(b, j, x_arg)
        dy = NODE(b, j).grad
        if wj.flags & F_NEEDS_GRAD:
            grad_ready(wj)
        if xj.flags & F_NEEDS_GRAD:
            grad_ready(xj)
        for e in range(n0.bs):
            if wj.flags & F_NEEDS_GRAD:
                tgemm(b.prof, b'N', b'T', r, k, c, 1.0, dy + e * r * c, r,
                     xj.val + (0 if xj.bs == 1 else e * k * c), k, 1.0,
                     wj.grad + (0 if wj.bs == 1 else e * r * k), r)
            if xj.flags & F_NEEDS_GRAD:
                tgemm(b.prof, b'T', b'N', k, c, r, 1.0, wj.val + (0 if wj.bs == 1 else e * r * k), r,
                     dy + e * r * c, r, 1.0, xj.grad + (0 if xj.bs == 1 else e * k * c), k)

cdef void matmul_fwd(Batch* b) noexcept nogil:
    product_fwd(b, 0, 1, 0.0, True)

cdef void matmul_bwd(Batch* b) noexcept nogil:
    # the stacked X kept by forward is only valid for the whole batch
    product_bwd(b, 0, 1, NODE(b, 0).aux if b.block != NULL else NULL)

cdef extern from "bias_columns.h" nogil:
    void repeat_col "ab_repeat_col" (float* y, const float* x, int n, long ncols)
    void sum_cols "ab_sum_cols" (float* db, const float* dy, int n, long ld, long ncols,
                                 int set)

# A shared bias over a batch's block of columns on the engine's threads: repeated into
# ranges of the columns (forward), summed over all columns for ranges of its rows
# (backward: each element sums its columns in the one-thread order, the same bits).
ctypedef struct BiasJob:
    float* y
    const float* x
    int n
    long ncols
    int parts
    bint set

cdef void repeat_part(void* ctx, int c) noexcept nogil:
    cdef BiasJob* g = <BiasJob*>ctx
    cdef long c0 = g.ncols * c // g.parts, c1 = g.ncols * (c + 1) // g.parts
    repeat_col(g.y + c0 * g.n, g.x, g.n, c1 - c0)

cdef void sum_part(void* ctx, int c) noexcept nogil:
    cdef BiasJob* g = <BiasJob*>ctx
    # rows in multiples of 16 floats, so that every range starts on a vector boundary
    cdef int per = ((g.n + g.parts - 1) // g.parts + 15) // 16 * 16
    cdef int i0 = min(g.n, c * per), i1 = min(g.n, (c + 1) * per)
    if i1 > i0:
        sum_cols(g.y + i0, g.x + i0, i1 - i0, g.n, g.ncols, g.set)

cdef void repeat_bias(float* y, const float* x, int n, long ncols) noexcept nogil:
    cdef BiasJob g
    if not split_worthwhile(<int>min(ncols, <long>1 << 30), n):
        repeat_col(y, x, n, ncols)
        return
    g = BiasJob(y, x, n, ncols, min(pool_threads(), <int>min(ncols, 64)), False)
    pool_run(repeat_part, &g, g.parts)

cdef void sum_bias(float* db, const float* dy, int n, long ncols, bint set) noexcept nogil:
    cdef BiasJob g
    if n < 32 or not split_worthwhile(<int>min(ncols, <long>1 << 30), n):
        sum_cols(db, dy, n, n, ncols, set)
        return
    g = BiasJob(db, dy, n, ncols, min(pool_threads(), (n + 15) // 16), set)
    pool_run(sum_part, &g, g.parts)

cdef inline Node* shared_bias(Batch* b, float* block) noexcept nogil:
    """The bias when every node of the batch has the same unbatched one and their
    outputs (or gradients) are `block`, contiguous: then one loop over all the
    columns of the batch serves it. Else NULL."""
    cdef Node* bias = ARG(b, 0, 0)
    cdef int j
    if block == NULL or bias.bs != 1:
        return NULL
    for j in range(1, b.n):
        if ARG(b, j, 0) != bias:
            return NULL
    return bias

cdef void affine_fwd(Batch* b) noexcept nogil:
    # y = bias + sum_i W_i x_i; the bias (one column or all) repeats over columns and batch
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(n0), j, k, p
    cdef Node* bias = shared_bias(b, b.block)
    cdef int eb, bstride
    if bias != NULL:
        eb = elems(bias)
        repeat_bias(b.block, bias.val, eb, <long>b.n * n0.bs * (m // eb))
    else:
        for j in range(b.n):
            bias = ARG(b, j, 0)
            eb = elems(bias)
            bstride = 0 if bias.bs == 1 else eb
            for k in range(n0.bs):
                repeat_col(NODE(b, j).val + k * m, bias.val + k * bstride, eb, m // eb)
    for p in range(1, n0.nargs, 2):
        product_fwd(b, p, p + 1, 1.0, False)

cdef void bias_bwd(Batch* b) noexcept nogil:
    """The bias's gradient (+)= the sum of the columns of the output gradients (of
    each batch element into its own when the bias is batched); first_write: a bias
    gradient not written yet is assigned."""
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(n0), j, k, eb, bstride
    cdef Node* bias = shared_bias(b, b.block)
    if bias != NULL:
        eb = elems(bias)
        if bias.flags & F_NEEDS_GRAD:
            sum_bias(bias.grad, b.block, eb, <long>b.n * n0.bs * (m // eb), grad_fresh(bias))
            grad_mark(bias)
        return
    for j in range(b.n):
        bias = ARG(b, j, 0)
        if not bias.flags & F_NEEDS_GRAD:
            continue
        eb = elems(bias)
        bstride = 0 if bias.bs == 1 else eb
        for k in range(n0.bs):      # an unbatched bias: batch element 0 assigns, the rest add
            sum_cols(bias.grad + k * bstride, NODE(b, j).grad + k * m, eb, eb, m // eb,
                     grad_fresh(bias) and (bstride != 0 or k == 0))
        grad_mark(bias)

cdef void affine_bwd(Batch* b) noexcept nogil:
    cdef int p
    bias_bwd(b)
    for p in range(1, NODE(b, 0).nargs, 2):
        product_bwd(b, p, p + 1, NULL)
