# The reverse pass: the forward's batches in reverse, gradients accumulated (+=).
from libc.stdint cimport int32_t, int64_t, uint8_t
from autobatch.engine.executor cimport BatchLog
from autobatch.runtime.nodes cimport Batch
from autobatch.runtime.nodes cimport NodeView
from autobatch.engine.scheduler cimport Sched

cdef int backward_pass(const NodeView* v, const BatchLog* log, Sched* work, Batch* ctx,
                       int32_t target, bint full, bint defer_weights,
                       bint share_weights, int64_t* fused_chains,
                       int64_t* shared_weight_grads) except -1

# A trainable lookup node (lookup, lookup_batch, or a whole table as a parameter
# expression) and its table's used-row flags, which a backward from a node at or after
# it sets (the rows the trainer's sparse update then touches).
ctypedef struct RowMark:
    int32_t node
    int32_t whole       # > 0: the node is the whole table, of this many rows
    uint8_t* used       # the table's flags, one per row

cdef void mark_used_rows(const NodeView* v, const RowMark* marks, int64_t n,
                         int32_t target) noexcept nogil
