# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Softmax along a dimension, log_softmax, and the losses built on them
(pickneglogsoftmax, hinge)."""
from libc.math cimport logf, log, INFINITY
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memset

from autobatch._memory cimport Arena, arena_alloc
from autobatch._nodes cimport *
from autobatch._optable cimport *
from autobatch._kernel_util cimport *

cdef void softmax_run(float* y, const float* x, int r, bint logp) noexcept nogil:
    """(log-)softmax of r contiguous elements."""
    cdef float mx = fmax_of(x, r)
    cdef double s
    cdef int i
    for i in range(r):
        y[i] = exp_nonpos(x[i] - mx)
    s = fsum(y, r)
    if logp:
        for i in range(r):
            y[i] = x[i] - mx - <float>log(s)
    else:
        for i in range(r):
            y[i] = y[i] / <float>s

cdef void softmax_run_bwd(float* dx, const float* y, const float* dy, int r, bint logp) noexcept nogil:
    cdef double s = 0
    cdef int i
    if logp:
        for i in range(r):
            s += dy[i]
        for i in range(r):
            dx[i] += dy[i] - exp_nonpos(y[i]) * <float>s
    else:
        for i in range(r):
            s += dy[i] * y[i]
        for i in range(r):
            dx[i] += y[i] * (dy[i] - s)

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
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef bint logp = n0.op == OP_LOG_SOFTMAX
    cdef int inner, L, groups, j, g, l, at
    softmax_groups(n0, &inner, &L, &groups)
    cdef float* ty = NULL
    cdef float* tdy = NULL
    cdef float* tdx = NULL
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
        y = NODE(b, j).val
        dy = NODE(b, j).grad
        dx = ARG(b, j, 0).grad
        for g in range(groups):
            at = (g // inner) * inner * L + g % inner
            if inner == 1:
                softmax_run_bwd(dx + at, y + at, dy + at, L, logp)
                continue
            for l in range(L):
                ty[l] = y[at + l * inner]
                tdy[l] = dy[at + l * inner]
                tdx[l] = 0
            softmax_run_bwd(tdx, ty, tdy, L, logp)
            for l in range(L):
                dx[at + l * inner] += tdx[l]

cdef void picknls_fwd(Batch* b) noexcept nogil:
    # -log softmax(x)[i] per batch element; aux keeps the softmax for backward
    cdef Node* n0 = NODE(b, 0)
    cdef int r = rows(ARG(b, 0, 0)), j, k, i, xb
    cdef Node* x
    cdef float* xv
    cdef float* p
    cdef float mx
    cdef double s
    for j in range(b.n):
        x = ARG(b, j, 0)
        xb = 0 if x.bs == 1 else r
        NODE(b, j).aux = arena_alloc(b.arena, <size_t>r * n0.bs)
        if NODE(b, j).aux == NULL:
            return
        for k in range(n0.bs):
            xv = x.val + k * xb
            p = NODE(b, j).aux + k * r
            mx = fmax_of(xv, r)
            for i in range(r):
                p[i] = exp_nonpos(xv[i] - mx)
            s = fsum(p, r)
            for i in range(r):
                p[i] = p[i] / <float>s
            NODE(b, j).val[k] = mx + <float>log(s) - xv[b.ibuf[NODE(b, j).idata + k]]

cdef void picknls_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int r = rows(ARG(b, 0, 0)), j, k, i, xb
    cdef Node* x
    cdef float* p
    cdef float g
    for j in range(b.n):
        x = ARG(b, j, 0)
        xb = 0 if x.bs == 1 else r
        for k in range(n0.bs):
            p = NODE(b, j).aux + k * r
            g = NODE(b, j).grad[k]
            for i in range(r):
                x.grad[k * xb + i] += p[i] * g
            x.grad[k * xb + b.ibuf[NODE(b, j).idata + k]] -= g

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
