# Declarations shared by the engine (_core) and the batched kernels (_kernels).
# Kernels see only these C structs: no Python objects, no graph logic.
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint64_t
from autobatch._memory cimport Arena, arena_alloc

# --- op ids: one per op; the record for each lives in _kernels.pyx (OPS table) ---
cdef enum OpId:
    # leaves: materialised when created, never scheduled
    OP_INPUT, OP_PARAM, OP_LOOKUP
    # zero-argument scheduled op
    OP_LOOKUP_BATCH
    # unary elementwise ops that other code names (the API's tanh, exp, ... follow
    # N_FIXED_OPS: made from their _elementwise.h line when the module loads)
    OP_NEG, OP_ADD_CONST, OP_MUL_CONST, OP_RSUB_CONST, OP_RDIV_CONST, OP_NOBACKPROP
    # unary elementwise with random state
    OP_DROPOUT, OP_NOISE
    # binary elementwise with broadcasting
    OP_ADD, OP_SUB, OP_CMULT, OP_CDIV, OP_POW
    # n-ary
    OP_ESUM, OP_AVERAGE, OP_LOGSUMEXP, OP_CONCAT, OP_CONCAT_TO_BATCH, OP_AFFINE
    # matrix multiply (shared left argument -> one gemm per batch)
    OP_MATMUL
    # reductions
    OP_SUM_ELEMS, OP_MEAN_ELEMS, OP_SQUARED_NORM, OP_L2_NORM, OP_DOT,
    OP_SQUARED_DISTANCE, OP_BINARY_LOG_LOSS, OP_MAX_DIM, OP_MIN_DIM, OP_SUM_BATCHES,
    OP_SUM_DIM, OP_MEAN_DIM
    # softmax family and losses
    OP_SOFTMAX, OP_LOG_SOFTMAX, OP_PICKNLS, OP_HINGE
    # fused recurrent cells: gate activations, cell update, hidden output
    OP_LSTM_GATES, OP_LSTM_CELL, OP_LSTM_HIDDEN
    # structure
    OP_PICK, OP_PICK_RANGE, OP_PICK_BATCH_ELEMS, OP_TRANSPOSE, OP_RESHAPE
    # images (H, W, C): convolution (filter and bias shared), max pooling
    OP_CONV2D, OP_MAXPOOL2D
    N_FIXED_OPS

# node flags
cdef enum:
    F_DONE = 1         # value computed
    F_NEEDS_GRAD = 2   # depends on a trainable parameter
    F_ALIAS = 4        # value/grad point into parameter storage
    F_TRAINABLE = 8    # its gradient storage is a trainable parameter's

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

ctypedef struct ReduceAttr:       # sum_dim, mean_dim: the dimensions summed over
    int32_t mask                  # bit k: dimension k (k < MAX_DIMS); bit MAX_DIMS: the batch
    float scale                   # the sums are multiplied by it (mean_dim: 1 / n)

ctypedef struct PermAttr:         # transpose: output dimension k is input dimension perm[k]
    int32_t perm[4]

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
    ReduceAttr reduce
    PermAttr transpose
    MarginAttr hinge
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

ctypedef struct Rng:
    uint64_t s0, s1

cdef double rng_uniform(Rng* r) noexcept nogil
cdef double rng_normal(Rng* r) noexcept nogil
cdef void rng_seed(Rng* r, uint64_t seed) noexcept nogil

# dW += dY X^T for a parameter W, postponed to the end of backward so that all the
# terms of one weight (e.g. every time step of an RNN) become one large gemm
ctypedef struct WeightGrad:
    float* dW           # the parameter's gradient, r x k
    float* dY           # r x m
    float* X            # k x m
    int r, k, m

ctypedef struct WeightGrads:
    WeightGrad* items
    int n, cap

# everything a kernel may touch for one batch
ctypedef struct Batch:
    Node* nodes         # the graph's node array
    int32_t* args       # the graph's argument array
    int32_t* ibuf       # the graph's per-node integer data
    float** tables      # lookup_batch: the tables its nodes read (values, gradients or NULL)
    int32_t* ids        # ids of the nodes of this batch, ascending
    int n               # number of nodes in the batch
    float* block        # outputs (forward) or their grads (backward), contiguous n * size;
                        # NULL in backward when only some nodes of a batch need it
    Arena* arena        # forward: aux memory that survives until renew_cg
    Arena* scratch      # backward: temporary memory
    Rng* rng
    WeightGrads* defer  # backward: where parameter weight gradients are postponed

ctypedef void (*KernelFn)(Batch* b) noexcept nogil

# whole-array loops of the elementwise ops, one line each in _elementwise.h
cdef extern from "_elementwise.h" nogil:
    ctypedef void (*ab_unary_fwd)(float* y, const float* x, int n, float a)
    ctypedef void (*ab_unary_bwd)(float* dx, const float* x, const float* y, const float* dy,
                                  int n, float a)
    ctypedef void (*ab_binary_fwd)(float* z, const float* x, int sx, const float* y, int sy, int n)
    ctypedef void (*ab_binary_bwd)(float* d, int sd, const float* x, int sx, const float* y,
                                   int sy, const float* z, const float* dz, int n)
    ctypedef struct ab_unary_info:      # a line of AB_UNARY_OPS
        const char* name
        const char* attr                # keyword of the constant A; "_": none
        float attr_default
        ab_unary_fwd fwd
        ab_unary_bwd bwd
    const ab_unary_info* ab_unary_api
    int AB_UNARY_API_COUNT

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
    ab_unary_fwd ufwd   # unary elementwise ops: the loops of their _elementwise.h line
    ab_unary_bwd ubwd
    ab_binary_fwd bfwd  # binary elementwise ops
    ab_binary_bwd bbwd_x, bbwd_y

cdef inline bint arg_is_shared(const OpDef* op, int a) noexcept nogil:
    if op.shared_arg < 0 or a < op.shared_arg:
        return False
    if op.shared_step == 0:
        return a == op.shared_arg
    return (a - op.shared_arg) % op.shared_step == 0

cdef const OpDef* op_table() noexcept nogil
cdef int n_ops() noexcept nogil         # N_FIXED_OPS + the API's unary ops

# node j of a batch, and its argument a
cdef inline Node* NODE(Batch* b, int j) noexcept nogil:
    return &b.nodes[b.ids[j]]

cdef inline Node* ARG(Batch* b, int j, int a) noexcept nogil:
    return &b.nodes[b.args[b.nodes[b.ids[j]].args_at + a]]

cdef inline bint batch_arg_needs_grad(Batch* b, int a) noexcept nogil:
    """Whether argument a of any node of the batch wants a gradient."""
    cdef int j
    for j in range(b.n):
        if ARG(b, j, a).flags & F_NEEDS_GRAD:
            return True
    return False

cdef void flush_weight_grads(WeightGrads* d, Arena* scratch) noexcept nogil
