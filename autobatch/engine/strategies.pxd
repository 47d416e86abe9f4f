# Batching strategies: the built-in policies (C, over the ready frontier), the
# Frontier that a strategy written in Python reads, and the registry of names.
from libc.stdint cimport int32_t
from autobatch.runtime.nodes cimport NodeView
from autobatch.engine.scheduler cimport Sched
from autobatch.engine.signatures cimport SigTable

# ids of the built-in strategies; S_PYTHON: any object with select(frontier)
cdef enum:
    S_NONE, S_DEPTH, S_AGENDA, S_CRITICAL, S_LOOKAHEAD, S_COST, S_PYTHON

# the learned strategy (engine/learned.pyx): not in the policy table, the forward loop
# calls it directly
cdef enum:
    S_LEARNED = 64

cdef class BuiltinStrategy:
    cdef readonly int sid
    """The engine's id of the strategy."""
    cdef readonly str name
    """The name it is registered under (``renew_cg(strategy=name)``)."""
    cdef readonly str description
    """What it does, in a sentence."""

cdef int strategy_id(object strategy) except -1
cdef int pick_batch(int sid, object strategy, Sched* s, const NodeView* v,
                    const SigTable* sigs) except -1
