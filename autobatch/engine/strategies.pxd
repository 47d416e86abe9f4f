# Batching strategies: the built-in policies (C, over the ready frontier), the
# Frontier that a strategy written in Python reads, and the registry of names.
from libc.stdint cimport int32_t
from autobatch.runtime.nodes cimport NodeView
from autobatch.engine.scheduler cimport Sched
from autobatch.engine.signatures cimport SigTable

# ids of the built-in strategies; S_PYTHON: any object with select(frontier)
cdef enum:
    S_NONE, S_DEPTH, S_AGENDA, S_CRITICAL, S_LOOKAHEAD, S_COST, S_PYTHON

cdef class BuiltinStrategy:
    cdef readonly int sid
    cdef readonly str name
    cdef readonly str description

cdef int strategy_id(object strategy) except -1
cdef int pick_batch(int sid, object strategy, Sched* s, const NodeView* v,
                    const SigTable* sigs) except -1
