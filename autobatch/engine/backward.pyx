# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Backward: d(target)/d(every ancestor), batch by batch in reverse forward order.

Gradient memory comes from the scratch arena (ctx.scratch), one block per batch that
holds an ancestor, so that a batch's gradients are as contiguous as its values. The
blocks are not zeroed: a node's gradient is written first by an assignment (kernels
with first_write: gemm with beta = 0, the elementwise loops' `set`) or zeroed just
before a kernel that adds into it (grad_ready), so memory that the first write
overwrites is not cleared before. Trainable leaves write into their parameter's
gradient directly; the rows of lookup tables that a backward reached are marked for
the trainer (mark_used_rows)."""
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from autobatch.engine.fusion cimport chain_start, chain_backward
from autobatch.kernels.weight_grads cimport flush_weight_grads, weight_grads_free, weight_grads_start
from autobatch.runtime.nodes cimport (Node, OpDef, WeightGrads, F_NEEDS_GRAD, F_TRAINABLE,
                               F_GRAD_SET, grad_ready, NODE, ARG)
from autobatch.engine.optable cimport op_table, OP_ADD, OP_LOOKUP_BATCH
from autobatch.engine.parallel cimport run_kernel
from autobatch.runtime.profile cimport P_KERNEL, P_MEMORY, prof_start, prof_stop
from autobatch.runtime.memory cimport arena_alloc_or_raise, arena_check, arena_reset
from autobatch.engine.scheduler cimport sched_collect

cdef const OpDef* OPS = op_table()


cdef int backward_pass(const NodeView* v, const BatchLog* log, Sched* work, Batch* ctx,
                       int32_t target, bint full, bint defer_weights,
                       bint share_weights, int64_t* fused_chains,
                       int64_t* shared_weight_grads) except -1:
    """Accumulate d(target)/d(parameter) into the parameters' gradients (target is a
    computed scalar per batch element). full: keep the gradient of every ancestor,
    inputs and constants included. defer_weights: postpone weight gradients to the
    end so that the terms of one weight become one gemm (not for 'none', the
    unbatched reference). share_weights: weights whose postponed terms read the same
    X's share one gemm (flush_weight_grads). fused_chains: += the chains whose stages
    ran as one pass; shared_weight_grads: += the weights whose gradient was shared."""
    arena_reset(ctx.scratch)
    cdef int64_t nanc = sched_collect(work, v, target, True)
    cdef double t0 = prof_start(ctx.prof)
    assign_gradient_memory(v, log, work, ctx, nanc, full)
    prof_stop(ctx.prof, P_MEMORY, t0)
    cdef Node* t = &v.nodes[target]
    cdef int j
    grad_ready(t)
    for j in range(t.bs):
        t.grad[j] += 1.0
    cdef int64_t bi, most = 1, cap = 1
    for bi in range(log.n):
        if log.count[bi] > most:
            most = log.count[bi]
        cap += max(1, v.nodes[log.ids[log.at[bi]]].nargs // 2)
    # A batch may mix ancestors of target with other nodes: backward runs over the
    # ancestors only, so that nothing flows from nodes the loss does not use (not
    # even 0 * inf = NaN from a node whose local derivative is infinite).
    cdef int32_t* sub = <int32_t*>malloc(most * sizeof(int32_t))
    cdef WeightGrads defer           # room for one postponed weight gradient per product term
    if weight_grads_start(&defer, <int>cap, share_weights) < 0 or sub == NULL:
        free(sub)
        weight_grads_free(&defer)
        raise MemoryError("autobatch: backward's work arrays")
    ctx.defer = &defer if defer_weights else NULL
    # the GIL stays held: backward adds into parameter gradients, which the graphs of
    # all threads share (forward kernels, which only read parameters, release it)
    try:
        fused_chains[0] += run_in_reverse(v, log, work, ctx, sub, &defer)
        arena_check(ctx.scratch)
        shared_weight_grads[0] += defer.shared
    finally:
        weight_grads_free(&defer)
        free(sub)
    return 0


cdef int64_t run_in_reverse(const NodeView* v, const BatchLog* log, Sched* work, Batch* ctx,
                            int32_t* sub, WeightGrads* defer) noexcept nogil:
    """The backward kernels of the batches that hold an ancestor of the target
    (work.mark == stamp) that wants a gradient, last batch first, then the postponed
    weight gradients; stops when scratch memory runs out. Returns the number of fused
    chains that ran as one pass."""
    cdef int32_t st = work.stamp
    cdef int64_t bi = log.n - 1, first, chains = 0
    cdef int32_t nsub, j
    cdef int32_t* ids
    cdef double t0
    cdef bint fused
    while bi >= 0:
        if log.chained[bi]:         # the last stage of a fused chain: its stages in one pass
            first = chain_start(log, bi)
            t0 = prof_start(ctx.prof)
            fused = chain_backward(v, log, first, bi, st, work.mark)
            prof_stop(ctx.prof, P_KERNEL, t0)
            if fused:
                bi = first
                chains += 1
        ids = log.ids + log.at[bi]
        bi -= 1
        nsub = 0
        for j in range(log.count[bi + 1]):
            if work.mark[ids[j]] == st and v.nodes[ids[j]].flags & F_NEEDS_GRAD:
                nsub = nsub + 1
        if nsub == 0:
            continue
        nsub = 0
        for j in range(log.count[bi + 1]):
            if work.mark[ids[j]] == st:
                sub[nsub] = ids[j]
                nsub = nsub + 1
        ctx.n = nsub
        if nsub == log.count[bi + 1]:
            ctx.ids = ids
            ctx.block = v.nodes[ids[0]].grad
        else:
            ctx.ids = sub
            ctx.block = NULL
        ctx.math = &OPS[v.nodes[ids[0]].op].math
        t0 = prof_start(ctx.prof)
        ready_gradients(ctx, OPS[v.nodes[ids[0]].op].first_write)
        prof_stop(ctx.prof, P_MEMORY, t0)
        t0 = prof_start(ctx.prof)
        run_kernel(&OPS[v.nodes[ids[0]].op], ctx, True)
        prof_stop(ctx.prof, P_KERNEL, t0)
        if ctx.scratch.failed:
            break
    if not ctx.scratch.failed:
        t0 = prof_start(ctx.prof)
        flush_weight_grads(defer, ctx.scratch, ctx.prof)
        prof_stop(ctx.prof, P_KERNEL, t0)
    return chains


cdef inline void ready_gradients(Batch* b, bint first_write) noexcept nogil:
    """Before a batch's backward kernel: the nodes' own gradients hold a value (zero
    if no consumer wrote one), and so do their arguments' unless the kernel assigns
    on the first write itself."""
    cdef int j, a
    cdef Node* n
    for j in range(b.n):
        n = NODE(b, j)
        grad_ready(n)
        if not first_write:
            for a in range(n.nargs):
                grad_ready(ARG(b, j, a))


cdef int assign_gradient_memory(const NodeView* v, const BatchLog* log, Sched* work,
                                Batch* ctx, int64_t nanc, bint full) except -1:
    """Gradient memory for the ancestors of target (work.mark == stamp), not written
    yet (F_GRAD_SET clear) for the computed nodes.

    Leaves: the gradient storage of trainable ones is the parameter's; other
    ancestors write into a shared sink (kernels add to every argument). Nodes that
    are not ancestors point at a zeroed sink that nothing writes, so that gradient()
    reads zeros for them. Leaves' gradients count as written (kernels add to them)."""
    cdef int32_t st = work.stamp
    cdef int64_t k, bi, j, per, sink_size = 1
    cdef Node* n
    for k in range(v.n):
        if v.nodes[k].size > sink_size:
            sink_size = v.nodes[k].size
    cdef float* sink = arena_alloc_or_raise(ctx.scratch, sink_size)
    cdef float* zsink = arena_alloc_or_raise(ctx.scratch, sink_size)
    memset(zsink, 0, sink_size * sizeof(float))
    if full:
        for k in range(nanc):
            v.nodes[work.needed[k]].flags |= F_NEEDS_GRAD
    for k in range(v.n):
        n = &v.nodes[k]
        if not OPS[n.op].leaf:
            continue
        n.flags = n.flags | F_GRAD_SET
        if n.flags & F_TRAINABLE:
            continue
        if work.mark[k] == st and n.flags & F_NEEDS_GRAD:
            n.grad = arena_alloc_or_raise(ctx.scratch, n.size)
            memset(n.grad, 0, n.size * sizeof(float))
        else:
            n.grad = sink if work.mark[k] == st else zsink
    cdef bint any_anc, whole_chain = False
    cdef int32_t* ids
    cdef float* g
    cdef float* carried = NULL
    for bi in range(log.n):
        ids = log.ids + log.at[bi]
        if not log.chained[bi]:
            whole_chain = chain_all_ancestors(log, work, bi)
        any_anc = False
        for j in range(log.count[bi]):
            if work.mark[ids[j]] == st:
                any_anc = True
        per = v.nodes[ids[0]].size
        if carried != NULL:                 # this stage's gradients are its arguments'
            g = carried
        elif any_anc:
            g = arena_alloc_or_raise(ctx.scratch, per * log.count[bi])
        carried = g if whole_chain and add_stage_follows(v, log, bi) else NULL
        for j in range(log.count[bi]):      # non-ancestors: nothing writes them
            n = &v.nodes[ids[j]]
            n.grad = g + j * per if work.mark[ids[j]] == st else zsink
            n.flags = n.flags & ~F_GRAD_SET
    return 0


# A fused `add` stage (x + y, no broadcasting) passes its gradient to its argument from
# the previous stage unchanged: d(x + y)/dx = 1. When that argument has no other
# consumer, the two share one gradient buffer, and the stage's backward skips the copy
# (chain_backward in engine/fusion.pyx): the same numbers without a pass over memory.
# Only for chains that backward runs fused (every node an ancestor of the target).

cdef bint chain_all_ancestors(const BatchLog* log, const Sched* work, int64_t first) noexcept nogil:
    """Whether every node of the chain that starts at batch `first` (its producer;
    the stages follow, flagged chained) is an ancestor of the target."""
    cdef int64_t k = first
    cdef int32_t j
    cdef const int32_t* ids
    while k < log.n and (k == first or log.chained[k]):
        ids = log.ids + log.at[k]
        for j in range(log.count[k]):
            if work.mark[ids[j]] != work.stamp:
                return False
        k += 1
    return True


cdef bint add_stage_follows(const NodeView* v, const BatchLog* log, int64_t bi) noexcept nogil:
    """Whether batch bi + 1 is a fused `add` stage whose node j takes node j of batch
    bi (its only consumer, and that node wants a gradient) as exactly one argument."""
    if bi + 1 >= log.n or not log.chained[bi + 1]:
        return False
    cdef const int32_t* prev = log.ids + log.at[bi]
    cdef const int32_t* stage = log.ids + log.at[bi + 1]
    cdef int32_t j, p
    cdef const Node* c
    if v.nodes[stage[0]].op != OP_ADD:
        return False
    for j in range(log.count[bi + 1]):
        p = prev[j]
        c = &v.nodes[stage[j]]
        if v.nodes[p].uses != 1 or not v.nodes[p].flags & F_NEEDS_GRAD:
            return False
        if (v.args[c.args_at] == p) == (v.args[c.args_at + 1] == p):
            return False
    return True


cdef void mark_used_rows(const NodeView* v, const RowMark* marks, int64_t n,
                         int32_t target) noexcept nogil:
    """Mark the rows of every trainable lookup made up to `target` as used, after a
    backward from `target`. This is DyNet's rule (SimpleExecutionEngine::backward calls
    accumulate_grad, which records the row in non_zero_grads, for every parameter node
    i <= from_where): also a lookup off the loss's path or under nobackprop is marked
    (its gradient is 0, but the sparse update still runs the rule on its row); one made
    after target, one dropped by cg_revert or one whose graph never ran backward is not.
    `marks` is in node order (appended when the nodes are made)."""
    cdef int64_t k
    cdef int32_t j
    cdef const Node* x
    for k in range(n):
        if marks[k].node > target:
            break
        x = &v.nodes[marks[k].node]
        if marks[k].whole > 0:
            memset(marks[k].used, 1, marks[k].whole)
        elif x.op == OP_LOOKUP_BATCH:     # ibuf: the table's slot, then one row per element
            for j in range(x.bs):
                marks[k].used[v.ibuf[x.idata + 1 + j]] = 1
        else:                             # a lookup: its row is idata
            marks[k].used[x.idata] = 1
