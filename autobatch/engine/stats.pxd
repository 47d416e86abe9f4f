# Statistics and debug views of a graph: what ran, in which batches, and why nodes
# ran alone.
from autobatch.engine.executor cimport BatchLog
from autobatch.runtime.nodes cimport NodeView
from autobatch.engine.signatures cimport SigTable
from autobatch.runtime.profile cimport Profile, Traffic

cdef bint profiling_enabled() noexcept
cdef dict profile_stats(const Profile* p, double t_build, double t_schedule,
                        double t_forward, double t_backward)
cdef dict operand_stats(const Traffic* t)

cdef dict batch_stats(const NodeView* v, const BatchLog* log, const SigTable* sigs,
                      bint unbatched_strategy)
cdef dict fusion_stats(const NodeView* v, const BatchLog* log)
cdef list batch_list(const NodeView* v, const BatchLog* log)
cdef print_batch_list(const NodeView* v, const BatchLog* log, object file)
cdef print_graphviz(const NodeView* v, object out)
cdef tuple lower_bound(const NodeView* v, const SigTable* sigs, bint passes)
