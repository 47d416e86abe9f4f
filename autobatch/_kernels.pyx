# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Batched forward/backward kernels on raw float arrays, and the op table.

Every kernel receives one `Batch`: the ids of nodes that share a signature. Forward
writes each node's output into its slice of one contiguous block; backward
accumulates (+=) into the gradients of the arguments. Layout is DyNet's: a value of
shape (d0, d1) is column-major, and the `bs` batch elements follow each other.
"""
from libc.math cimport logf, log, sqrt, cos, M_PI
from libc.stdlib cimport calloc, malloc, free, realloc, qsort
from libc.string cimport memcpy, memset
from libc.stdio cimport fprintf, stderr
from scipy.linalg.cython_blas cimport sgemm, sgemv, sger

from autobatch._conv_nodes cimport (conv2d_batch_fwd, conv2d_batch_bwd, maxpool2d_batch_fwd,
                                    maxpool2d_batch_bwd)

# ------------------------------------------------------------------ rng ----

cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))

cdef void rng_seed(Rng* r, uint64_t seed) noexcept nogil:
    # splitmix64 to spread the seed over the xoroshiro128+ state
    cdef uint64_t z
    cdef int i
    for i in range(2):
        seed += <uint64_t>0x9E3779B97F4A7C15
        z = seed
        z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
        z = z ^ (z >> 31)
        if i == 0:
            r.s0 = z
        else:
            r.s1 = z

cdef double rng_uniform(Rng* r) noexcept nogil:
    """Uniform in [0, 1) (xoroshiro128+)."""
    cdef uint64_t s0 = r.s0, s1 = r.s1
    cdef uint64_t result = s0 + s1
    s1 ^= s0
    r.s0 = _rotl(s0, 24) ^ s1 ^ (s1 << 16)
    r.s1 = _rotl(s1, 37)
    return (result >> 11) * (1.0 / 9007199254740992.0)

cdef double rng_normal(Rng* r) noexcept nogil:
    """Standard normal (Box-Muller)."""
    cdef double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r)
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2)

# ------------------------------------------------------------- helpers ----

cdef inline void gemm(char ta, char tb, int m, int n, int k, float alpha,
                      float* A, int lda, float* B, int ldb, float beta,
                      float* C, int ldc) noexcept nogil:
    """Column-major C = alpha op(A) op(B) + beta C. One column goes to gemv and a
    rank-1 update to ger: sgemm would pack the whole of A for them on every call."""
    cdef int i, one = 1, inc
    if m == 0 or n == 0:
        return
    if k == 0:
        if beta == 0.0:
            for i in range(n):
                memset(C + i * ldc, 0, m * sizeof(float))
        return
    if n == 1:
        inc = 1 if tb == b'N' else ldb
        if ta == b'N':
            sgemv(&ta, &m, &k, &alpha, A, &lda, B, &inc, &beta, C, &one)
        else:
            sgemv(&ta, &k, &m, &alpha, A, &lda, B, &inc, &beta, C, &one)
        return
    if k == 1 and beta == 1.0:
        inc = 1 if ta == b'N' else lda
        i = 1 if tb == b'T' else ldb
        sger(&m, &n, &alpha, A, &inc, B, &i, C, &ldc)
        return
    sgemm(&ta, &tb, &m, &n, &k, &alpha, A, &lda, B, &ldb, &beta, C, &ldc)

cdef float* consecutive(Batch* b, int a, bint grads) noexcept nogil:
    """The values (or gradients) of argument a of all nodes, if they follow each
    other in memory: then a batched kernel can use them in place. Else NULL."""
    cdef int j, per = ARG(b, 0, a).size
    cdef float* first = ARG(b, 0, a).grad if grads else ARG(b, 0, a).val
    for j in range(1, b.n):
        if (ARG(b, j, a).grad if grads else ARG(b, j, a).val) != first + j * per:
            return NULL
    return first

cdef float* gather_arg(Batch* b, int a, Arena* mem) noexcept nogil:
    """Pointer to the values of argument `a` of all nodes, stacked; in place if
    they already are consecutive in memory, otherwise copied."""
    cdef float* first = consecutive(b, a, False)
    if first != NULL:
        return first
    cdef int j, per = ARG(b, 0, a).size
    cdef float* out = arena_alloc(mem, <size_t>per * b.n)
    if out == NULL:
        return NULL
    for j in range(b.n):
        memcpy(out + j * per, ARG(b, j, a).val, per * sizeof(float))
    return out

cdef void add_grad_from_stack(Batch* b, int a, float* stacked) noexcept nogil:
    cdef int j, i
    cdef int per = ARG(b, 0, a).size
    cdef float* g
    cdef float* s
    for j in range(b.n):
        g = ARG(b, j, a).grad
        s = stacked + j * per
        for i in range(per):
            g[i] += s[i]

# ------------------------------------------------- elementwise ops ----
# The math of every unary and binary elementwise op is one line of _elementwise.h
# (forward and derivative side by side); these kernels call its whole-array loops.

cdef void unary_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef ab_unary_fwd f = OPS[n0.op].ufwd
    cdef float* x = consecutive(b, 0, False)
    cdef int j
    if x != NULL:                   # one call for the whole batch
        f(b.block, x, n0.size * b.n, n0.attr.scalar.value)
        return
    for j in range(b.n):
        f(NODE(b, j).val, ARG(b, j, 0).val, n0.size, n0.attr.scalar.value)

cdef void unary_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef ab_unary_bwd f = OPS[n0.op].ubwd
    cdef int j
    for j in range(b.n):
        f(ARG(b, j, 0).grad, ARG(b, j, 0).val, NODE(b, j).val, NODE(b, j).grad, n0.size, n0.attr.scalar.value)

# Binary elementwise ops broadcast as DyNet does: along every dimension (the batch
# included) an argument has the output's size or 1. The loops over the output are planned
# once per batch (every node of a batch has the same shapes): unit dimensions are dropped
# and neighbours merged while every operand stays contiguous across them, so without
# broadcasting the whole value is one run, one call of the _elementwise.h loop per node.

ctypedef struct Plan:
    int n                     # loops; loop 0 is the innermost, one run of the elementwise loop
    int size[5]               # iterations of each loop
    int sz[5]                 # element strides of the output ...
    int sx[5]                 # ... and of the two arguments (0: broadcast)
    int sy[5]

ctypedef struct Cursor:       # position in the outer loops and the offsets of the current run
    int i[5]
    int z, x, y

cdef inline int dim_or_batch(const Node* n, int a) noexcept nogil:
    return n.d[a] if a < MAX_DIMS else n.bs

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
    cdef ab_binary_fwd f = OPS[NODE(b, 0).op].bfwd
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

cdef void binary_bwd(Batch* b) noexcept nogil:
    # a broadcast argument's gradient sums over the positions it was repeated at
    cdef int op = NODE(b, 0).op
    cdef Plan p = binary_plan(NODE(b, 0), ARG(b, 0, 0), ARG(b, 0, 1))
    cdef Cursor c
    cdef Node* x
    cdef Node* y
    cdef Node* z
    cdef bint want_x, want_y
    cdef int j
    for j in range(b.n):
        x = ARG(b, j, 0)
        y = ARG(b, j, 1)
        z = NODE(b, j)
        want_x = (x.flags & F_NEEDS_GRAD) != 0
        want_y = (y.flags & F_NEEDS_GRAD) != 0
        memset(&c, 0, sizeof(Cursor))
        while True:
            if want_x:
                OPS[op].bbwd_x(x.grad + c.x, p.sx[0], x.val + c.x, p.sx[0], y.val + c.y, p.sy[0],
                               z.val + c.z, z.grad + c.z, p.size[0])
            if want_y:
                OPS[op].bbwd_y(y.grad + c.y, p.sy[0], x.val + c.x, p.sx[0], y.val + c.y, p.sy[0],
                               z.val + c.z, z.grad + c.z, p.size[0])
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
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        mask = arena_alloc(b.arena, m)
        if mask == NULL:
            return
        NODE(b, j).aux = mask
        for i in range(m):
            mask[i] = keep if rng_uniform(b.rng) >= p else 0.0
            y[i] = x[i] * mask[i]

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
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        for i in range(m):
            y[i] = x[i] + sd * rng_normal(b.rng)

cdef extern from "_elementwise.h" nogil:
    int ab_find_unary(const char* name, ab_unary_fwd* fwd, ab_unary_bwd* bwd)
    int ab_find_binary(const char* name, ab_binary_fwd* fwd, ab_binary_bwd* bwd_x, ab_binary_bwd* bwd_y)

cdef extern from "_fastmath.h" nogil:
    float exp_nonpos "ab_exp_nonpos" (float x)
    double fsum "ab_sum" (const float* x, int n)
    float fmax_of "ab_max" (const float* x, int n)

# ------------------------------------------------------------- n-ary ----

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

cdef inline void along_dim(const Node* x, int d, int* inner, int* outer) noexcept nogil:
    """x seen as (inner, x.d[d], outer) per batch element."""
    cdef int a
    inner[0] = 1
    outer[0] = 1
    for a in range(MAX_DIMS):
        if a < d:
            inner[0] *= x.d[a]
        elif a > d:
            outer[0] *= x.d[a]

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
    cdef Node* n0 = NODE(b, 0)
    cdef int nargs = n0.nargs, d = n0.attr.axis.dim, m = elems(n0), T = n0.d[d]
    cdef int inner, outer, j, a, k, o, i, off, xb, run
    cdef Node* x
    cdef float* dy
    cdef float* dx
    along_dim(n0, d, &inner, &outer)
    for j in range(b.n):
        dy = NODE(b, j).grad
        off = 0
        for a in range(nargs):
            x = ARG(b, j, a)
            xb = 0 if x.bs == 1 else elems(x)
            run = inner * x.d[d]
            if x.flags & F_NEEDS_GRAD:
                for k in range(n0.bs):
                    for o in range(outer):
                        dx = x.grad + k * xb + o * run
                        for i in range(run):
                            dx[i] += dy[k * m + (o * T + off) * inner + i]
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

# ---------------------------------------------------- matrix products ----
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
        gemm(b'N', b'N', r, c * x0.bs * b.n, k, 1.0, w.val, r, X, k, beta, b.block, r)
        return
    for j in range(b.n):      # batched W: one product per batch element
        wj = ARG(b, j, w_arg)
        xj = ARG(b, j, x_arg)
        for e in range(n0.bs):
            gemm(b'N', b'N', r, c, k, 1.0, wj.val + (0 if wj.bs == 1 else e * r * k), r,
                 xj.val + (0 if xj.bs == 1 else e * k * c), k, beta,
                 NODE(b, j).val + e * r * c, r)

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
    if w.bs == 1 and x0.bs == n0.bs:
        M = c * x0.bs * b.n
        dY = b.block
        if dY == NULL:      # part of a batch: stack the output gradients
            dY = arena_alloc(b.scratch, <size_t>r * M)
            if dY == NULL:
                return
            for j in range(b.n):
                memcpy(dY + j * n0.size, NODE(b, j).grad, n0.size * sizeof(float))
        if w.flags & F_NEEDS_GRAD:
            if X == NULL:
                X = gather_arg(b, x_arg, b.scratch)
                if X == NULL:
                    return
            if w.op == OP_PARAM and b.defer != NULL and b.defer.n < b.defer.cap and \
                    (r * k >= DEFER_MIN_WEIGHT or M <= DEFER_MAX_COLUMNS):
                b.defer.items[b.defer.n] = WeightGrad(w.grad, dY, X, r, k, M)
                b.defer.n += 1
            else:
                gemm(b'N', b'T', r, k, M, 1.0, dY, r, X, k, 1.0, w.grad, r)
        if batch_arg_needs_grad(b, x_arg):
            if consecutive(b, x_arg, True) != NULL:
                gemm(b'T', b'N', k, M, r, 1.0, w.val, r, dY, r, 1.0, x0.grad, k)
            else:
                dX = arena_alloc(b.scratch, <size_t>k * M)
                if dX == NULL:
                    return
                gemm(b'T', b'N', k, M, r, 1.0, w.val, r, dY, r, 0.0, dX, k)
                add_grad_from_stack(b, x_arg, dX)
        return
    for j in range(b.n):
        wj = ARG(b, j, w_arg)
        xj = ARG(b, j, x_arg)
        dy = NODE(b, j).grad
        for e in range(n0.bs):
            if wj.flags & F_NEEDS_GRAD:
                gemm(b'N', b'T', r, k, c, 1.0, dy + e * r * c, r,
                     xj.val + (0 if xj.bs == 1 else e * k * c), k, 1.0,
                     wj.grad + (0 if wj.bs == 1 else e * r * k), r)
            if xj.flags & F_NEEDS_GRAD:
                gemm(b'T', b'N', k, c, r, 1.0, wj.val + (0 if wj.bs == 1 else e * r * k), r,
                     dy + e * r * c, r, 1.0, xj.grad + (0 if xj.bs == 1 else e * k * c), k)

# Postponing pays when a term would stream a dW that does not stay in cache (every
# call reads and writes all of it), or when a term has so few columns that packing
# dominates; a small dW updated by wide terms stays in L2, and stacking only copies.
cdef int DEFER_MIN_WEIGHT = 131072      # elements of dW (512 KB)
cdef int DEFER_MAX_COLUMNS = 16

cdef int cmp_weight_grad(const void* a, const void* b) noexcept nogil:
    cdef float* x = (<WeightGrad*>a).dW
    cdef float* y = (<WeightGrad*>b).dW
    return -1 if x < y else (1 if x > y else 0)

cdef void flush_weight_grads(WeightGrads* d, Arena* scratch) noexcept nogil:
    """Apply the postponed dW += dY X^T: per weight, the terms' columns are stacked
    (column-major blocks simply follow each other) and summed by one gemm."""
    qsort(d.items, d.n, sizeof(WeightGrad), cmp_weight_grad)
    cdef int i = 0, j, e, total, at
    cdef WeightGrad* w
    cdef float* dY
    cdef float* X
    while i < d.n:
        w = &d.items[i]
        j = i + 1
        total = w.m
        while j < d.n and d.items[j].dW == w.dW:
            total += d.items[j].m
            j += 1
        dY = X = NULL
        if j > i + 1:
            dY = arena_alloc(scratch, <size_t>w.r * total)
            X = arena_alloc(scratch, <size_t>w.k * total)
        if X == NULL or dY == NULL:     # one term, or no memory to stack them: a gemm each
            scratch.failed = False
            for e in range(i, j):
                gemm(b'N', b'T', w.r, w.k, d.items[e].m, 1.0, d.items[e].dY, w.r,
                     d.items[e].X, w.k, 1.0, w.dW, w.r)
        else:
            at = 0
            for e in range(i, j):
                memcpy(dY + <size_t>at * w.r, d.items[e].dY, <size_t>d.items[e].m * w.r * sizeof(float))
                memcpy(X + <size_t>at * w.k, d.items[e].X, <size_t>d.items[e].m * w.k * sizeof(float))
                at += d.items[e].m
            gemm(b'N', b'T', w.r, w.k, total, 1.0, dY, w.r, X, w.k, 1.0, w.dW, w.r)
        i = j
    d.n = 0

cdef void matmul_fwd(Batch* b) noexcept nogil:
    product_fwd(b, 0, 1, 0.0, True)

cdef void matmul_bwd(Batch* b) noexcept nogil:
    # the stacked X kept by forward is only valid for the whole batch
    product_bwd(b, 0, 1, NODE(b, 0).aux if b.block != NULL else NULL)

cdef void affine_fwd(Batch* b) noexcept nogil:
    # y = bias + sum_i W_i x_i; the bias (one column or all) repeats over columns and batch
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(n0), j, k, c, p
    cdef Node* bias
    cdef float* y
    cdef int eb, bstride
    for j in range(b.n):
        bias = ARG(b, j, 0)
        y = NODE(b, j).val
        eb = elems(bias)
        bstride = 0 if bias.bs == 1 else eb
        for k in range(n0.bs):
            for c in range(m // eb):
                memcpy(y + k * m + c * eb, bias.val + k * bstride, eb * sizeof(float))
    for p in range(1, n0.nargs, 2):
        product_fwd(b, p, p + 1, 1.0, False)

cdef void affine_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(n0), j, k, c, i, p
    cdef Node* bias
    cdef float* dy
    cdef float* db
    cdef int eb, bstride
    if batch_arg_needs_grad(b, 0):
        for j in range(b.n):
            bias = ARG(b, j, 0)
            dy = NODE(b, j).grad
            eb = elems(bias)
            bstride = 0 if bias.bs == 1 else eb
            for k in range(n0.bs):
                db = bias.grad + k * bstride
                for c in range(m // eb):
                    for i in range(eb):
                        db[i] += dy[k * m + c * eb + i]
    for p in range(1, n0.nargs, 2):
        product_bwd(b, p, p + 1, NULL)

# ---------------------------------------------------------- reductions ----

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

cdef void pair_reduce_fwd(Batch* b) noexcept nogil:
    """dot_product, squared_distance, binary_log_loss of two same-size arguments."""
    cdef Node* n0 = NODE(b, 0)
    cdef int op = n0.op, j, k, i, m, xb, yb
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
                else:
                    s -= v * log(u) + (1.0 - v) * log(1.0 - u)
            NODE(b, j).val[k] = <float>s

cdef void pair_reduce_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int op = n0.op, j, k, i, m, xb, yb
    cdef Node* x
    cdef Node* y
    cdef float u, v, g, gu, gv
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
                else:
                    gu = -v / u + (1.0 - v) / (1.0 - u)
                    gv = -logf(u) + logf(1.0 - u)
                if want_x:
                    x.grad[k * xb + i] += gu * g
                if want_y:
                    y.grad[k * yb + i] += gv * g

cdef inline int32_t* int_aux(Node* n) noexcept nogil:
    """A node's aux memory holding ints (positions), not floats."""
    return <int32_t*>n.aux

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

cdef void extreme_dim_bwd(Batch* b) noexcept nogil:
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

cdef void sum_dim_fwd(Batch* b) noexcept nogil:
    # sum_dim and mean_dim: y = scale * (sum of x over the dimensions in mask)
    cdef Node* n0 = NODE(b, 0)
    cdef float scale = n0.attr.reduce.scale
    cdef int size[5]
    cdef int os[5]
    cdef int j, i, e, c3, c2, c1, c0, o
    cdef float* x
    cdef float* y
    reduce_strides(ARG(b, 0, 0), n0.attr.reduce.mask, size, os)
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        memset(y, 0, n0.size * sizeof(float))
        i = 0
        for e in range(size[4]):
            for c3 in range(size[3]):
                for c2 in range(size[2]):
                    for c1 in range(size[1]):
                        o = e * os[4] + c3 * os[3] + c2 * os[2] + c1 * os[1]
                        for c0 in range(size[0]):
                            y[o + c0 * os[0]] += x[i]
                            i += 1
        if scale != 1.0:
            for i in range(n0.size):
                y[i] *= scale

cdef void sum_dim_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef float scale = n0.attr.reduce.scale
    cdef int size[5]
    cdef int os[5]
    cdef int j, i, e, c3, c2, c1, c0, o
    cdef float* dx
    cdef float* dy
    reduce_strides(ARG(b, 0, 0), n0.attr.reduce.mask, size, os)
    for j in range(b.n):
        dx = ARG(b, j, 0).grad
        dy = NODE(b, j).grad
        i = 0
        for e in range(size[4]):
            for c3 in range(size[3]):
                for c2 in range(size[2]):
                    for c1 in range(size[1]):
                        o = e * os[4] + c3 * os[3] + c2 * os[2] + c1 * os[1]
                        for c0 in range(size[0]):
                            dx[i] += scale * dy[o + c0 * os[0]]
                            i += 1

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

# ------------------------------------------------- softmax and losses ----

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

# ------------------------------------------------------- fused LSTM cells ----
# Gates are laid out in blocks of h: [i, f_1 .. f_k, o, g]. One node each for the gate
# activations, the cell update and the hidden output replaces about a dozen
# elementwise nodes per step (LSTM: k = 1; binary Tree-LSTM: k = 2; its leaves: k = 0).

# loops of _elementwise.h used by the fused kernels (bound in the op table below)
cdef ab_unary_fwd gate_fwd
cdef ab_unary_bwd gate_bwd
cdef ab_unary_fwd tanh_loop_fwd
cdef ab_unary_bwd tanh_loop_bwd
cdef ab_binary_fwd mul_tanh_fwd
cdef ab_binary_bwd mul_tanh_bwd_o, mul_tanh_bwd_c

cdef void lstm_gates_fwd(Batch* b) noexcept nogil:
    # logistic on every block but the last (forget blocks get + forget_bias), tanh on the last
    cdef Node* n0 = NODE(b, 0)
    cdef int h = n0.attr.gates.hidden, total = elems(n0), j, k
    cdef int nb = total // h
    cdef float* x
    cdef float* y
    for j in range(b.n):
        for k in range(n0.bs):
            x = ARG(b, j, 0).val + k * total
            y = NODE(b, j).val + k * total
            gate_fwd(y, x, h, 0.0)
            gate_fwd(y + h, x + h, (nb - 3) * h, n0.attr.gates.forget_bias)
            gate_fwd(y + (nb - 2) * h, x + (nb - 2) * h, h, 0.0)
            tanh_loop_fwd(y + (nb - 1) * h, x + (nb - 1) * h, h, 0.0)

cdef void lstm_gates_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int h = n0.attr.gates.hidden, total = elems(n0), j, k
    cdef float* dx
    cdef float* x
    cdef float* y
    cdef float* dy
    for j in range(b.n):
        for k in range(n0.bs):
            dx = ARG(b, j, 0).grad + k * total
            x = ARG(b, j, 0).val + k * total
            y = NODE(b, j).val + k * total
            dy = NODE(b, j).grad + k * total
            gate_bwd(dx, x, y, dy, total - h, 0.0)
            tanh_loop_bwd(dx + total - h, x + total - h, y + total - h, dy + total - h, h, 0.0)

cdef void lstm_cell_fwd(Batch* b) noexcept nogil:
    # c = i * g + sum_m f_m * c_m; arguments: gates, c_1 .. c_k
    cdef Node* n0 = NODE(b, 0)
    cdef int h = rows(n0), nk = n0.nargs - 1, G = (nk + 3) * h, j, k, i, m
    cdef float* g
    cdef float* y
    cdef float* c
    for j in range(b.n):
        for k in range(n0.bs):
            g = ARG(b, j, 0).val + k * G
            y = NODE(b, j).val + k * h
            for i in range(h):
                y[i] = g[i] * g[(nk + 2) * h + i]
            for m in range(nk):
                c = ARG(b, j, 1 + m).val + k * h
                for i in range(h):
                    y[i] += g[(1 + m) * h + i] * c[i]

cdef void lstm_cell_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int h = rows(n0), nk = n0.nargs - 1, G = (nk + 3) * h, j, k, i, m
    cdef float* g
    cdef float* dg
    cdef float* dy
    cdef float* c
    cdef Node* cm
    cdef bint want_g = batch_arg_needs_grad(b, 0)
    for j in range(b.n):
        for k in range(n0.bs):
            g = ARG(b, j, 0).val + k * G
            dg = ARG(b, j, 0).grad + k * G
            dy = NODE(b, j).grad + k * h
            if want_g:
                for i in range(h):
                    dg[i] += g[(nk + 2) * h + i] * dy[i]
                    dg[(nk + 2) * h + i] += g[i] * dy[i]
            for m in range(nk):
                cm = ARG(b, j, 1 + m)
                c = cm.val + k * h
                if want_g:
                    for i in range(h):
                        dg[(1 + m) * h + i] += c[i] * dy[i]
                if cm.flags & F_NEEDS_GRAD:
                    for i in range(h):
                        cm.grad[k * h + i] += g[(1 + m) * h + i] * dy[i]

cdef void lstm_hidden_fwd(Batch* b) noexcept nogil:
    # h = o * tanh(c); arguments: c, gates (o is the second-to-last block)
    cdef Node* n0 = NODE(b, 0)
    cdef int h = rows(n0), G = elems(ARG(b, 0, 1)), j, k
    for j in range(b.n):
        for k in range(n0.bs):
            mul_tanh_fwd(NODE(b, j).val + k * h, ARG(b, j, 1).val + k * G + G - 2 * h, 1,
                         ARG(b, j, 0).val + k * h, 1, h)

cdef void lstm_hidden_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int h = rows(n0), G = elems(ARG(b, 0, 1)), j, k
    cdef Node* c
    cdef Node* g
    cdef bint want_c = batch_arg_needs_grad(b, 0)
    cdef bint want_g = batch_arg_needs_grad(b, 1)
    for j in range(b.n):
        c = ARG(b, j, 0)
        g = ARG(b, j, 1)
        for k in range(n0.bs):
            if want_g:
                mul_tanh_bwd_o(g.grad + k * G + G - 2 * h, 1, g.val + k * G + G - 2 * h, 1,
                               c.val + k * h, 1, NODE(b, j).val + k * h, NODE(b, j).grad + k * h, h)
            if want_c:
                mul_tanh_bwd_c(c.grad + k * h, 1, g.val + k * G + G - 2 * h, 1,
                               c.val + k * h, 1, NODE(b, j).val + k * h, NODE(b, j).grad + k * h, h)

# ------------------------------------------------------------ structure ----

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
    # elements [s, s + w) along dimension `dim` (s per node in idata): a run of
    # w * inner elements per outer index
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int d = n0.attr.axis.dim, L = x0.d[d], w = n0.d[d], m = elems(n0), mx = elems(x0)
    cdef int inner, outer, j, k, o, s
    along_dim(x0, d, &inner, &outer)
    for j in range(b.n):
        s = NODE(b, j).idata
        for k in range(n0.bs):
            for o in range(outer):
                memcpy(NODE(b, j).val + k * m + o * w * inner,
                       ARG(b, j, 0).val + k * mx + (o * L + s) * inner, w * inner * sizeof(float))

cdef void pick_range_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x0 = ARG(b, 0, 0)
    cdef int d = n0.attr.axis.dim, L = x0.d[d], w = n0.d[d], m = elems(n0), mx = elems(x0)
    cdef int inner, outer, j, k, o, s, t
    cdef float* dx
    cdef float* dy
    along_dim(x0, d, &inner, &outer)
    for j in range(b.n):
        s = NODE(b, j).idata
        for k in range(n0.bs):
            for o in range(outer):
                dx = ARG(b, j, 0).grad + k * mx + (o * L + s) * inner
                dy = NODE(b, j).grad + k * m + o * w * inner
                for t in range(w * inner):
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

cdef void transpose_strides(const Node* x, const int32_t* perm, int* st) noexcept nogil:
    """st[k]: the stride in x of output dimension k (x's dimension perm[k])."""
    cdef int a, xs[4]
    cdef int t = 1
    for a in range(MAX_DIMS):
        xs[a] = t
        t *= x.d[a]
    for a in range(MAX_DIMS):
        st[a] = xs[perm[a]]

cdef void transpose_fwd(Batch* b) noexcept nogil:
    # y[o0, o1, o2, o3] = x[o at the permuted positions], per batch element
    cdef Node* n0 = NODE(b, 0)
    cdef int st[4]
    cdef int m = elems(n0), j, k, i, o0, o1, o2, o3, at
    cdef float* x
    cdef float* y
    transpose_strides(ARG(b, 0, 0), n0.attr.transpose.perm, st)
    for j in range(b.n):
        x = ARG(b, j, 0).val
        y = NODE(b, j).val
        i = 0
        for k in range(n0.bs):
            for o3 in range(n0.d[3]):
                for o2 in range(n0.d[2]):
                    for o1 in range(n0.d[1]):
                        at = k * m + o3 * st[3] + o2 * st[2] + o1 * st[1]
                        for o0 in range(n0.d[0]):
                            y[i] = x[at + o0 * st[0]]
                            i += 1

cdef void transpose_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int st[4]
    cdef int m = elems(n0), j, k, i, o0, o1, o2, o3, at
    cdef float* dx
    cdef float* dy
    transpose_strides(ARG(b, 0, 0), n0.attr.transpose.perm, st)
    for j in range(b.n):
        dx = ARG(b, j, 0).grad
        dy = NODE(b, j).grad
        i = 0
        for k in range(n0.bs):
            for o3 in range(n0.d[3]):
                for o2 in range(n0.d[2]):
                    for o1 in range(n0.d[1]):
                        at = k * m + o3 * st[3] + o2 * st[2] + o1 * st[1]
                        for o0 in range(n0.d[0]):
                            dx[at + o0 * st[0]] += dy[i]
                            i += 1

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

# ------------------------------------------------------------ op table ----

# the fixed ops (ids of the OpId enum), then the API's unary ops of _elementwise.h
cdef int N_OPS = N_FIXED_OPS + AB_UNARY_API_COUNT
cdef OpDef* OPS = <OpDef*>calloc(N_OPS, sizeof(OpDef))
if OPS == NULL:
    raise MemoryError()

cdef const OpDef* op_table() noexcept nogil:
    return OPS

cdef int n_ops() noexcept nogil:
    return N_OPS

cdef int defop(int op, const char* name, int nargs, KernelFn fwd, KernelFn bwd,
               const char* attrs=b"", int shared_arg=-1, int shared_step=0) except -1:
    """The record of op `op` (see OpDef); positional arguments only (Cython)."""
    if OPS[op].name != NULL:
        raise RuntimeError(f"op {op} is defined twice")
    OPS[op].name = name
    OPS[op].nargs = nargs
    OPS[op].fwd = fwd
    OPS[op].bwd = bwd
    OPS[op].attrs = attrs
    OPS[op].shared_arg = shared_arg
    OPS[op].shared_step = shared_step
    OPS[op].leaf = fwd == NULL
    return 0

cdef int defleaf(int op, const char* name) except -1:
    """A leaf: materialised when created, never scheduled."""
    return defop(op, name, 0, NULL, NULL)

cdef int defunary(int op, const char* name, const char* attrs=b"", const char* math=NULL,
                  KernelFn fwd=unary_fwd, KernelFn bwd=unary_bwd) except -1:
    """An op whose math is the unary line `math` (default: its name) of _elementwise.h."""
    defop(op, name, 1, fwd, bwd, attrs)
    if not ab_find_unary(math if math != NULL else name, &OPS[op].ufwd, &OPS[op].ubwd):
        raise RuntimeError(f"no unary elementwise op {name!r} in _elementwise.h")
    return 0

cdef int defbinary(int op, const char* name) except -1:
    """An op whose math is the binary line `name` of _elementwise.h."""
    defop(op, name, 2, binary_fwd, binary_bwd)
    if not ab_find_binary(name, &OPS[op].bfwd, &OPS[op].bbwd_x, &OPS[op].bbwd_y):
        raise RuntimeError(f"no binary elementwise op {name!r} in _elementwise.h")
    return 0

defleaf(OP_INPUT, b"input")
defleaf(OP_PARAM, b"parameter")
defleaf(OP_LOOKUP, b"lookup")
defop(OP_LOOKUP_BATCH, b"lookup_batch", 0, lookup_batch_fwd, lookup_batch_bwd)

defunary(OP_NEG, b"negate")
defunary(OP_ADD_CONST, b"add_constant", b"c: float")
defunary(OP_MUL_CONST, b"mul_constant", b"c: float")
defunary(OP_RSUB_CONST, b"constant_minus", b"c: float")
defunary(OP_RDIV_CONST, b"constant_divide", b"c: float")
defunary(OP_NOBACKPROP, b"nobackprop", b"", b"identity", unary_fwd, no_bwd)
defop(OP_DROPOUT, b"dropout", 1, dropout_fwd, dropout_bwd, b"p: float")
defunary(OP_NOISE, b"noise", b"stddev: float", b"identity", noise_fwd, unary_bwd)

defbinary(OP_ADD, b"add")
defbinary(OP_SUB, b"subtract")
defbinary(OP_CMULT, b"cmult")
defbinary(OP_CDIV, b"cdiv")
defbinary(OP_POW, b"pow")
if not (ab_find_unary(b"gate_logistic", &gate_fwd, &gate_bwd)
        and ab_find_unary(b"tanh", &tanh_loop_fwd, &tanh_loop_bwd)
        and ab_find_binary(b"mul_tanh", &mul_tanh_fwd, &mul_tanh_bwd_o, &mul_tanh_bwd_c)):
    raise RuntimeError("_elementwise.h lacks the loops of the fused LSTM kernels")

defop(OP_ESUM, b"esum", -1, esum_fwd, esum_bwd)
defop(OP_AVERAGE, b"average", -1, esum_fwd, esum_bwd)
defop(OP_LOGSUMEXP, b"logsumexp", -1, logsumexp_fwd, logsumexp_bwd)
defop(OP_CONCAT, b"concatenate", -1, concat_fwd, concat_bwd, b"dim: int")
defop(OP_CONCAT_TO_BATCH, b"concatenate_to_batch", -1, concat_to_batch_fwd, concat_to_batch_bwd)
defop(OP_AFFINE, b"affine_transform", -1, affine_fwd, affine_bwd, b"", 1, 2)  # W1, W2 ... shared
defop(OP_MATMUL, b"matmul", 2, matmul_fwd, matmul_bwd, b"", 0)  # W shared

defop(OP_SUM_ELEMS, b"sum_elems", 1, reduce_fwd, reduce_bwd)
defop(OP_MEAN_ELEMS, b"mean_elems", 1, reduce_fwd, reduce_bwd)
defop(OP_SQUARED_NORM, b"squared_norm", 1, reduce_fwd, reduce_bwd)
defop(OP_L2_NORM, b"l2_norm", 1, reduce_fwd, reduce_bwd)
defop(OP_DOT, b"dot_product", 2, pair_reduce_fwd, pair_reduce_bwd)
defop(OP_SQUARED_DISTANCE, b"squared_distance", 2, pair_reduce_fwd, pair_reduce_bwd)
defop(OP_BINARY_LOG_LOSS, b"binary_log_loss", 2, pair_reduce_fwd, pair_reduce_bwd)
defop(OP_MAX_DIM, b"max_dim", 1, extreme_dim_fwd, extreme_dim_bwd, b"dim: int")
defop(OP_MIN_DIM, b"min_dim", 1, extreme_dim_fwd, extreme_dim_bwd, b"dim: int")
defop(OP_SUM_BATCHES, b"sum_batches", 1, sum_batches_fwd, sum_batches_bwd)
defop(OP_SUM_DIM, b"sum_dim", 1, sum_dim_fwd, sum_dim_bwd, b"mask: int, scale: float")
defop(OP_MEAN_DIM, b"mean_dim", 1, sum_dim_fwd, sum_dim_bwd, b"mask: int, scale: float")

defop(OP_SOFTMAX, b"softmax", 1, softmax_fwd, softmax_bwd, b"dim: int")
defop(OP_LOG_SOFTMAX, b"log_softmax", 1, softmax_fwd, softmax_bwd)
defop(OP_PICKNLS, b"pickneglogsoftmax", 1, picknls_fwd, picknls_bwd)
defop(OP_HINGE, b"hinge", 1, hinge_fwd, hinge_bwd, b"margin: float")

defop(OP_LSTM_GATES, b"lstm_gates", 1, lstm_gates_fwd, lstm_gates_bwd, b"hidden: int, forget_bias: float")
defop(OP_LSTM_CELL, b"lstm_cell", -1, lstm_cell_fwd, lstm_cell_bwd)
defop(OP_LSTM_HIDDEN, b"lstm_hidden", 2, lstm_hidden_fwd, lstm_hidden_bwd)

defop(OP_PICK, b"pick", 1, pick_fwd, pick_bwd, b"dim: int")
defop(OP_PICK_RANGE, b"pick_range", 1, pick_range_fwd, pick_range_bwd, b"dim: int")
defop(OP_PICK_BATCH_ELEMS, b"pick_batch_elems", 1, pick_batch_fwd, pick_batch_bwd)
defop(OP_TRANSPOSE, b"transpose", 1, transpose_fwd, transpose_bwd, b"perm: int[4]")
defunary(OP_RESHAPE, b"reshape", b"", b"identity")

defop(OP_CONV2D, b"conv2d", -1, conv2d_batch_fwd, conv2d_batch_bwd,
      b"stride: (int, int), is_valid: bool", 1, 1)  # filter and bias shared
defop(OP_MAXPOOL2D, b"maxpooling2d", 1, maxpool2d_batch_fwd, maxpool2d_batch_bwd,
      b"ksize: (int, int), stride: (int, int), is_valid: bool")

# the API's unary ops: one line of _elementwise.h each (their attribute, if any, is
# the constant A, a float)
cdef list _API_ATTRS = []
for _k in range(AB_UNARY_API_COUNT):
    _attr = ab_unary_api[_k].attr
    _API_ATTRS.append(b"" if _attr == b"_" else _attr + b": float")
    defunary(N_FIXED_OPS + _k, ab_unary_api[_k].name, _API_ATTRS[_k])

for _op in range(N_OPS):
    if OPS[_op].name == NULL:
        raise RuntimeError(f"op {_op} has no record")
if sizeof(Attrs) != 3 * sizeof(int64_t):
    raise RuntimeError("Attrs must be exactly the 3 words the signature compares")
if sizeof(Node) != 96:
    raise RuntimeError(f"a Node is {sizeof(Node)} bytes, not 96")


def op_names():
    """Names of all ops, indexed by op id."""
    return [OPS[i].name.decode() for i in range(N_OPS)]


def op_info():
    """{op name: its record} for tests and documentation: arity, leaf, which arguments
    are shared by identity, the attributes."""
    out = {}
    for i in range(N_OPS):
        out[OPS[i].name.decode()] = {
            "id": i, "nargs": OPS[i].nargs, "leaf": bool(OPS[i].leaf),
            "shared_arg": OPS[i].shared_arg, "shared_step": OPS[i].shared_step,
            "attrs": OPS[i].attrs.decode()}
    return out
