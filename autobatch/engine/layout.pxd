# The memory-layout pass: the order of a batch's nodes, which is the order of their
# outputs in memory, chosen so that later products read their operands in place.
from libc.stdint cimport int32_t, int64_t
from autobatch.engine.scheduler cimport Sched
from autobatch.runtime.nodes cimport NodeView

cdef bint layout_on() noexcept nogil
cdef void layout_keys(Sched* s, int64_t count) noexcept nogil
cdef int layout_order(Sched* s, const NodeView* v, int32_t* ids, int n) except -1
