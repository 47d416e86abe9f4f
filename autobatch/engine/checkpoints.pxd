# cg_revert's work on the graph's arrays: dropping the nodes made after a checkpoint,
# the signatures only they used, and the computed batches that hold any of them.
from libc.stdint cimport int32_t, int64_t
from autobatch.engine.executor cimport BatchLog
from autobatch.runtime.nodes cimport Node
from autobatch.engine.signatures cimport SigTable

cdef bint computed_any(const BatchLog* log, int64_t from_batch, int32_t first_dropped) noexcept nogil
cdef void uncompute(Node* nodes, BatchLog* log, int64_t from_batch) noexcept nogil
cdef void drop_signatures(const Node* nodes, SigTable* t, int64_t first, int64_t last,
                          int64_t n_sigs) noexcept nogil
cdef void drop_uses(Node* nodes, const int32_t* args, int64_t first, int64_t last) noexcept nogil
