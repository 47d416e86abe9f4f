# The data every stage of the engine shares: a node, its shape and typed attributes,
# the op record, and what a kernel gets for one batch. Declarations only (no module).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memset
from autobatch.runtime.memory cimport Arena
from autobatch.runtime.pack_cache cimport PackCache
from autobatch.runtime.rng cimport Rng
from autobatch.runtime.profile cimport Profile, Traffic
from autobatch.runtime.stacks cimport StackCache

# node flags
cdef enum:
    F_DONE = 1         # value computed
    F_NEEDS_GRAD = 2   # depends on a trainable parameter
    F_ALIAS = 4        # value/grad point into parameter storage
    F_TRAINABLE = 8    # its gradient storage is a trainable parameter's
    F_GRAD_SET = 16    # backward: its gradient memory holds a value (else: not written yet,
                       # the first write assigns instead of adding; see grad_ready)

cdef enum:
    MAX_DIMS = 4       # dimensions of a value, besides the batch (DyNet's Dim)

# A shape as DyNet's Dim: nd dimensions d[0..nd-1] (column-major; the d past nd are
# 1) times bs batch elements. Every size is checked at node creation (int32 each, the
# product below 2^31), so kernels may multiply them in int.
ctypedef struct Shape:
    int32_t nd
    int32_t d[4]
    int32_t bs

# Typed attributes: one member per kind of op, read by name in kernels
# (n.attr.axis.dim, n.attr.gates.hidden ...). The whole union is zeroed before a node
# fills it and all its words enter the signature, so two nodes that differ in any
# attribute never share a batch.
ctypedef struct ScalarAttr:       # the constant of an elementwise op's math line
    float value                   # (elu's alpha, x + c, dropout's p, noise's stddev ...)

ctypedef struct AxisAttr:         # ops along one dimension (concatenate, pick, max_dim ...)
    int32_t dim

ctypedef struct RangeAttr:        # pick_range: every step-th element along dimension dim
    int32_t dim                   # (the range's start is per node, in idata)
    int32_t step

ctypedef struct ReduceAttr:       # sum_dim, mean_dim: the dimensions summed over
    int32_t mask                  # bit k: dimension k (k < MAX_DIMS); bit MAX_DIMS: the batch
    float scale                   # the sums are multiplied by it (mean_dim: 1 / n)

ctypedef struct PermAttr:         # transpose: output dimension k is input dimension perm[k]
    int32_t perm[4]

ctypedef struct DropAttr:         # dropout_dim, dropout_batch, block_dropout
    float p                       # probability of dropping
    int32_t shared                # bit k: one mask draw along dimension k (k < MAX_DIMS;
                                  # bit MAX_DIMS: the batch), repeated over it

ctypedef struct MarginAttr:
    float margin

ctypedef struct GatesAttr:        # lstm_gates: blocks of `hidden`, forget blocks + forget_bias
    int32_t hidden
    float forget_bias

ctypedef struct ConvAttr:         # conv2d (with or without bias)
    int32_t stride[2]             # (rows, columns)
    int32_t is_valid              # VALID (no padding) or SAME

ctypedef struct PoolAttr:         # maxpooling2d
    int32_t ksize[2]
    int32_t stride[2]
    int32_t is_valid

ctypedef union Attrs:
    ScalarAttr scalar
    AxisAttr axis
    RangeAttr range
    ReduceAttr reduce
    PermAttr transpose
    MarginAttr hinge
    DropAttr drop
    GatesAttr gates
    ConvAttr conv
    PoolAttr pool
    int64_t words[3]              # the signature's view of the union

# One node: 96 bytes, so that the scheduler's and backward's passes over all nodes stay
# in cache (small ints first, the 8-byte aligned attributes and pointers after).
ctypedef struct Node:
    int16_t op
    int8_t nd           # shape (see Shape): nd dimensions d, times bs batch elements
    uint8_t flags
    int32_t nargs
    int32_t args_at     # arguments: Graph.args[args_at : args_at + nargs]
    int32_t d[4]
    int32_t bs
    int32_t size        # elements, batch included
    int32_t sig         # interned signature id
    int32_t idata       # per-node data (an index, or an offset into Graph.ibuf); not in the signature
    int32_t uses        # nodes of the graph that take this one as an argument (fusion reads it)
    Attrs attr          # typed attributes (part of the signature)
    float* val
    float* grad
    float* aux          # kernel scratch kept from forward for backward (masks, softmax, gathers)

cdef inline int rows(const Node* x) noexcept nogil:
    return x.d[0]

cdef inline int cols(const Node* x) noexcept nogil:
    """Columns of the value seen as a matrix: every dimension after the first."""
    return x.d[1] * x.d[2] * x.d[3]

cdef inline int elems(const Node* x) noexcept nogil:
    """Elements of one batch element."""
    return x.d[0] * x.d[1] * x.d[2] * x.d[3]

# whole-array loops of the elementwise ops, one line each in kernels/elementwise.h
cdef extern from "elementwise.h" nogil:
    ctypedef void (*ab_unary_fwd)(float* y, const float* x, int n, float a)
    ctypedef void (*ab_unary_bwd)(float* dx, const float* x, const float* y, const float* dy,
                                  int n, float a, int set)
    ctypedef void (*ab_binary_fwd)(float* z, const float* x, int sx, const float* y, int sy, int n)
    ctypedef void (*ab_binary_bwd)(float* d, int sd, const float* x, int sx, const float* y,
                                   int sy, const float* z, const float* dz, int n, int set)

# The math of an elementwise op: the loops of its kernels/elementwise.h line.
ctypedef struct ElementwiseMath:
    ab_unary_fwd ufwd   # unary ops
    ab_unary_bwd ubwd
    ab_binary_fwd bfwd  # binary ops
    ab_binary_bwd bbwd_x, bbwd_y

# dW += dY X^T for a parameter W, postponed to the end of backward so that all the
# terms of one weight (e.g. every time step of an RNN) become one large gemm
ctypedef struct WeightGrad:
    float* dW           # the parameter's gradient, r x k
    float* dY           # r x m
    float* X            # k x m
    int r, k, m
    int seq             # order of postponing (the order of a weight's terms in its sum)

ctypedef struct WeightGrads:
    WeightGrad* items
    int n, cap
    bint share          # weights whose terms read the same X's may share one product
    int64_t shared      # weights whose dW came from a shared product

# everything a kernel may touch for one batch
ctypedef struct Batch:
    Node* nodes         # the graph's node array
    int32_t* args       # the graph's argument array
    int32_t* ibuf       # the graph's per-node integer data
    float** tables      # lookup_batch: the tables its nodes read (values, gradients or NULL)
    int32_t* ids        # ids of the nodes of this batch, in the order of their outputs
                        # (ascending, unless the layout pass ordered them: engine/layout.pyx)
    int n               # number of nodes in the batch
    const ElementwiseMath* math     # the op's elementwise loops (elementwise ops only)
    float* block        # outputs (forward) or their grads (backward), contiguous n * size;
                        # NULL in backward when only some nodes of a batch need it
    Arena* arena        # forward: aux memory that survives until renew_cg
    Arena* scratch      # temporary memory (reset when a backward starts)
    Rng* rng
    WeightGrads* defer  # backward: where parameter weight gradients are postponed
    PackCache* packs    # weights packed in this pass (_packed); NULL: products use sgemm
    Profile* prof       # the graph's profile timers, NULL when profiling is off
    Traffic* traffic    # the graph's counts of operands used in place or copied
    StackCache* stacks  # forward: the stacked operands copied in this pass, for reuse (NULL: none)

ctypedef void (*KernelFn)(Batch* b) noexcept nogil

# The record of an op: everything the engine needs to know about it.
ctypedef struct OpDef:
    const char* name
    int nargs           # -1: any number >= 1
    bint leaf           # materialised when created, never scheduled
    int shared_arg      # first argument shared by identity: its node id (not its shape)
                        # enters the signature, and the batch runs one product over it
                        # and the stacked other arguments; -1: every argument is stacked
    int shared_step     # ... and every shared_step-th argument after it (affine's W1, W2 ...);
                        # 0: that one only
    const char* attrs   # the op's attributes, "name: type" (the Attrs member it fills)
    KernelFn fwd
    KernelFn bwd
    ElementwiseMath math
    bint split_fwd      # fwd of a node writes only that node's value and allocates nothing,
    bint split_bwd      # bwd only its arguments' gradients: a large batch may run as ranges
                        # of its nodes on several threads (engine/parallel.pyx)
    bint first_write    # bwd handles F_GRAD_SET of the arguments (assigns a gradient not
                        # written yet); else backward zeroes them before calling it

cdef inline bint arg_is_shared(const OpDef* op, int a) noexcept nogil:
    if op.shared_arg < 0 or a < op.shared_arg:
        return False
    if op.shared_step == 0:
        return a == op.shared_arg
    return (a - op.shared_arg) % op.shared_step == 0

cdef inline bint arg_is_stacked_operand(const OpDef* op, int a) noexcept nogil:
    """Whether argument a is one a product stacks for its gemm (an x of W x, not the
    shared W nor a bias before it)."""
    return op.shared_arg >= 0 and a > op.shared_arg and not arg_is_shared(op, a)

# node j of a batch, and its argument a
cdef inline Node* NODE(Batch* b, int j) noexcept nogil:
    return &b.nodes[b.ids[j]]

cdef inline Node* ARG(Batch* b, int j, int a) noexcept nogil:
    return &b.nodes[b.args[b.nodes[b.ids[j]].args_at + a]]

# Gradient buffers are not zeroed when backward assigns them: the first write assigns
# (gemm beta = 0, the elementwise loops' `set`), or grad_ready zeroes the buffer just
# before a kernel that only adds.
cdef inline bint grad_fresh(const Node* x) noexcept nogil:
    """x's gradient has not been written in this backward (its memory is garbage)."""
    return (x.flags & F_GRAD_SET) == 0

cdef inline void grad_mark(Node* x) noexcept nogil:
    x.flags = x.flags | F_GRAD_SET

cdef inline void grad_ready(Node* x) noexcept nogil:
    """Make x's gradient safe to add into: zero it if it was not written yet."""
    if (x.flags & F_GRAD_SET) == 0:
        memset(x.grad, 0, x.size * sizeof(float))
        x.flags = x.flags | F_GRAD_SET

cdef inline bint batch_arg_needs_grad(Batch* b, int a) noexcept nogil:
    """Whether argument a of any node of the batch wants a gradient."""
    cdef int j
    for j in range(b.n):
        if ARG(b, j, a).flags & F_NEEDS_GRAD:
            return True
    return False

# The graph's node storage as the stages read it (the scheduler, the executor,
# backward, statistics). The graph (engine/graph.pyx) owns and grows it.
ctypedef struct NodeView:
    Node* nodes
    int32_t* args       # node i's arguments: args[nodes[i].args_at : + nodes[i].nargs]
    int32_t* ibuf       # per-node integer data (index lists)
    int64_t n           # number of nodes

# fetching ahead the nodes a per-node loop will reach (runtime/prefetch.h): at node j, a
# loop fetches node j + AHEAD, and the arguments of node j + AHEAD / 2
cdef extern from "prefetch.h" nogil:
    enum: AHEAD "AB_AHEAD"
    void prefetch_ahead "AB_PREFETCH_AHEAD" (const NodeView* v, const int32_t* ids, int j,
                                             int end, int nargs)
    void prefetch_node "AB_PREFETCH_NODE" (const Node* n)
    void prefetch_arg "AB_PREFETCH_ARG" (const NodeView* v, int32_t i, int a)
    void prefetch_batch_arg "AB_PREFETCH_ARG" (const Batch* b, int32_t i, int a)

cdef inline int32_t arg_id(const NodeView* v, int32_t i, int a) noexcept nogil:
    return v.args[v.nodes[i].args_at + a]
