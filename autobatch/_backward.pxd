# The reverse pass: the forward's batches in reverse, gradients accumulated (+=).
from libc.stdint cimport int32_t, int64_t
from autobatch._executor cimport BatchLog
from autobatch._nodes cimport Batch
from autobatch._nodes cimport NodeView
from autobatch._scheduler cimport Sched

cdef int backward_pass(const NodeView* v, const BatchLog* log, Sched* work, Batch* ctx,
                       int32_t target, bint full, bint defer_weights,
                       int64_t* fused_chains) except -1
