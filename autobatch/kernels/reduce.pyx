# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Reductions: sums, norms and losses of one or two arguments, max/min along a
dimension (and argmax's one-hot of the position), sum_dim/mean_dim, sum_batches."""
from libc.math cimport fabsf, logf, log, sqrt
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memset

from autobatch.runtime.memory cimport Arena, arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.runtime.op_ids cimport *
from autobatch.kernels.common cimport *

cdef void reduce_fwd(Batch* b) noexcept nogil:
    """sum_elems, mean_elems, squared_norm, l2_norm: one number per batch element."""
    cdef Node* n0 = NODE(b, 0)
    cdef int op = n0.op, j, k, i, m
    cdef Node* x
    cdef double s
    cdef float v
    for j in range(b.n):
        x = ARG(b, j, 0)
        m = elems(x)
        for k in range(x.bs):
            s = 0
            for i in range(m):
                v = x.val[k * m + i]
                s += v * v if (op == OP_SQUARED_NORM or op == OP_L2_NORM) else v
            if op == OP_MEAN_ELEMS:
                s /= m
            elif op == OP_L2_NORM:
                s = sqrt(s)
            NODE(b, j).val[k] = <float>s

cdef void reduce_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int op = n0.op, j, k, i, m
    cdef Node* x
    cdef float g, y
    for j in range(b.n):
        x = ARG(b, j, 0)
        m = elems(x)
        for k in range(x.bs):
            g = NODE(b, j).grad[k]
            y = NODE(b, j).val[k]
            for i in range(m):
                if op == OP_SUM_ELEMS:
                    x.grad[k * m + i] += g
                elif op == OP_MEAN_ELEMS:
                    x.grad[k * m + i] += g / m
                elif op == OP_SQUARED_NORM:
                    x.grad[k * m + i] += 2.0 * x.val[k * m + i] * g
                elif y > 0:
                    x.grad[k * m + i] += x.val[k * m + i] / y * g

cdef inline float huber(float r, float c) noexcept nogil:
    """Huber's loss of a residual r: quadratic within c, linear beyond."""
    return 0.5 * r * r if fabsf(r) <= c else c * (fabsf(r) - 0.5 * c)

cdef inline float huber_slope(float r, float c) noexcept nogil:
    return r if fabsf(r) <= c else (c if r > 0 else -c)

cdef void pair_reduce_fwd(Batch* b) noexcept nogil:
    """dot_product, squared_distance, l1_distance, huber_distance (c: its attribute),
    binary_log_loss of two same-size arguments."""
    cdef Node* n0 = NODE(b, 0)
    cdef int op = n0.op, j, k, i, m, xb, yb
    cdef float c = n0.attr.scalar.value
    cdef Node* x
    cdef Node* y
    cdef double s
    cdef float u, v
    for j in range(b.n):
        x = ARG(b, j, 0)
        y = ARG(b, j, 1)
        m = elems(x)
        xb = 0 if x.bs == 1 else m
        yb = 0 if y.bs == 1 else m
        for k in range(n0.bs):
            s = 0
            for i in range(m):
                u = x.val[k * xb + i]
                v = y.val[k * yb + i]
                if op == OP_DOT:
                    s += u * v
                elif op == OP_SQUARED_DISTANCE:
                    s += (u - v) * (u - v)
                elif op == OP_L1_DISTANCE:
                    s += fabsf(u - v)
                elif op == OP_HUBER_DISTANCE:
                    s += huber(u - v, c)
                else:
                    s -= v * log(u) + (1.0 - v) * log(1.0 - u)
            NODE(b, j).val[k] = <float>s

cdef void pair_reduce_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int op = n0.op, j, k, i, m, xb, yb
    cdef Node* x
    cdef Node* y
    cdef float u, v, g, gu, gv, c = n0.attr.scalar.value
    cdef bint want_x = batch_arg_needs_grad(b, 0)
    cdef bint want_y = batch_arg_needs_grad(b, 1)
    for j in range(b.n):
        x = ARG(b, j, 0)
        y = ARG(b, j, 1)
        m = elems(x)
        xb = 0 if x.bs == 1 else m
        yb = 0 if y.bs == 1 else m
        for k in range(n0.bs):
            g = NODE(b, j).grad[k]
            for i in range(m):
                u = x.val[k * xb + i]
                v = y.val[k * yb + i]
                if op == OP_DOT:
                    gu = v
                    gv = u
                elif op == OP_SQUARED_DISTANCE:
                    gu = 2.0 * (u - v)
                    gv = -gu
                elif op == OP_L1_DISTANCE:
                    gu = 1.0 if u > v else (-1.0 if u < v else 0.0)
                    gv = -gu
                elif op == OP_HUBER_DISTANCE:
                    gu = huber_slope(u - v, c)
                    gv = -gu
                else:
                    gu = -v / u + (1.0 - v) / (1.0 - u)
                    gv = -logf(u) + logf(1.0 - u)
                if want_x:
                    x.grad[k * xb + i] += gu * g
                if want_y:
                    y.grad[k * yb + i] += gv * g

cdef void extreme_dim_fwd(Batch* b) noexcept nogil:
    # max_dim / min_dim along dimension `dim` (removed from the output); the position of
    # the winner, the first one on ties, is kept as an int in aux for backward
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef bint is_max = n0.op == OP_MAX_DIM
    cdef int d = n0.attr.axis.dim, j, k, o, t, l, p, base, best, at
    cdef int inner, outer, L = x0.d[d], m = elems(x0)
    along_dim(x0, d, &inner, &outer)
    cdef float* x
    cdef float* y
    cdef int32_t* pos
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        NODE(b, j).aux = arena_alloc(b.arena, n0.size)    # int32s take a float's room
        if NODE(b, j).aux == NULL:
            return
        pos = int_aux(NODE(b, j))
        for k in range(n0.bs):
            for o in range(outer):
                for t in range(inner):
                    base = best = k * m + o * inner * L + t
                    for l in range(1, L):
                        p = base + l * inner
                        if (x[p] > x[best]) if is_max else (x[p] < x[best]):
                            best = p
                    at = (k * outer + o) * inner + t
                    y[at] = x[best]
                    pos[at] = best

cdef void recorded_positions_bwd(Batch* b) noexcept nogil:
    # each output element is the input element whose index forward recorded in int_aux
    # (max_dim, min_dim, kmax_pooling): its gradient goes back there
    if not batch_arg_needs_grad(b, 0):
        return
    cdef int j, i
    cdef int32_t* pos
    cdef float* dx
    cdef float* dy
    for j in range(b.n):
        pos = int_aux(NODE(b, j))
        dx = ARG(b, j, 0).grad
        dy = NODE(b, j).grad
        for i in range(NODE(b, j).size):
            dx[pos[i]] += dy[i]

cdef void argmax_fwd(Batch* b) noexcept nogil:
    # the one-hot vector of the first largest element of each batch element's vector
    # (DyNet's argmax: vectors only, ties to the first position as Eigen's argmax)
    cdef int j, k, i, best, m = NODE(b, 0).d[0]
    cdef float* x
    cdef float* y
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        for k in range(NODE(b, j).bs):
            best = 0
            for i in range(1, m):
                if x[k * m + i] > x[k * m + best]:
                    best = i
            memset(&y[k * m], 0, m * sizeof(float))
            y[k * m + best] = 1.0

cdef void argmax_bwd(Batch* b) noexcept nogil:
    # zero_gradient: nothing flows back (the engine zeroed the argument's gradient);
    # straight_through_gradient: the identity's gradient
    if NODE(b, 0).attr.scalar.value == 0.0 or not batch_arg_needs_grad(b, 0):
        return
    cdef int j, i
    cdef float* dx
    cdef float* dy
    for j in range(b.n):
        dx = ARG(b, j, 0).grad
        dy = NODE(b, j).grad
        for i in range(NODE(b, j).size):
            dx[i] += dy[i]

cdef void reduce_strides(const Node* x, int mask, int* size, int* ostride) noexcept nogil:
    """Sizes of x's dimensions and batch, and their strides in the output of a sum over
    the ones in mask (stride 0: summed over)."""
    cdef int a, t = 1
    for a in range(MAX_DIMS + 1):
        size[a] = dim_or_batch(x, a)
        if mask & (1 << a):
            ostride[a] = 0
        else:
            ostride[a] = t
            t *= size[a]

cdef inline void sum_dim_plan(Batch* b, int* size, int* ystrides, int* xstrides) noexcept nogil:
    """The walk of sum_dim/mean_dim over x's box: x contiguous, y with stride 0 along
    the summed dimensions."""
    reduce_strides(ARG(b, 0, 0), NODE(b, 0).attr.reduce.mask, size, ystrides)
    contiguous_strides(ARG(b, 0, 0), xstrides)

cdef void sum_dim_fwd(Batch* b) noexcept nogil:
    # sum_dim and mean_dim: y = scale * (sum of x over the dimensions in mask)
    cdef Node* n0 = NODE(b, 0)
    cdef int size[5]
    cdef int os[5]
    cdef int xst[5]
    cdef int j
    sum_dim_plan(b, size, os, xst)
    for j in range(b.n):
        memset(NODE(b, j).val, 0, n0.size * sizeof(float))
        strided_walk(NODE(b, j).val, os, ARG(b, j, 0).val, xst, size, n0.attr.reduce.scale, True)

cdef void sum_dim_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef int size[5]
    cdef int os[5]
    cdef int xst[5]
    cdef int j
    sum_dim_plan(b, size, os, xst)
    for j in range(b.n):
        strided_walk(ARG(b, j, 0).grad, xst, NODE(b, j).grad, os, size,
                     NODE(b, 0).attr.reduce.scale, True)

cdef void sum_batches_fwd(Batch* b) noexcept nogil:
    cdef int j, k, i, m
    cdef Node* x
    cdef float* y
    for j in range(b.n):
        x = ARG(b, j, 0)
        y = NODE(b, j).val
        m = elems(x)
        memset(y, 0, m * sizeof(float))
        for k in range(x.bs):
            for i in range(m):
                y[i] += x.val[k * m + i]

cdef void sum_batches_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef int j, k, i, m
    cdef Node* x
    for j in range(b.n):
        x = ARG(b, j, 0)
        m = elems(x)
        for k in range(x.bs):
            for i in range(m):
                x.grad[k * m + i] += NODE(b, j).grad[i]

# std_dim (std_elems, std_batches): y = sqrt(scale * sum (x - mu)^2) over the dimensions
# in mask, mu = scale * sum x; scale is 1/n. mu stays in aux for backward. The
# deviations x - mu are made in a scratch block with strided walks: mu is spread over
# x's box (stride 0 along the reduced dimensions), then the squares summed back.

cdef inline float* deviations(Batch* b, int j, float* mu, int* size, int* os, int* xst,
                              float* dev) noexcept nogil:
    """dev = x - mu (broadcast) for node j of the batch."""
    cdef int i
    cdef float* x = ARG(b, j, 0).val
    strided_walk(dev, xst, mu, os, size, -1.0, False)
    for i in range(ARG(b, j, 0).size):
        dev[i] += x[i]
    return dev

cdef void std_dim_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef float scale = n0.attr.reduce.scale
    cdef int size[5]
    cdef int os[5]
    cdef int xst[5]
    cdef int j, i, m = ARG(b, 0, 0).size
    sum_dim_plan(b, size, os, xst)
    cdef float* dev = arena_alloc(b.scratch, m)
    if dev == NULL:
        return
    cdef float* mu
    cdef float* y
    for j in range(b.n):
        mu = arena_alloc(b.arena, n0.size)
        if mu == NULL:
            return
        NODE(b, j).aux = mu
        memset(mu, 0, n0.size * sizeof(float))
        strided_walk(mu, os, ARG(b, j, 0).val, xst, size, scale, True)
        deviations(b, j, mu, size, os, xst, dev)
        for i in range(m):
            dev[i] = dev[i] * dev[i]
        y = NODE(b, j).val
        memset(y, 0, n0.size * sizeof(float))
        strided_walk(y, os, dev, xst, size, scale, True)
        for i in range(n0.size):
            y[i] = sqrt(y[i])

cdef void std_dim_bwd(Batch* b) noexcept nogil:
    # dy/dx_i = scale ((x_i - mu) - scale D) / y with D = sum (x - mu) over the reduced
    # elements (0 when n is their number; mu's share of the gradient otherwise). Where
    # y is 0 every deviation is 0 and the gradient is taken as 0 (the limit is not defined).
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef float scale = n0.attr.reduce.scale
    cdef int size[5]
    cdef int os[5]
    cdef int xst[5]
    cdef int j, i, o, m = ARG(b, 0, 0).size
    sum_dim_plan(b, size, os, xst)
    cdef float* dev = arena_alloc(b.scratch, 2 * <size_t>m + 2 * <size_t>n0.size)
    if dev == NULL:
        return
    cdef float* spread = dev + m          # an output-sized value spread over x's box
    cdef float* shift = spread + m        # -scale D per output element
    cdef float* factor = shift + n0.size  # scale dy / y per output element
    cdef float* dx
    for j in range(b.n):
        deviations(b, j, NODE(b, j).aux, size, os, xst, dev)
        memset(shift, 0, n0.size * sizeof(float))
        strided_walk(shift, os, dev, xst, size, -scale, True)
        for o in range(n0.size):
            factor[o] = scale * NODE(b, j).grad[o] / NODE(b, j).val[o] \
                if NODE(b, j).val[o] > 0 else 0.0
        strided_walk(spread, xst, shift, os, size, 1.0, False)
        for i in range(m):
            dev[i] += spread[i]
        strided_walk(spread, xst, factor, os, size, 1.0, False)
        dx = ARG(b, j, 0).grad
        for i in range(m):
            dx[i] += dev[i] * spread[i]
