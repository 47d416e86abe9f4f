# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Fusion of elementwise chains, decided by the engine from the graph.

When a batch has run (any op: a product, a sum, an activation ...), fuse_chain looks
at the consumers of its nodes. If every node has exactly one consumer in the graph,
these consumers are plain elementwise ops (unary, or binary without broadcasting)
of one signature, in the same order as their arguments, their other arguments are
computed already, and no other node of their signature is ready (it would have
joined them in the strategy's batch), they form the next *stage* of a chain, and so
on from them.
The stages run at once as one pass over the batch: tile by tile (a few KB that stay
in L1), every stage's loop of kernels/elementwise.h, so `logistic(W * x + b)` adds the bias
and applies the activation while the product's output is in cache. Every stage's
values are kept (backward and value() read them) and every stage is recorded in the
batch log as a batch of its own, flagged `chained`.

Backward (chain_backward) walks a chain's stages in reverse tile by tile, the
kernels/elementwise.h derivative loops again: a stage's output has one consumer, the next
stage, so its gradient is complete once that stage's tile ran. Any other consumer
the graph gained after the forward ran later, so its backward came first.

The numbers are those of the unfused kernels (the same loops over the same
elements); only the order of accumulation into gradients that several nodes share
(a bias) may differ, by rounding."""
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

from autobatch.engine.executor cimport log_stage, check_finite
from autobatch.kernels.elementwise cimport unary_fwd, unary_bwd, binary_fwd, binary_bwd
from autobatch.runtime.memory cimport arena_alloc
from autobatch.runtime.nodes cimport (Node, OpDef, AHEAD, F_DONE, F_NEEDS_GRAD, grad_fresh,
                               grad_mark, grad_ready, prefetch_ahead, prefetch_arg,
                               prefetch_node)
from autobatch.engine.optable cimport op_table, n_ops
from autobatch.engine.parallel cimport gradients_disjoint
from autobatch.engine.scheduler cimport sched_pending_upto
from autobatch.runtime.threads cimport pool_run, pool_threads, split_worthwhile

cdef const OpDef* OPS = op_table()

cdef enum:
    NOT_FUSABLE = 0
    UNARY = 1
    BINARY = 2
    TILE = 2048                 # elements per tile of the fused pass (8 KB)
    MAX_STAGES = 64             # stages of one chain

# A chain's pass over its nodes: ranges of them on the engine's threads when it is
# large (each range tile by tile, as one thread does: the numbers are the same).
ctypedef struct Chain:
    const NodeView* v
    const BatchLog* log
    int64_t first, last     # batch `first` is the producer; stages first+1 .. last
    int n                   # nodes per stage
    bint backward
    int parts


# per op: whether it may be a stage of a chain (its kernels are the generic unary or
# binary ones, so its math is the kernels/elementwise.h lines the fused loops call)
cdef uint8_t* KIND = <uint8_t*>calloc(n_ops(), 1)
if KIND == NULL:
    raise MemoryError()

for _op in range(n_ops()):
    if OPS[_op].fwd == unary_fwd and OPS[_op].bwd == unary_bwd:
        KIND[_op] = UNARY
    elif OPS[_op].fwd == binary_fwd and OPS[_op].bwd == binary_bwd:
        KIND[_op] = BINARY


# Deferral (off by default): fuse a stage only when no other node of its signature still
# to run could join it in a later batch (depth lists of the scheduler). Fewer batches of
# that signature, but the stage then runs unfused: measured no faster (docs/fusion.md).
cdef bint DEFER = False


def set_deferral(on):
    """Fuse a consumer stage only when no node of its signature still to run could
    join it later (True), or whenever the chain allows (False, the default). For
    comparisons: docs/fusion.md gives the measured batches and times. Returns the
    previous setting."""
    global DEFER
    old = DEFER
    DEFER = bool(on)
    return old


cdef bint fusion_defers() noexcept nogil:
    return DEFER


cdef inline bint same_shape(const Node* a, const Node* b) noexcept nogil:
    return a.d[0] == b.d[0] and a.d[1] == b.d[1] and a.d[2] == b.d[2] and \
        a.d[3] == b.d[3] and a.bs == b.bs


cdef inline int32_t arg_of(const NodeView* v, int32_t i, int a) noexcept nogil:
    return v.args[v.nodes[i].args_at + a]


cdef inline int32_t first_consumer(const Sched* s, int32_t p) noexcept nogil:
    """p's first consumer in this forward, or p itself if it has none."""
    cdef int32_t q = s.loc[p]
    return p if s.cons_at[q + 1] == s.cons_at[q] else s.cons[s.cons_at[q]]


cdef inline bint shapes_fit(const NodeView* v, int32_t c, int32_t p) noexcept nogil:
    """c (a unary or binary op) may run in the pass of its argument p: the same
    number of elements (unary), or both arguments of c's shape (binary: no
    broadcasting)."""
    cdef const Node* cn = &v.nodes[c]
    cdef int a
    if KIND[cn.op] == UNARY:
        return cn.size == v.nodes[p].size
    for a in range(2):
        if not same_shape(&v.nodes[arg_of(v, c, a)], cn):
            return False
    return True


cdef bint may_be_stage(const NodeView* v, int32_t c) noexcept nogil:
    """Whether node c can run as a fused stage under the rules of consumer_stage, as
    far as the graph alone tells (the schedule decides the rest): a plain elementwise
    op with an argument computed in a batch (not a leaf) of which it is the only
    consumer. batch_lower_bound(passes=True) does not count such nodes."""
    cdef const Node* cn = &v.nodes[c]
    cdef int a
    cdef int32_t p
    if KIND[cn.op] == NOT_FUSABLE:
        return False
    for a in range(cn.nargs):
        p = arg_of(v, c, a)
        if v.nodes[p].sig >= 0 and v.nodes[p].uses == 1 and shapes_fit(v, c, p):
            return True
    return False


cdef int32_t consumer_stage(Sched* s, const NodeView* v, const int32_t* prev, int n,
                            int32_t* out) noexcept nogil:
    """The next stage of a chain whose last stage is prev[0..n): the consumers of
    prev, in its order, into out; returns their signature, or -1 if they do not form
    a stage."""
    cdef int j, a, k
    cdef int32_t p, c, sig = -1, other
    cdef int64_t q
    cdef const Node* cn
    for j in range(n):
        if j + AHEAD < n:                   # (as the stages' loops, below)
            prefetch_node(&v.nodes[first_consumer(s, prev[j + AHEAD])])
        if j + AHEAD // 2 < n:
            c = first_consumer(s, prev[j + AHEAD // 2])
            for a in range(min(v.nodes[c].nargs, 2)):
                prefetch_arg(v, c, a)
        p = prev[j]
        if v.nodes[p].uses != 1:            # the graph has another consumer (or none)
            return -1
        q = s.loc[p]
        if s.cons_at[q + 1] - s.cons_at[q] != 1:    # its consumer is not in this forward
            return -1
        c = s.cons[s.cons_at[q]]
        cn = &v.nodes[c]
        if j == 0:
            sig = cn.sig
            # other ready nodes of that signature would have joined these in a batch
            # (the strategy's choice, e.g. agenda realigning sequences): leave it
            if KIND[cn.op] == NOT_FUSABLE or s.rd_n[sig] != 0:
                return -1
        elif cn.sig != sig or (c <= out[j - 1] and prev[j] > prev[j - 1]):
            # one signature, and the order of prev where it ascends: a stage in id order
            # after a batch in id order (prev may be ordered by engine/layout.pyx)
            return -1
        if s.indeg[c] != 1 or cn.flags & F_DONE:    # its other arguments are computed
            return -1
        if not shapes_fit(v, c, p):
            return -1
        out[j] = c
    if DEFER and s.depth_lists and joinable_later(s, v, out, n, sig):
        return -1
    return sig


cdef bint joinable_later(Sched* s, const NodeView* v, const int32_t* stage, int n,
                         int32_t sig) noexcept nogil:
    """Whether a node of sig still to run, other than the stage's, is at a depth <= the
    stage's deepest (so it does not depend on the stage and could share its batch)."""
    cdef int32_t deepest = 0
    cdef int j
    for j in range(n):
        if s.depth[stage[j]] > deepest:
            deepest = s.depth[stage[j]]
    return sched_pending_upto(s, v, sig, deepest, n + 1) > n


cdef void stage_forward(const NodeView* v, const int32_t* ids, int j0, int j1,
                        int end) noexcept nogil:
    """Forward of nodes ids[j0..j1) of one stage (values in one block); the stage's
    part ends at `end` (the nodes to prefetch)."""
    cdef Node* c = &v.nodes[ids[j0]]
    cdef const OpDef* op = &OPS[c.op]
    cdef Node* x
    cdef Node* y
    cdef int j
    if KIND[c.op] == UNARY:                 # its argument is the previous stage: one block
        op.math.ufwd(c.val, v.nodes[arg_of(v, ids[j0], 0)].val, c.size * (j1 - j0),
                     c.attr.scalar.value)
        return
    for j in range(j0, j1):
        prefetch_ahead(v, ids, j, end, 2)
        c = &v.nodes[ids[j]]
        x = &v.nodes[arg_of(v, ids[j], 0)]
        y = &v.nodes[arg_of(v, ids[j], 1)]
        op.math.bfwd(c.val, x.val, 1, y.val, 1, c.size)


cdef int64_t fuse_chain(Sched* s, const NodeView* v, BatchLog* log, Batch* ctx, int n,
                        bint check_validity) except -1:
    """After the batch s.picked[0..n) ran (not yet released): find the stages of its
    chain, run them as one pass, record them in the log and release them in the
    scheduler. Returns the number of nodes run; 0: no chain."""
    cdef int64_t first = log.n, k, nst = 0, total = 0
    cdef const int32_t* prev = s.picked
    cdef int32_t* ids
    cdef int32_t sig
    cdef int j, per
    cdef float* block
    # the stages: each is found from the last, recorded in the log before it runs
    # (its ids are read from there); a stage without memory ends the chain (it runs
    # unfused later, where running out of memory raises)
    while nst < MAX_STAGES:
        sig = consumer_stage(s, v, prev, n, s.fuse)
        if sig < 0:
            break
        per = v.nodes[s.fuse[0]].size
        block = arena_alloc(ctx.arena, <size_t>per * n)
        if block == NULL:
            ctx.arena.failed = False
            break
        ids = log_stage(log, s.fuse, n)
        for j in range(n):
            v.nodes[ids[j]].val = block + j * per
            v.nodes[ids[j]].flags |= F_DONE     # not ready again when prev is released
        prev = ids
        nst += 1
    if nst == 0:
        return 0
    # one pass: every stage over one tile of nodes before the next tile (batch first - 1,
    # which just ran, is the chain's producer)
    cdef Chain chain = Chain(v, log, first - 1, first + nst - 1, n, False, 1)
    with nogil:
        run_chain(&chain)
    for k in range(first, first + nst):
        total += n
        if check_validity:
            ctx.ids = log.ids + log.at[k]
            ctx.n = n
            check_finite(ctx, v.nodes[ctx.ids[0]].val, <int64_t>per * n)
    return total


cdef int64_t chain_start(const BatchLog* log, int64_t last) noexcept nogil:
    """The batch that starts the chain batch `last` is in (its producer batch)."""
    while last > 0 and log.chained[last]:
        last -= 1
    return last


cdef inline bint first_write(Node* x, const Node* z) noexcept nogil:
    """As the unfused kernels: x's gradient not written yet is assigned (no zeroing),
    else added to; x and z have one size here (no broadcasting)."""
    cdef bint fresh = grad_fresh(x)
    grad_mark(x)
    return fresh


cdef void stage_backward(const NodeView* v, const int32_t* ids, int j0, int j1,
                         int end) noexcept nogil:
    """Backward of nodes ids[j0..j1) of one stage, node by node as unary_bwd and
    binary_bwd do (the first write of a gradient assigns it); the part ends at `end`."""
    cdef const OpDef* op = &OPS[v.nodes[ids[j0]].op]
    cdef bint unary = KIND[v.nodes[ids[j0]].op] == UNARY
    cdef Node* c
    cdef Node* x
    cdef Node* y
    cdef int j
    for j in range(j0, j1):
        prefetch_ahead(v, ids, j, end, 1 if unary else 2)
        c = &v.nodes[ids[j]]
        grad_ready(c)           # no consumer wrote it (it needs no gradient): zeros
        x = &v.nodes[arg_of(v, ids[j], 0)]
        if unary:
            if x.flags & F_NEEDS_GRAD:
                op.math.ubwd(x.grad, x.val, c.val, c.grad, c.size, c.attr.scalar.value,
                             first_write(x, c))
            continue
        y = &v.nodes[arg_of(v, ids[j], 1)]
        # an argument sharing c's gradient buffer (an `add` stage's previous stage:
        # assign_gradient_memory in engine/backward.pyx) already holds its gradient
        if x.grad == c.grad:
            grad_mark(x)
        elif x.flags & F_NEEDS_GRAD:
            op.math.bbwd_x(x.grad, 1, x.val, 1, y.val, 1, c.val, c.grad, c.size,
                           first_write(x, c))
        if y.grad == c.grad:
            grad_mark(y)
        elif y.flags & F_NEEDS_GRAD:
            op.math.bbwd_y(y.grad, 1, x.val, 1, y.val, 1, c.val, c.grad, c.size,
                           first_write(y, c))


cdef bint chain_backward(const NodeView* v, const BatchLog* log, int64_t first, int64_t last,
                         int32_t stamp, const int32_t* mark) noexcept nogil:
    """Backward of the stages first+1 .. last of a chain (batch `first` is its
    producer) as one pass, tile by tile, last stage first. Only when every node of
    the chain is an ancestor of the target (as the unfused pass, it then runs every
    node's backward); returns False otherwise and nothing ran."""
    cdef int64_t k
    cdef int j, n = log.count[first]
    cdef const int32_t* ids
    for k in range(first, last + 1):
        ids = log.ids + log.at[k]
        for j in range(n):
            if mark[ids[j]] != stamp:
                return False
    cdef Chain chain = Chain(v, log, first, last, n, True, 1)
    run_chain(&chain)
    return True


cdef void chain_part(void* ctx, int c) noexcept nogil:
    cdef Chain* ch = <Chain*>ctx
    cdef int j0 = <int>(<long>c * ch.n // ch.parts), end = <int>(<long>(c + 1) * ch.n // ch.parts)
    cdef int per = ch.v.nodes[ch.log.ids[ch.log.at[ch.first + 1]]].size, j1, tile
    cdef int64_t k
    tile = max(1, TILE // max(per, 1))
    while j0 < end:             # (range() with a variable step is Python's)
        j1 = min(end, j0 + tile)
        if ch.backward:
            for k in range(ch.last, ch.first, -1):
                stage_backward(ch.v, ch.log.ids + ch.log.at[k], j0, j1, end)
        else:
            for k in range(ch.first + 1, ch.last + 1):
                stage_forward(ch.v, ch.log.ids + ch.log.at[k], j0, j1, end)
        j0 = j1


cdef void run_chain(Chain* ch) noexcept nogil:
    cdef int per = ch.v.nodes[ch.log.ids[ch.log.at[ch.first + 1]]].size
    ch.parts = 1
    if split_worthwhile(ch.n, per) and (not ch.backward or stage_gradients_disjoint(ch)):
        ch.parts = min(pool_threads(), ch.n)
    pool_run(chain_part, ch, ch.parts)


cdef bint stage_gradients_disjoint(const Chain* ch) noexcept nogil:
    """The gradients the stages' backward adds into are disjoint (engine/parallel.pyx)."""
    cdef int64_t k, stages = ch.last - ch.first
    cdef int32_t* ids = <int32_t*>malloc(<size_t>stages * ch.n * sizeof(int32_t))
    cdef bint ok
    if ids == NULL:
        return False
    for k in range(stages):
        memcpy(ids + k * ch.n, ch.log.ids + ch.log.at[ch.first + 1 + k], ch.n * sizeof(int32_t))
    ok = gradients_disjoint(ch.v.nodes, ch.v.args, ids, <int>(stages * ch.n))
    free(ids)
    return ok
