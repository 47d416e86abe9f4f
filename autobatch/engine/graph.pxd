# The engine's side of a computation graph: node storage and the passes (forward, backward,
# renew, statistics). The stages it runs live in their own modules.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from autobatch.engine.backward cimport RowMark
from autobatch.engine.executor cimport BatchLog
from autobatch.runtime.nodes cimport Node, Shape, Attrs, Batch
from autobatch.runtime.rng cimport Rng
from autobatch.runtime.memory cimport Arena, ArenaMark
from autobatch.runtime.pack_cache cimport PackCache
from autobatch.runtime.param_buffers cimport ValueSource
from autobatch.runtime.profile cimport Profile, Traffic
from autobatch.runtime.stacks cimport StackCache
from autobatch.runtime.nodes cimport NodeView
from autobatch.engine.scheduler cimport Sched
from autobatch.engine.signatures cimport SigTable

# the graph's sizes at cg_checkpoint(), to go back to at cg_revert()
ctypedef struct Checkpoint:
    int64_t n_nodes, n_args, n_ibuf, n_tables, n_marks, n_sigs, n_keepalive, n_reads
    int64_t log_n, log_n_ids, resets
    ArenaMark leaf, values

# a leaf that reads a parameter (OP_PARAM: points into its buffer) or a lookup row
# (OP_LOOKUP: its row copied into the node) when it is first computed
ctypedef struct LeafRead:
    int32_t node
    ValueSource* src

cdef int32_t new_version() except -1

# free node slots kept for the nodes of Parameters used as Expressions (see add_node)
cdef enum:
    NODE_HEADROOM = 4

cdef class EngineGraph:
    # node storage
    cdef Node* nodes
    cdef int64_t n_nodes, cap_nodes
    cdef int32_t* born                  # the version node i was created under (see revert)
    cdef int64_t cap_born
    cdef int32_t base_version           # the version at renew: older ones are other graphs
    cdef Checkpoint* checkpoints        # cg_checkpoint's stack
    cdef int64_t n_checkpoints, cap_checkpoints
    cdef int64_t resets                 # times `arena` was reset (a checkpoint's mark is void after)
    cdef int32_t* args
    cdef int64_t n_args, cap_args
    cdef int32_t* ibuf                  # per-node integer data (index lists)
    cdef int64_t n_ibuf, cap_ibuf
    cdef float** tables                 # lookup tables read by nodes: (values, gradients) pairs
    cdef int64_t n_tables, cap_tables
    cdef ValueSource** table_src        # where each table's values are (read at each forward)
    cdef int64_t cap_table_src
    cdef LeafRead* reads                # leaves that read parameters, in node order
    cdef int64_t n_reads, cap_reads
    cdef int64_t n_read                 # reads[:n_read] are done (computed)
    cdef RowMark* marks                 # trainable lookups: rows a backward marks as used
    cdef int64_t n_marks, cap_marks
    cdef list keepalive                 # Python objects whose memory nodes point into
    cdef readonly int32_t version_id    # cg_version(); nodes' `born`
    """The graph's version: ``renew_cg()`` and ``cg_revert()`` give the graph a new one, unique in the process (``dy.cg_version()``)."""
    cdef int32_t backward_target        # node the last backward started from; -1: none
                                        # since the graph was started or invalidated
    # the stages' state
    cdef SigTable sigs
    cdef Sched sched
    cdef BatchLog log
    cdef Arena leaf_arena               # values of inputs and constants, reset on renew
    cdef Arena arena                    # computed values and forward aux, reset on renew
                                        # and when the graph is computed again
    cdef Arena garena                   # gradients and backward scratch, reset per backward
    cdef Rng rng
    cdef PackCache packs                # weights packed for the current pass (_packed)
    # strategy and switches
    cdef int strategy_id
    cdef readonly object strategy
    """The strategy that chooses this graph's batches (``set_strategy`` changes it)."""
    cdef bint busy                      # a forward is running (a Python strategy may be called)
    cdef readonly bint immediate_compute   # compute every node when it is created (debugging)
    """Whether every node is computed when it is created (``renew_cg(immediate_compute=True)``)."""
    cdef readonly bint check_validity      # raise on the first NaN or infinity a kernel produces
    """Whether a NaN or infinity raises FloatingPointError (``renew_cg(check_validity=True)``)."""
    cdef readonly bint fusion              # run elementwise chains fused (engine/fusion.pyx)
    """Whether elementwise chains run fused (``renew_cg(fusion=...)``, ``set_default_fusion``)."""
    # statistics
    cdef public double t_build, t_schedule, t_forward, t_backward
    cdef bint profiling                 # dy.set_profiling() when the graph was renewed
    cdef Profile prof
    cdef Traffic traffic
    cdef StackCache stacks              # stacked operands copied in the current forward
    cdef double t_last
    cdef public int n_forward_calls, n_backward_calls
    """How many forward and backward passes ran in this graph."""
    cdef int64_t n_backward_chains      # fused chains whose backward ran as one pass
    cdef int64_t n_shared_weight_grads  # weights whose dW came from a product shared with others

    cdef void _clear(self)
    cdef int _forward(self, const int32_t* targets, int64_t n_targets) except -1
    cdef int32_t _index_of(self, e) except -1
    cdef NodeView view(self) noexcept
    cdef Batch context(self) noexcept
    cdef int32_t add_node(self, int op, int nargs, const int32_t* argv, Shape shape,
                          int32_t idata=*, const Attrs* attr=*, bint headroom=*) except -1
    cdef float* leaf_memory(self, int32_t i) except NULL
    cdef int32_t add_ints(self, object values, int count) except -1
    cdef int32_t add_table(self, ValueSource* values, float* grads) except -1
    cdef int add_read(self, int32_t node, ValueSource* src) except -1
    cdef ValueSource* read_source(self, int32_t node) noexcept
    cdef void read_leaves(self) noexcept
    cdef int add_row_mark(self, int32_t node, uint8_t* used, int32_t whole=*) except -1
    cdef int check_idle(self) except -1
    cdef int forward_to(self, int32_t target) except -1
    cdef int forward_many(self, const int32_t* targets, int64_t n) except -1
    cdef int backward_from(self, int32_t target, bint full=*) except -1
    cdef start(self, strategy, int version, uint64_t seed, bint immediate_compute=*,
               bint check_validity=*, bint fusion=*)
    cdef tuple shape_of(self, int32_t i)
    cdef object value_array(self, int32_t i, bint grad)
    cpdef set_strategy(self, strategy)
    cpdef invalidate(self)
    cdef bint owns(self, int32_t version, int32_t idx) noexcept
