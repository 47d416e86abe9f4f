# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Elementwise kernels: unary and binary ops (their math is a line of kernels/elementwise.h,
reached through b.math), broadcasting, dropout and noise, and the n-ary sums."""
from libc.math cimport logf
from autobatch.runtime.rng cimport node_stream, stream_uniform, stream_normal
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcpy, memset

from autobatch.runtime.memory cimport Arena, arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.runtime.op_ids cimport *
from autobatch.kernels.common cimport *

# The math of every unary and binary elementwise op is one line of kernels/elementwise.h
# (forward and derivative side by side); these kernels call its whole-array loops.

cdef void unary_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef ab_unary_fwd f = b.math.ufwd
    cdef float* x = consecutive(b, 0, False)
    cdef int j
    if x != NULL:                   # one call for the whole batch
        f(b.block, x, n0.size * b.n, n0.attr.scalar.value)
        return
    for j in range(b.n):
        f(NODE(b, j).val, ARG(b, j, 0).val, n0.size, n0.attr.scalar.value)

cdef void unary_bwd(Batch* b) noexcept nogil:
    # first_write: an argument's gradient not written yet is assigned, not added to
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef ab_unary_bwd f = b.math.ubwd
    cdef int j
    cdef Node* x
    cdef bint fresh
    for j in range(b.n):
        x = ARG(b, j, 0)
        fresh = grad_fresh(x)
        grad_mark(x)
        f(x.grad, x.val, NODE(b, j).val, NODE(b, j).grad, n0.size, n0.attr.scalar.value, fresh)

# Binary elementwise ops broadcast as DyNet does: along every dimension (the batch
# included) an argument has the output's size or 1. The loops over the output are planned
# once per batch (every node of a batch has the same shapes): unit dimensions are dropped
# and neighbours merged while every operand stays contiguous across them, so without
# broadcasting the whole value is one run, one call of the kernels/elementwise.h loop per node.

ctypedef struct Plan:
    int n                     # loops; loop 0 is the innermost, one run of the elementwise loop
    int size[5]               # iterations of each loop
    int sz[5]                 # element strides of the output ...
    int sx[5]                 # ... and of the two arguments (0: broadcast)
    int sy[5]

ctypedef struct Cursor:       # position in the outer loops and the offsets of the current run
    int i[5]
    int z, x, y

cdef Plan binary_plan(const Node* z, const Node* x, const Node* y) noexcept nogil:
    cdef Plan p
    cdef int a, k, size, wx, wy, tz = 1, tx = 1, ty = 1
    p.n = 0
    for a in range(MAX_DIMS + 1):
        size = dim_or_batch(z, a)
        if size > 1:
            wx = tx if dim_or_batch(x, a) > 1 else 0
            wy = ty if dim_or_batch(y, a) > 1 else 0
            k = p.n - 1
            if k >= 0 and tz == p.sz[k] * p.size[k] and wx == p.sx[k] * p.size[k] \
                    and wy == p.sy[k] * p.size[k]:
                p.size[k] *= size
            else:
                p.size[p.n] = size
                p.sz[p.n] = tz
                p.sx[p.n] = wx
                p.sy[p.n] = wy
                p.n += 1
        tz *= size
        tx *= dim_or_batch(x, a)
        ty *= dim_or_batch(y, a)
    if p.n == 0:              # a single element
        p.n = 1
        p.size[0] = p.sz[0] = p.sx[0] = p.sy[0] = 1
    return p

cdef inline bint next_run(const Plan* p, Cursor* c) noexcept nogil:
    """Step the outer loops (1 .. n-1) to the next run; False after the last one."""
    cdef int a
    for a in range(1, p.n):
        c.i[a] += 1
        c.z += p.sz[a]
        c.x += p.sx[a]
        c.y += p.sy[a]
        if c.i[a] < p.size[a]:
            return True
        c.i[a] = 0
        c.z -= p.sz[a] * p.size[a]
        c.x -= p.sx[a] * p.size[a]
        c.y -= p.sy[a] * p.size[a]
    return False

cdef void binary_fwd(Batch* b) noexcept nogil:
    cdef ab_binary_fwd f = b.math.bfwd
    cdef Plan p = binary_plan(NODE(b, 0), ARG(b, 0, 0), ARG(b, 0, 1))
    cdef Cursor c
    cdef float* z
    cdef float* x
    cdef float* y
    cdef int j
    for j in range(b.n):
        z = NODE(b, j).val
        x = ARG(b, j, 0).val
        y = ARG(b, j, 1).val
        memset(&c, 0, sizeof(Cursor))
        while True:
            f(z + c.z, x + c.x, p.sx[0], y + c.y, p.sy[0], p.size[0])
            if not next_run(&p, &c):
                break

cdef inline bint first_write_of(Node* x, const Node* z) noexcept nogil:
    """Whether this write of x's gradient may assign: x was not written yet and is not
    broadcast (every element is written once); else it is made ready to add into."""
    cdef bint assign = grad_fresh(x) and x.size == z.size
    if not assign:
        grad_ready(x)
    grad_mark(x)
    return assign

cdef void binary_bwd(Batch* b) noexcept nogil:
    # a broadcast argument's gradient sums over the positions it was repeated at;
    # first_write: an argument's gradient not written yet is assigned when it is not
    # broadcast (x and y may be one node: its second write adds)
    cdef int op = NODE(b, 0).op
    cdef Plan p = binary_plan(NODE(b, 0), ARG(b, 0, 0), ARG(b, 0, 1))
    cdef Cursor c
    cdef Node* x
    cdef Node* y
    cdef Node* z
    cdef bint want_x, want_y, set_x = False, set_y = False
    cdef int j
    for j in range(b.n):
        x = ARG(b, j, 0)
        y = ARG(b, j, 1)
        z = NODE(b, j)
        want_x = (x.flags & F_NEEDS_GRAD) != 0
        want_y = (y.flags & F_NEEDS_GRAD) != 0
        if want_x:
            set_x = first_write_of(x, z)
        if want_y:
            set_y = first_write_of(y, z)
        memset(&c, 0, sizeof(Cursor))
        while True:
            if want_x:
                b.math.bbwd_x(x.grad + c.x, p.sx[0], x.val + c.x, p.sx[0], y.val + c.y, p.sy[0],
                               z.val + c.z, z.grad + c.z, p.size[0], set_x)
            if want_y:
                b.math.bbwd_y(y.grad + c.y, p.sy[0], x.val + c.x, p.sx[0], y.val + c.y, p.sy[0],
                               z.val + c.z, z.grad + c.z, p.size[0], set_y)
            if not next_run(&p, &c):
                break

cdef void no_bwd(Batch* b) noexcept nogil:
    pass

cdef void dropout_fwd(Batch* b) noexcept nogil:
    # inverted dropout: kept units are scaled by 1/(1-p); the mask is kept for backward
    cdef Node* n0 = NODE(b, 0)
    cdef float p = n0.attr.scalar.value
    cdef float keep = 1.0 / (1.0 - p) if p < 1.0 else 0.0
    cdef int m = n0.size, j, i
    cdef float* x
    cdef float* y
    cdef float* mask
    cdef uint64_t stream
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        mask = arena_alloc(b.arena, m)
        if mask == NULL:
            return
        NODE(b, j).aux = mask
        stream = node_stream(b.rng, b.ids[j])
        for i in range(m):
            mask[i] = keep if stream_uniform(stream, i) >= p else 0.0
            y[i] = x[i] * mask[i]

cdef void dropout_dim_fwd(Batch* b) noexcept nogil:
    # dropout_dim, dropout_batch, block_dropout: dropout whose mask is drawn once along
    # the dimensions in `shared` (bit MAX_DIMS: the batch) and repeated over them. One
    # number is drawn per element of the compact mask (the other dimensions), which a
    # strided walk with stride 0 along the shared ones spreads to the full mask in aux
    # (for dropout_bwd).
    cdef Node* n0 = NODE(b, 0)
    cdef float p = n0.attr.drop.p
    cdef float keep = 1.0 / (1.0 - p) if p < 1.0 else 0.0
    cdef int size[5]
    cdef int full_st[5]
    cdef int compact_st[5]
    cdef int a, j, i, t = 1, m = n0.size
    for a in range(MAX_DIMS + 1):
        size[a] = dim_or_batch(n0, a)
        compact_st[a] = 0 if n0.attr.drop.shared & (1 << a) else t
        t *= 1 if n0.attr.drop.shared & (1 << a) else size[a]
    contiguous_strides(n0, full_st)
    cdef float* compact = arena_alloc(b.scratch, t)
    if compact == NULL:
        return
    cdef float* mask
    cdef uint64_t stream
    for j in range(b.n):
        mask = arena_alloc(b.arena, m)
        if mask == NULL:
            return
        NODE(b, j).aux = mask
        stream = node_stream(b.rng, b.ids[j])
        for i in range(t):
            compact[i] = keep if stream_uniform(stream, i) >= p else 0.0
        strided_walk(mask, full_st, compact, compact_st, size, 1.0, False)
        for i in range(m):
            NODE(b, j).val[i] = ARG(b, j, 0).val[i] * mask[i]

cdef void dropout_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef int m = NODE(b, 0).size, j, i
    cdef float* dx
    cdef float* dy
    cdef float* mask
    for j in range(b.n):
        dx = ARG(b, j, 0).grad
        dy = NODE(b, j).grad
        mask = NODE(b, j).aux
        for i in range(m):
            dx[i] += mask[i] * dy[i]

cdef void noise_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef float sd = n0.attr.scalar.value
    cdef int m = n0.size, j, i
    cdef float* x
    cdef float* y
    cdef uint64_t stream
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        stream = node_stream(b.rng, b.ids[j])
        for i in range(m):
            y[i] = x[i] + sd * stream_normal(stream, i)

cdef void esum_fwd(Batch* b) noexcept nogil:
    # esum and average; arguments broadcast over the batch
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(n0), bs = n0.bs, nargs = n0.nargs
    cdef float scale = 1.0 / nargs if n0.op == OP_AVERAGE else 1.0
    cdef int j, a, k, i, xb
    cdef Node* x
    cdef float* y
    for j in range(b.n):
        y = NODE(b, j).val
        memset(y, 0, m * bs * sizeof(float))
        for a in range(nargs):
            x = ARG(b, j, a)
            xb = 0 if x.bs == 1 else m
            for k in range(bs):
                for i in range(m):
                    y[k * m + i] += x.val[k * xb + i]
        if scale != 1.0:
            for i in range(m * bs):
                y[i] *= scale

cdef void esum_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(n0), bs = n0.bs, nargs = n0.nargs
    cdef float scale = 1.0 / nargs if n0.op == OP_AVERAGE else 1.0
    cdef int j, a, k, i, xb
    cdef Node* x
    cdef float* dy
    for a in range(nargs):
        if not batch_arg_needs_grad(b, a):
            continue
        for j in range(b.n):
            x = ARG(b, j, a)
            dy = NODE(b, j).grad
            xb = 0 if x.bs == 1 else m
            for k in range(bs):
                for i in range(m):
                    x.grad[k * xb + i] += scale * dy[k * m + i]

cdef void logsumexp_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int m = n0.size, nargs = n0.nargs
    cdef int j, a, i
    cdef float mx, s
    cdef float* y
    for j in range(b.n):
        y = NODE(b, j).val
        for i in range(m):
            mx = ARG(b, j, 0).val[i]
            for a in range(1, nargs):
                if ARG(b, j, a).val[i] > mx:
                    mx = ARG(b, j, a).val[i]
            s = 0
            for a in range(nargs):
                s += exp_nonpos(ARG(b, j, a).val[i] - mx)
            y[i] = mx + logf(s)

cdef void logsumexp_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int m = n0.size, nargs = n0.nargs
    cdef int j, a, i
    cdef Node* x
    cdef float* y
    cdef float* dy
    for j in range(b.n):
        y = NODE(b, j).val
        dy = NODE(b, j).grad
        for a in range(nargs):
            x = ARG(b, j, a)
            if x.flags & F_NEEDS_GRAD:
                for i in range(m):
                    x.grad[i] += exp_nonpos(x.val[i] - y[i]) * dy[i]


def simd_level():
    """The instruction set whose clone of the elementwise loops runs on this processor:
    'avx512f', 'avx2' or 'default (sse2)' on x86-64 (GCC's ``target_clones``, picked when
    the module loads), else 'portable (no target clones)'. Reported by ``python -m autobatch``."""
    return ab_simd_level().decode()
