# Fusion of elementwise chains: after a batch ran, its nodes' single elementwise
# consumers run at once, as one pass over the batch (see docs/fusion.md).
from libc.stdint cimport int32_t, int64_t
from autobatch.engine.executor cimport BatchLog
from autobatch.runtime.nodes cimport Batch, NodeView
from autobatch.engine.scheduler cimport Sched

cdef int64_t fuse_chain(Sched* s, const NodeView* v, BatchLog* log, Batch* ctx, int n,
                        bint check_validity) except -1
cdef int32_t consumer_stage(Sched* s, const NodeView* v, const int32_t* prev, int n,
                            int32_t* out) noexcept nogil
cdef bint fusion_defers() noexcept nogil
cdef bint may_be_stage(const NodeView* v, int32_t c) noexcept nogil
cdef int64_t chain_start(const BatchLog* log, int64_t last) noexcept nogil
cdef bint chain_backward(const NodeView* v, const BatchLog* log, int64_t first, int64_t last,
                         int32_t stamp, const int32_t* mark) noexcept nogil
