# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Softmax along a dimension, log_softmax, and the losses built on them
(pickneglogsoftmax, hinge)."""
from libc.math cimport logf, log, INFINITY
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memset

from autobatch.runtime.memory cimport Arena, arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.runtime.op_ids cimport *
from autobatch.kernels.common cimport *
from autobatch.runtime.threads cimport pool_run, pool_threads, split_worthwhile

cdef extern from "softmax.h" nogil:
    float col_max "ab_col_max" (const float* x, int n)
    double col_sum_exp "ab_col_sum_exp" (float* y, const float* x, int n, float mx)
    void col_divide "ab_col_divide" (float* y, int n, float s)
    void col_log_softmax "ab_col_log_softmax" (float* y, const float* x, int n, float mx, float ls)
    void col_softmax_scaled "ab_col_softmax_scaled" (float* dx, const float* x, int n, float mx,
                                                     float scale, int add)
    double col_dot "ab_col_dot" (const float* dy, const float* y, int n)
    void col_softmax_bwd "ab_col_softmax_bwd" (float* dx, const float* y, const float* dy, int n,
                                               float s, int logp, int add)

cdef void softmax_run(float* y, const float* x, int r, bint logp) noexcept nogil:
    """(log-)softmax of r contiguous elements."""
    cdef float mx = col_max(x, r)
    if logp:
        col_log_softmax(y, x, r, mx, <float>log(col_sum_exp(NULL, x, r, mx)))
    else:
        col_divide(y, r, <float>col_sum_exp(y, x, r, mx))

cdef inline void softmax_run_bwd(float* dx, const float* y, const float* dy, int r, bint logp,
                                 bint add) noexcept nogil:
    cdef double s = col_dot(dy, NULL, r) if logp else col_dot(dy, y, r)
    col_softmax_bwd(dx, y, dy, r, <float>s, logp, add)

cdef inline void softmax_groups(const Node* n, int* inner, int* L, int* groups) noexcept nogil:
    """Softmax along dimension `dim` normalises groups of L elements `inner` apart."""
    cdef int a, d = n.attr.axis.dim
    inner[0] = 1
    for a in range(d):
        inner[0] *= n.d[a]
    L[0] = n.d[d]
    groups[0] = n.size // L[0]

cdef void softmax_fwd(Batch* b) noexcept nogil:
    # along dimension `dim` (0: each column, contiguous; else gathered); log_softmax
    # writes log-probabilities
    cdef Node* n0 = NODE(b, 0)
    cdef bint logp = n0.op == OP_LOG_SOFTMAX
    cdef int inner, L, groups, j, g, l, at
    softmax_groups(n0, &inner, &L, &groups)
    cdef float* tx = NULL
    cdef float* ty = NULL
    cdef float* x
    cdef float* y
    if inner > 1:
        tx = arena_alloc(b.scratch, 2 * <size_t>L)
        if tx == NULL:
            return
        ty = tx + L
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        for g in range(groups):
            at = (g // inner) * inner * L + g % inner
            if inner == 1:
                softmax_run(y + at, x + at, L, logp)
                continue
            for l in range(L):
                tx[l] = x[at + l * inner]
            softmax_run(ty, tx, L, logp)
            for l in range(L):
                y[at + l * inner] = ty[l]

cdef void softmax_bwd(Batch* b) noexcept nogil:
    # first_write: each node's groups cover its argument's gradient once, so a
    # gradient not written yet is assigned (a node's argument twice in one batch: the
    # first assigns, the second adds)
    cdef Node* n0 = NODE(b, 0)
    cdef bint logp = n0.op == OP_LOG_SOFTMAX, add
    cdef int inner, L, groups, j, g, l, at
    softmax_groups(n0, &inner, &L, &groups)
    cdef float* ty = NULL
    cdef float* tdy = NULL
    cdef float* tdx = NULL
    cdef Node* x
    cdef float* y
    cdef float* dy
    cdef float* dx
    if inner > 1:
        ty = arena_alloc(b.scratch, 3 * <size_t>L)
        if ty == NULL:
            return
        tdy = ty + L
        tdx = tdy + L
    for j in range(b.n):
        x = ARG(b, j, 0)
        if not x.flags & F_NEEDS_GRAD:
            continue
        add = not grad_fresh(x)
        grad_mark(x)
        y = NODE(b, j).val
        dy = NODE(b, j).grad
        dx = x.grad
        for g in range(groups):
            at = (g // inner) * inner * L + g % inner
            if inner == 1:
                softmax_run_bwd(dx + at, y + at, dy + at, L, logp, add)
                continue
            for l in range(L):
                ty[l] = y[at + l * inner]
                tdy[l] = dy[at + l * inner]
            softmax_run_bwd(tdx, ty, tdy, L, logp, False)
            if add:
                for l in range(L):
                    dx[at + l * inner] += tdx[l]
            else:
                for l in range(L):
                    dx[at + l * inner] = tdx[l]

# pickneglogsoftmax keeps, per column, the maximum and the sum of exps of its input
# (aux: 2 floats per batch element), not the softmax: backward recomputes the exps
# from the input, which costs less than writing and reading back a softmax as large
# as the logits (a 10,000-way output layer).

cdef void picknls_fwd_range(Batch* b, int j0, int j1) noexcept nogil:
    # -log softmax(x)[i] = max + log(sum exp(x - max)) - x[i] per batch element
    cdef int r = rows(ARG(b, 0, 0)), j, k, xb
    cdef Node* x
    cdef Node* n
    cdef float* xv
    cdef float mx
    cdef double s
    for j in range(j0, j1):
        n = NODE(b, j)
        x = ARG(b, j, 0)
        xb = 0 if x.bs == 1 else r
        for k in range(n.bs):
            xv = x.val + k * xb
            mx = col_max(xv, r)
            s = col_sum_exp(NULL, xv, r, mx)
            n.aux[2 * k] = mx
            n.aux[2 * k + 1] = <float>s
            n.val[k] = mx + <float>log(s) - xv[b.ibuf[n.idata + k]]

ctypedef struct NodeRanges:
    Batch* b
    int parts

cdef void picknls_fwd_part(void* ctx, int c) noexcept nogil:
    cdef NodeRanges* g = <NodeRanges*>ctx
    picknls_fwd_range(g.b, <int>(<long>c * g.b.n // g.parts),
                      <int>(<long>(c + 1) * g.b.n // g.parts))

cdef void picknls_fwd(Batch* b) noexcept nogil:
    """The aux of every node first (the arena is not shared between threads), then the
    columns, as ranges of nodes over the engine's threads when the logits are many
    (a language model's 10,000-way output layer)."""
    cdef Node* n0 = NODE(b, 0)
    cdef float* aux = arena_alloc(b.arena, 2 * <size_t>n0.bs * b.n)
    cdef int j
    cdef NodeRanges g
    if aux == NULL:
        return
    for j in range(b.n):
        NODE(b, j).aux = aux + 2 * <size_t>n0.bs * j
    if split_worthwhile(b.n, rows(ARG(b, 0, 0)) * n0.bs):
        g.b = b
        g.parts = min(pool_threads(), b.n)
        pool_run(picknls_fwd_part, &g, g.parts)
    else:
        picknls_fwd_range(b, 0, b.n)

cdef void picknls_bwd(Batch* b) noexcept nogil:
    # dx += (softmax(x) - onehot(i)) g; first_write: an argument not written yet is
    # assigned (all of it: every batch element's column, or the one column of an
    # unbatched x, which the other batch elements then add to)
    cdef int r = rows(ARG(b, 0, 0)), j, k, xb
    cdef Node* x
    cdef Node* n
    cdef float g
    cdef bint add
    for j in range(b.n):
        n = NODE(b, j)
        x = ARG(b, j, 0)
        if not x.flags & F_NEEDS_GRAD:
            continue
        xb = 0 if x.bs == 1 else r
        add = not grad_fresh(x)
        grad_mark(x)
        for k in range(n.bs):
            g = n.grad[k]
            col_softmax_scaled(x.grad + k * xb, x.val + k * xb, r, n.aux[2 * k],
                               g / n.aux[2 * k + 1], add or (xb == 0 and k > 0))
            x.grad[k * xb + b.ibuf[n.idata + k]] -= g

cdef void hinge_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int r = rows(ARG(b, 0, 0)), j, k, i, gold, xb
    cdef float* xv
    cdef float s, v
    for j in range(b.n):
        xb = 0 if ARG(b, j, 0).bs == 1 else r
        for k in range(n0.bs):
            xv = ARG(b, j, 0).val + k * xb
            gold = b.ibuf[NODE(b, j).idata + k]
            s = 0
            for i in range(r):
                if i != gold:
                    v = n0.attr.hinge.margin - xv[gold] + xv[i]
                    if v > 0:
                        s += v
            NODE(b, j).val[k] = s

cdef void hinge_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int r = rows(ARG(b, 0, 0)), j, k, i, gold, xb
    cdef float* xv
    cdef float* dx
    cdef float g
    for j in range(b.n):
        xb = 0 if ARG(b, j, 0).bs == 1 else r
        for k in range(n0.bs):
            xv = ARG(b, j, 0).val + k * xb
            dx = ARG(b, j, 0).grad + k * xb
            gold = b.ibuf[NODE(b, j).idata + k]
            g = NODE(b, j).grad[k]
            for i in range(r):
                if i != gold and n0.attr.hinge.margin - xv[gold] + xv[i] > 0:
                    dx[i] += g
                    dx[gold] -= g

# log_softmax(x, restrict=[...]): DyNet's RestrictedLogSoftmax. ibuf at idata holds the
# count, then the restricted rows; each column of every batch element is normalised over
# those rows only and the others are -inf (one row alone gives 0, as DyNet).

cdef void restricted_log_softmax_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int r = rows(n0), cols_ = n0.size // r, j, c, t, n
    cdef const int32_t* keep
    cdef float* x
    cdef float* y
    cdef float mx
    cdef double s
    for j in range(b.n):
        n = b.ibuf[NODE(b, j).idata]
        keep = b.ibuf + NODE(b, j).idata + 1
        for c in range(cols_):
            x = ARG(b, j, 0).val + c * r
            y = NODE(b, j).val + c * r
            mx = x[keep[0]]
            for t in range(1, n):
                if x[keep[t]] > mx:
                    mx = x[keep[t]]
            s = 0
            for t in range(n):
                s += exp_nonpos(x[keep[t]] - mx)
            for t in range(r):
                y[t] = -INFINITY
            for t in range(n):
                y[keep[t]] = 0.0 if n == 1 else x[keep[t]] - mx - <float>log(s)

cdef void restricted_log_softmax_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int r = rows(n0), cols_ = n0.size // r, j, c, t, n
    cdef const int32_t* keep
    cdef float* y
    cdef float* dy
    cdef float* dx
    cdef double s
    for j in range(b.n):
        n = b.ibuf[NODE(b, j).idata]
        keep = b.ibuf + NODE(b, j).idata + 1
        for c in range(cols_):
            y = NODE(b, j).val + c * r
            dy = NODE(b, j).grad + c * r
            dx = ARG(b, j, 0).grad + c * r
            s = 0
            for t in range(n):
                s += dy[keep[t]]
            for t in range(n):
                dx[keep[t]] += dy[keep[t]] - exp_nonpos(y[keep[t]]) * <float>s
