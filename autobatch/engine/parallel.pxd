# Running one batch's kernel as ranges of its nodes on the engine's threads.
from autobatch.runtime.nodes cimport Batch, Node, OpDef
from libc.stdint cimport int32_t

cdef void run_kernel(const OpDef* op, Batch* b, bint backward) noexcept nogil
cdef bint gradients_disjoint(const Node* nodes, const int32_t* args, const int32_t* ids,
                             int n) noexcept nogil
