# The 'cost' strategy: a model of a batch's time and the greedy choice that minimises
# the time the schedule adds (see engine/cost_model.pyx, docs/strategies.md).
from autobatch.runtime.nodes cimport NodeView
from autobatch.engine.scheduler cimport Sched

cdef int pick_cost(Sched* s, const NodeView* v) noexcept nogil
