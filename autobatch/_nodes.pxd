# The graph's node storage as the stages read it (the scheduler, the executor,
# backward, statistics): declarations only. The graph (_graph.pyx) owns and grows it.
from libc.stdint cimport int32_t, int64_t
from autobatch._kernels cimport Node

ctypedef struct NodeView:
    Node* nodes
    int32_t* args       # node i's arguments: args[nodes[i].args_at : + nodes[i].nargs]
    int32_t* ibuf       # per-node integer data (index lists)
    int64_t n           # number of nodes

cdef inline int32_t arg_id(const NodeView* v, int32_t i, int a) noexcept nogil:
    return v.args[v.nodes[i].args_at + a]
