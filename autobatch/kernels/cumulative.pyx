# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Ops along one dimension `dim` of each batch element: cumsum (DyNet's CumulativeSum,
the shape kept) and logsumexp_dim (DyNet's LogSumExpDimension, the dimension removed).
A value is seen as (inner, L, outer) per batch element (along_dim): the L elements of
a line are `inner` apart."""
from libc.math cimport INFINITY, log
from libc.stdint cimport int32_t

from autobatch.runtime.nodes cimport *
from autobatch.kernels.common cimport *


cdef inline void lines(const Node* x, int d, int* inner, int* L, int* count) noexcept nogil:
    """x's lines along d: their length L, stride inner, and how many (batch included)."""
    cdef int outer
    along_dim(x, d, inner, &outer)
    L[0] = x.d[d]
    count[0] = inner[0] * outer * x.bs


cdef inline int line_start(int g, int inner, int L) noexcept nogil:
    """Offset of the first element of line g."""
    return (g // inner) * inner * L + g % inner


cdef void cumsum_fwd(Batch* b) noexcept nogil:
    # y_l = x_0 + ... + x_l along each line, summed in double
    cdef int d = NODE(b, 0).attr.axis.dim, inner, L, count, j, g, l, at
    lines(ARG(b, 0, 0), d, &inner, &L, &count)
    cdef double s
    cdef float* x
    cdef float* y
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        for g in range(count):
            at = line_start(g, inner, L)
            s = 0
            for l in range(L):
                s += x[at + l * inner]
                y[at + l * inner] = <float>s


cdef void cumsum_bwd(Batch* b) noexcept nogil:
    # dx_l += dy_l + ... + dy_{L-1}: the cumulative sum from the end
    if not batch_arg_needs_grad(b, 0):
        return
    cdef int d = NODE(b, 0).attr.axis.dim, inner, L, count, j, g, l, at
    lines(ARG(b, 0, 0), d, &inner, &L, &count)
    cdef double s
    cdef float* dx
    cdef float* dy
    for j in range(b.n):
        dx = ARG(b, j, 0).grad
        dy = NODE(b, j).grad
        for g in range(count):
            at = line_start(g, inner, L)
            s = 0
            for l in range(L - 1, -1, -1):
                s += dy[at + l * inner]
                dx[at + l * inner] += <float>s


cdef void logsumexp_dim_fwd(Batch* b) noexcept nogil:
    # y_g = m + log sum_l exp(x_l - m), m the line's maximum; line g of x gives element g
    # of y (the dimension removed keeps the others' column-major order)
    cdef int d = NODE(b, 0).attr.axis.dim, inner, L, count, j, g, l, at
    lines(ARG(b, 0, 0), d, &inner, &L, &count)
    cdef double s
    cdef float mx
    cdef float* x
    for j in range(b.n):
        x = ARG(b, j, 0).val
        for g in range(count):
            if L == 0:      # the log of an empty sum (x has no element to read)
                NODE(b, j).val[g] = -INFINITY
                continue
            at = line_start(g, inner, L)
            mx = x[at]
            for l in range(1, L):
                if x[at + l * inner] > mx:
                    mx = x[at + l * inner]
            s = 0
            for l in range(L):
                s += exp_nonpos(x[at + l * inner] - mx)
            NODE(b, j).val[g] = mx + <float>log(s)


cdef void logsumexp_dim_bwd(Batch* b) noexcept nogil:
    # dx_l += softmax(x)_l dy = exp(x_l - y) dy
    if not batch_arg_needs_grad(b, 0):
        return
    cdef int d = NODE(b, 0).attr.axis.dim, inner, L, count, j, g, l, at
    lines(ARG(b, 0, 0), d, &inner, &L, &count)
    cdef float y, dy
    cdef float* x
    cdef float* dx
    for j in range(b.n):
        x = ARG(b, j, 0).val
        dx = ARG(b, j, 0).grad
        for g in range(count):
            at = line_start(g, inner, L)
            y = NODE(b, j).val[g]
            dy = NODE(b, j).grad[g]
            for l in range(L):
                dx[at + l * inner] += exp_nonpos(x[at + l * inner] - y) * dy
