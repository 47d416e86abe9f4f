# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The forward executor: one batch of same-signature nodes -> one kernel call whose
outputs land contiguous in the arena (so the next batch can often read them in
place)."""
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

from autobatch.runtime.nodes cimport Node, OpDef, elems, F_DONE
from autobatch.engine.optable cimport op_table
from autobatch.engine.parallel cimport run_kernel
from autobatch.runtime.profile cimport P_KERNEL, prof_start, prof_stop
from autobatch.runtime.memory cimport arena_alloc_or_raise, arena_check, grow, next_capacity, resize

cdef const OpDef* OPS = op_table()


cdef int run_batch(BatchLog* log, Batch* ctx, int32_t* ids, int n, bint check_validity) except -1:
    """Run the nodes ids[0..n) (one signature, arguments computed) as one kernel call
    and record the batch. ctx holds the graph's arrays and arenas."""
    cdef Node* n0 = &ctx.nodes[ids[0]]
    cdef int64_t per = n0.size, at = log.n_ids
    cdef float* block = arena_alloc_or_raise(ctx.arena, per * n)
    cdef int j
    for j in range(n):
        ctx.nodes[ids[j]].val = block + j * per
    log.ids = <int32_t*>grow(log.ids, &log.cap_ids, at + n, sizeof(int32_t))
    memcpy(log.ids + at, ids, n * sizeof(int32_t))
    if log.n >= log.cap:
        grow_batches(log)
    ctx.ids = log.ids + at
    ctx.n = n
    ctx.block = block
    ctx.defer = NULL
    ctx.math = &OPS[n0.op].math
    cdef double t0 = prof_start(ctx.prof)
    with nogil:
        run_kernel(&OPS[n0.op], ctx, False)
    prof_stop(ctx.prof, P_KERNEL, t0)
    arena_check(ctx.arena)          # a kernel ran out of memory: the batch did not run
    arena_check(ctx.scratch)
    log.at[log.n] = at              # only a batch that ran is recorded
    log.count[log.n] = n
    log.chained[log.n] = 0
    log.n_ids = at + n
    log.n += 1
    for j in range(n):
        ctx.nodes[ids[j]].flags |= F_DONE
    if check_validity:
        check_finite(ctx, block, per * n)
    return 0


cdef int grow_batches(BatchLog* log) except -1:
    cdef int64_t cap = next_capacity(log.cap, log.n + 1)
    log.at = <int64_t*>resize(log.at, cap, sizeof(int64_t))
    log.count = <int32_t*>resize(log.count, cap, sizeof(int32_t))
    log.chained = <uint8_t*>resize(log.chained, cap, sizeof(uint8_t))
    log.cap = cap
    return 0


cdef int32_t* log_stage(BatchLog* log, const int32_t* ids, int n) except NULL:
    """Record nodes ids[0..n) as a fused stage of the chain of the last batch (before
    it runs: the fused kernel reads its ids from the log); returns them in the log."""
    cdef int64_t at = log.n_ids
    log.ids = <int32_t*>grow(log.ids, &log.cap_ids, at + n, sizeof(int32_t))
    memcpy(log.ids + at, ids, n * sizeof(int32_t))
    if log.n >= log.cap:
        grow_batches(log)
    log.at[log.n] = at
    log.count[log.n] = n
    log.chained[log.n] = 1
    log.n_ids = at + n
    log.n += 1
    return log.ids + at


cdef int check_finite(Batch* b, float* block, int64_t count) except -1:
    """FloatingPointError naming the first node of the batch with a NaN or infinity."""
    cdef int64_t k
    cdef float v
    cdef int32_t i
    for k in range(count):
        v = block[k]
        if v - v != 0:          # NaN or infinity
            i = b.ids[k // b.nodes[b.ids[0]].size]
            raise FloatingPointError(
                f"{OPS[b.nodes[i].op].name.decode()} (node {i}) produced {v} "
                f"(renew_cg(check_validity=True) checks every value)")
    return 0


cdef void log_reset(BatchLog* log) noexcept nogil:
    log.n = 0
    log.n_ids = 0


cdef void log_free(BatchLog* log) noexcept nogil:
    free(log.ids)
    free(log.at)
    free(log.count)
    free(log.chained)
    memset(log, 0, sizeof(BatchLog))
