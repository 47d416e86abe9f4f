# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The forward loop over the `count` needed nodes that sched_collect put in
`sched.needed`: the strategy picks a batch from the ready frontier (strategies.pyx),
the executor runs it (executor.pyx), fusion runs the elementwise chains that start
there (fusion.pyx), and the scheduler releases what the batch and its fused stages
made ready. Under "none" every node is its own batch, in creation order. A Ctrl-C
stops the loop between batches: what ran is kept, the rest runs on the next forward.
The time spent choosing and running is added to t_sched and t_run."""
from libc.stdint cimport int64_t
from cpython.exc cimport PyErr_CheckSignals

from autobatch.engine.executor cimport run_batch
from autobatch.engine.fusion cimport fuse_chain, fusion_defers
from autobatch.engine.layout cimport layout_on, layout_keys, layout_order
from autobatch.engine.scheduler cimport (sched_prepare, sched_push_initial, sched_release,
                                         sched_release_ids)
from autobatch.engine.strategies cimport (S_NONE, S_AGENDA, S_DEPTH, S_LOOKAHEAD, S_COST,
                                          S_PYTHON, S_LEARNED, pick_batch)
from autobatch.engine.learned cimport LearnedStrategy, learned_begin, learned_pick, learned_end
from autobatch.kernels.packed cimport packs_begin
from autobatch.runtime.profile cimport prof_now


cdef int run_forward(NodeView* v, Batch* ctx, Sched* sched, BatchLog* log, SigTable* sigs,
                     PackCache* packs, int strategy_id, object strategy, int64_t count,
                     bint fusion, bint check_validity, double* t_sched,
                     double* t_run) except -1:
    cdef double t1
    cdef int64_t pos, first, k, fused
    cdef int n
    cdef bint heights, feeders, layout
    if strategy_id == S_NONE:
        # creation order is a topological order; every node is its own batch
        t1 = prof_now()
        for pos in range(count):
            run_batch(log, ctx, &sched.needed[pos], 1, check_validity)
            if pos % 64 == 63:
                PyErr_CheckSignals()    # Ctrl-C: what ran is kept, the rest runs later
        t_run[0] += prof_now() - t1
        return 0
    t1 = prof_now()
    heights = strategy_id != S_AGENDA and strategy_id != S_DEPTH
    feeders = strategy_id == S_LOOKAHEAD or strategy_id == S_COST
    if strategy_id == S_LEARNED:        # what its fallback reads (its learning: all)
        heights = (<LearnedStrategy>strategy).reads_heights
        feeders = (<LearnedStrategy>strategy).reads_feeders
    layout = layout_on()
    sched.layout = layout
    sched_prepare(sched, v, sigs.n, count, heights, feeders,
                  strategy_id == S_COST or (fusion and fusion_defers()))
    sched_push_initial(sched, v, count)
    if strategy_id == S_LEARNED:        # its kinds, and learning on simulations
        learned_begin(<LearnedStrategy>strategy, sched, v, sigs, count, fusion)
    if layout:                          # (after learning, which prepares again)
        layout_keys(sched, count)
    t_sched[0] += prof_now() - t1
    while count > 0:
        t1 = prof_now()
        if strategy_id == S_LEARNED:
            n = learned_pick(<LearnedStrategy>strategy, sched, v, sigs)
        else:
            n = pick_batch(strategy_id, strategy, sched, v, sigs)
        if strategy_id == S_PYTHON:
            packs_begin(packs)          # its select() is user code
        if layout:
            layout_order(sched, v, sched.picked, n)
        t_sched[0] += prof_now() - t1
        t1 = prof_now()
        first = log.n
        run_batch(log, ctx, sched.picked, n, check_validity)
        fused = fuse_chain(sched, v, log, ctx, n, check_validity) if fusion else 0
        t_run[0] += prof_now() - t1
        t1 = prof_now()
        sched_release(sched, v, n)
        for k in range(first + 1, log.n):     # the fused stages
            sched_release_ids(sched, v, log.ids + log.at[k], n)
        t_sched[0] += prof_now() - t1
        count -= n + fused
        PyErr_CheckSignals()            # Ctrl-C: what ran is kept, the rest runs later
    if strategy_id == S_LEARNED:
        learned_end(<LearnedStrategy>strategy, sched)
    return 0
