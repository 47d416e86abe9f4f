# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Structure: concatenation, picking elements, ranges and batch elements,
transposition, lookup of table rows."""
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memset

from autobatch.runtime.memory cimport Arena, arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.runtime.op_ids cimport *
from autobatch.kernels.common cimport *

cdef void concat_fwd(Batch* b) noexcept nogil:
    # along dimension `dim`; arguments broadcast over the batch
    cdef Node* n0 = NODE(b, 0)
    cdef int nargs = n0.nargs, d = n0.attr.axis.dim, m = elems(n0), T = n0.d[d]
    cdef int inner, outer, j, a, k, o, off, xb, run
    cdef Node* x
    cdef float* y
    along_dim(n0, d, &inner, &outer)
    for j in range(b.n):
        y = NODE(b, j).val
        off = 0
        for a in range(nargs):
            x = ARG(b, j, a)
            xb = 0 if x.bs == 1 else elems(x)
            run = inner * x.d[d]
            for k in range(n0.bs):
                for o in range(outer):
                    memcpy(y + k * m + (o * T + off) * inner, x.val + k * xb + o * run,
                           run * sizeof(float))
            off += x.d[d]

cdef void concat_bwd(Batch* b) noexcept nogil:
    # first_write: an argument's gradient not written yet is assigned its slices (a
    # copy; each slice of it once, a broadcast one by batch element 0), else added to
    cdef Node* n0 = NODE(b, 0)
    cdef int nargs = n0.nargs, d = n0.attr.axis.dim, m = elems(n0), T = n0.d[d]
    cdef int inner, outer, j, a, k, o, i, off, xb, run
    cdef Node* x
    cdef float* dy
    cdef float* dx
    cdef const float* src
    cdef bint fresh
    along_dim(n0, d, &inner, &outer)
    for j in range(b.n):
        dy = NODE(b, j).grad
        off = 0
        for a in range(nargs):
            x = ARG(b, j, a)
            xb = 0 if x.bs == 1 else elems(x)
            run = inner * x.d[d]
            if x.flags & F_NEEDS_GRAD:
                fresh = grad_fresh(x)
                grad_mark(x)
                for k in range(n0.bs):
                    for o in range(outer):
                        dx = x.grad + k * xb + o * run
                        src = dy + k * m + (o * T + off) * inner
                        if fresh and (xb != 0 or k == 0):
                            memcpy(dx, src, run * sizeof(float))
                        else:
                            for i in range(run):
                                dx[i] += src[i]
            off += x.d[d]

cdef void concat_to_batch_fwd(Batch* b) noexcept nogil:
    cdef int nargs = NODE(b, 0).nargs, j, a, off
    cdef Node* x
    for j in range(b.n):
        off = 0
        for a in range(nargs):
            x = ARG(b, j, a)
            memcpy(NODE(b, j).val + off, x.val, x.size * sizeof(float))
            off += x.size

cdef void concat_to_batch_bwd(Batch* b) noexcept nogil:
    cdef int nargs = NODE(b, 0).nargs, j, a, off, i
    cdef Node* x
    cdef float* dy
    for j in range(b.n):
        off = 0
        dy = NODE(b, j).grad
        for a in range(nargs):
            x = ARG(b, j, a)
            if x.flags & F_NEEDS_GRAD:
                for i in range(x.size):
                    x.grad[i] += dy[off + i]
            off += x.size

cdef void pick_fwd(Batch* b) noexcept nogil:
    # the slice at index v along dimension `dim`; one index per batch element in ibuf
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int d = n0.attr.axis.dim, L = x0.d[d], m = elems(n0)
    cdef int inner, outer, j, k, o, v, xb
    cdef Node* x
    along_dim(x0, d, &inner, &outer)
    for j in range(b.n):
        x = ARG(b, j, 0)
        xb = 0 if x.bs == 1 else elems(x)
        for k in range(n0.bs):
            v = b.ibuf[NODE(b, j).idata + k]
            for o in range(outer):
                memcpy(NODE(b, j).val + k * m + o * inner, x.val + k * xb + (o * L + v) * inner,
                       inner * sizeof(float))

cdef void pick_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int d = n0.attr.axis.dim, L = x0.d[d], m = elems(n0)
    cdef int inner, outer, j, k, o, t, v, xb
    cdef Node* x
    cdef float* dx
    cdef float* dy
    along_dim(x0, d, &inner, &outer)
    for j in range(b.n):
        x = ARG(b, j, 0)
        xb = 0 if x.bs == 1 else elems(x)
        for k in range(n0.bs):
            v = b.ibuf[NODE(b, j).idata + k]
            for o in range(outer):
                dx = x.grad + k * xb + (o * L + v) * inner
                dy = NODE(b, j).grad + k * m + o * inner
                for t in range(inner):
                    dx[t] += dy[t]

cdef void pick_range_fwd(Batch* b) noexcept nogil:
    # every step-th element of [s, ...) along dimension `dim`, w of them (s per node in
    # idata): runs of `inner` elements; with step 1, one run of w * inner per outer index
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int d = n0.attr.range.dim, st = n0.attr.range.step
    cdef int L = x0.d[d], w = n0.d[d], m = elems(n0), mx = elems(x0)
    cdef int inner, outer, j, k, o, s, i, run
    along_dim(x0, d, &inner, &outer)
    run = inner
    if st == 1:
        inner, w = inner * w, 1         # the range is one run
    for j in range(b.n):
        s = NODE(b, j).idata
        for k in range(n0.bs):
            for o in range(outer):
                for i in range(w):
                    memcpy(NODE(b, j).val + k * m + (o * w + i) * inner,
                           ARG(b, j, 0).val + k * mx + (o * L + s + i * st) * run,
                           inner * sizeof(float))

cdef void pick_range_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int d = n0.attr.range.dim, st = n0.attr.range.step
    cdef int L = x0.d[d], w = n0.d[d], m = elems(n0), mx = elems(x0)
    cdef int inner, outer, j, k, o, s, i, t, run
    cdef float* dx
    cdef float* dy
    along_dim(x0, d, &inner, &outer)
    run = inner
    if st == 1:
        inner, w = inner * w, 1
    for j in range(b.n):
        s = NODE(b, j).idata
        for k in range(n0.bs):
            for o in range(outer):
                for i in range(w):
                    dx = ARG(b, j, 0).grad + k * mx + (o * L + s + i * st) * run
                    dy = NODE(b, j).grad + k * m + (o * w + i) * inner
                    for t in range(inner):
                        dx[t] += dy[t]

cdef void pick_batch_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int j, k, m = elems(n0)
    for j in range(b.n):
        for k in range(n0.bs):
            memcpy(NODE(b, j).val + k * m, ARG(b, j, 0).val + b.ibuf[NODE(b, j).idata + k] * m,
                   m * sizeof(float))

cdef void pick_batch_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int j, k, i, m = elems(n0)
    cdef float* dx
    for j in range(b.n):
        for k in range(n0.bs):
            dx = ARG(b, j, 0).grad + b.ibuf[NODE(b, j).idata + k] * m
            for i in range(m):
                dx[i] += NODE(b, j).grad[k * m + i]

cdef void transpose_plan(Batch* b, int* xst, int* yst, int* size) noexcept nogil:
    """The walk of a transposition: the output's box and its strides in y (contiguous)
    and in x (output dimension k is x's dimension perm[k]; the batch is last)."""
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x = ARG(b, 0, 0)
    cdef int own[5]
    cdef int a
    contiguous_strides(x, own)
    contiguous_strides(n0, yst)
    for a in range(MAX_DIMS):
        xst[a] = own[n0.attr.transpose.perm[a]]
    xst[MAX_DIMS] = own[MAX_DIMS]
    for a in range(MAX_DIMS + 1):
        size[a] = dim_or_batch(n0, a)

cdef void transpose_fwd(Batch* b) noexcept nogil:
    cdef int xst[5]
    cdef int yst[5]
    cdef int size[5]
    cdef int j
    transpose_plan(b, xst, yst, size)
    for j in range(b.n):
        strided_walk(NODE(b, j).val, yst, ARG(b, j, 0).val, xst, size, 1.0, False)

cdef void transpose_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef int xst[5]
    cdef int yst[5]
    cdef int size[5]
    cdef int j
    transpose_plan(b, xst, yst, size)
    for j in range(b.n):
        strided_walk(ARG(b, j, 0).grad, xst, NODE(b, j).grad, yst, size, 1.0, True)

# A lookup_batch node's ibuf data: the slot of its table in b.tables (values at
# 2 * slot, gradients or NULL at 2 * slot + 1), then one row index per batch element.

cdef void lookup_batch_fwd(Batch* b) noexcept nogil:
    cdef int j, k, d = elems(NODE(b, 0))
    cdef Node* y
    cdef const float* table
    for j in range(b.n):
        y = NODE(b, j)
        table = b.tables[2 * b.ibuf[y.idata]]
        for k in range(y.bs):
            memcpy(y.val + k * d, table + <size_t>b.ibuf[y.idata + 1 + k] * d, d * sizeof(float))

cdef void lookup_batch_bwd(Batch* b) noexcept nogil:
    cdef int j, k, i, d = elems(NODE(b, 0))
    cdef Node* y
    cdef float* grads
    cdef float* g
    for j in range(b.n):
        y = NODE(b, j)
        grads = b.tables[2 * b.ibuf[y.idata] + 1]
        if grads == NULL:
            continue
        for k in range(y.bs):
            g = grads + <size_t>b.ibuf[y.idata + 1 + k] * d
            for i in range(d):
                g[i] += y.grad[k * d + i]
