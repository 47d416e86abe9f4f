# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Selections: select_rows / select_cols (an index list per node), strided_select (a
range and a step per dimension and the batch, per node) and kmax_pooling (the k
largest values along a dimension, in their order).

The per-node data (index lists, ranges and steps) lives in the graph's ibuf, not in
the signature: a kernel reads each node's own data, so nodes that select different
rows of same-shaped arguments run together."""
from libc.stdint cimport int32_t
from libc.stdlib cimport qsort
from libc.string cimport memcpy

from autobatch.runtime.memory cimport arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.kernels.common cimport *


# ---------------------------------------------------------------- select ----
# Output index i along dimension `dim` is the argument's index ibuf[idata + i]; every
# other dimension and the batch are kept.

cdef void select_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int d = n0.attr.axis.dim, L = x0.d[d], W = n0.d[d], m = elems(n0), mx = elems(x0)
    cdef int inner, outer, j, k, o, i
    cdef const int32_t* idx
    along_dim(x0, d, &inner, &outer)
    for j in range(b.n):
        idx = b.ibuf + NODE(b, j).idata
        for k in range(n0.bs):
            for o in range(outer):
                for i in range(W):
                    memcpy(NODE(b, j).val + k * m + (o * W + i) * inner,
                           ARG(b, j, 0).val + k * mx + (o * L + idx[i]) * inner, inner * sizeof(float))

cdef void select_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int d = n0.attr.axis.dim, L = x0.d[d], W = n0.d[d], m = elems(n0), mx = elems(x0)
    cdef int inner, outer, j, k, o, i, t
    cdef const int32_t* idx
    cdef float* dx
    cdef float* dy
    along_dim(x0, d, &inner, &outer)
    for j in range(b.n):
        idx = b.ibuf + NODE(b, j).idata
        for k in range(n0.bs):
            for o in range(outer):
                for i in range(W):          # a repeated index adds up
                    dx = ARG(b, j, 0).grad + k * mx + (o * L + idx[i]) * inner
                    dy = NODE(b, j).grad + k * m + (o * W + i) * inner
                    for t in range(inner):
                        dx[t] += dy[t]


# -------------------------------------------------------- strided_select ----
# A node's ibuf data: its first index in each of the four dimensions and the batch,
# then its step in each; the output's shape is the count along each.

cdef int strided_plan(Batch* b, int j, int* xst, int* yst, int* size) noexcept nogil:
    """The walk of node j: strides in x (its own strides times the steps) and in y,
    the output box; returns the position of its first element in x's values."""
    cdef Node* n = NODE(b, j)
    cdef Node* x = ARG(b, j, 0)
    cdef const int32_t* p = b.ibuf + n.idata
    cdef int own[5]
    cdef int a, off = 0
    contiguous_strides(x, own)
    contiguous_strides(n, yst)
    for a in range(MAX_DIMS + 1):
        xst[a] = own[a] * p[MAX_DIMS + 1 + a]
        off += own[a] * p[a]
        size[a] = dim_or_batch(n, a)
    return off

cdef void strided_fwd(Batch* b) noexcept nogil:
    cdef int xst[5]
    cdef int yst[5]
    cdef int size[5]
    cdef int j
    cdef int off
    for j in range(b.n):
        off = strided_plan(b, j, xst, yst, size)
        strided_walk(NODE(b, j).val, yst, ARG(b, j, 0).val + off, xst, size, 1.0, False)

cdef void strided_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef int xst[5]
    cdef int yst[5]
    cdef int size[5]
    cdef int j
    cdef int off
    for j in range(b.n):
        off = strided_plan(b, j, xst, yst, size)
        strided_walk(ARG(b, j, 0).grad + off, xst, NODE(b, j).grad, yst, size, 1.0, True)


# ---------------------------------------------------------- kmax_pooling ----
# Along dimension `dim` (k is the output's size there): the values >= the k-th
# largest, the first k of them in their order (DyNet's rule, ties to the earliest).
# Their positions in x are kept as ints in aux for backward.

cdef void kmax_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int d = n0.attr.axis.dim, L = x0.d[d], K = n0.d[d], mx = elems(x0), m = elems(n0)
    cdef int inner, outer, j, e, o, t, l, taken, base
    cdef float c
    cdef float* x
    cdef float* y
    cdef int32_t* pos
    cdef float* line = arena_alloc(b.scratch, L)
    if line == NULL:
        return
    along_dim(x0, d, &inner, &outer)
    for j in range(b.n):
        NODE(b, j).aux = arena_alloc(b.arena, n0.size)     # int32s take a float's room
        if NODE(b, j).aux == NULL:
            return
        pos = int_aux(NODE(b, j))
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        for e in range(n0.bs):
            for o in range(outer):
                for t in range(inner):
                    base = e * mx + o * L * inner + t
                    for l in range(L):
                        line[l] = x[base + l * inner]
                    qsort(line, L, sizeof(float), descending)
                    c = line[K - 1]
                    taken = 0
                    for l in range(L):
                        if taken < K and x[base + l * inner] >= c:
                            y[e * m + (o * K + taken) * inner + t] = x[base + l * inner]
                            pos[e * m + (o * K + taken) * inner + t] = base + l * inner
                            taken += 1
                    # NaNs compare false: fill the rest with them, so that every
                    # output (and the position backward writes to) is set
                    for l in range(L):
                        if taken < K and not x[base + l * inner] >= c:
                            y[e * m + (o * K + taken) * inner + t] = x[base + l * inner]
                            pos[e * m + (o * K + taken) * inner + t] = base + l * inner
                            taken += 1
