# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The op table: one record per op (see OpDef in runtime/nodes.pxd), indexed by op id.

A record gives an op's name, arity, which arguments are shared by identity (their
node id enters the signature), its typed attributes and its batched kernels, which
live in the kernels/ modules by family. The API's unary elementwise ops are made
from their lines of kernels/elementwise.h when this module loads."""
from libc.stdint cimport int64_t
from libc.stdlib cimport calloc

from autobatch.runtime.nodes cimport Attrs, KernelFn, Node, OpDef
from autobatch.kernels.conv_batch cimport (conv2d_batch_fwd, conv2d_batch_bwd, maxpool2d_batch_fwd,
                                    maxpool2d_batch_bwd)
from autobatch.kernels.elementwise cimport *
from autobatch.kernels.products cimport *
from autobatch.kernels.recurrent cimport *
from autobatch.kernels.reduce cimport *
from autobatch.kernels.softmax cimport *
from autobatch.kernels.structure cimport *
from autobatch.kernels.select cimport *
from autobatch.kernels.sparsemax cimport *
from autobatch.kernels.linalg cimport *
from autobatch.kernels.contract cimport *
from autobatch.kernels.filters1d cimport *
from autobatch.kernels.cumulative cimport *
from autobatch.kernels.layer_norm cimport *

# the fixed ops (ids of the OpId enum), then the API's unary ops of kernels/elementwise.h
cdef int N_OPS = N_FIXED_OPS + AB_UNARY_API_COUNT
cdef OpDef* OPS = <OpDef*>calloc(N_OPS, sizeof(OpDef))
if OPS == NULL:
    raise MemoryError()

cdef const OpDef* op_table() noexcept nogil:
    return OPS

cdef int n_ops() noexcept nogil:
    return N_OPS

cdef int defop(int op, const char* name, int nargs, KernelFn fwd, KernelFn bwd,
               const char* attrs=b"", int shared_arg=-1, int shared_step=0) except -1:
    """The record of op `op` (see OpDef); positional arguments only (Cython)."""
    if OPS[op].name != NULL:
        raise RuntimeError(f"op {op} is defined twice")
    OPS[op].name = name
    OPS[op].nargs = nargs
    OPS[op].fwd = fwd
    OPS[op].bwd = bwd
    OPS[op].attrs = attrs
    OPS[op].shared_arg = shared_arg
    OPS[op].shared_step = shared_step
    OPS[op].leaf = fwd == NULL
    # kernels that touch only their own nodes' values (forward) or their arguments'
    # gradients (backward)
    OPS[op].split_fwd = fwd in (unary_fwd, binary_fwd, esum_fwd, concat_fwd, lstm_gates_fwd,
                                lstm_cell_fwd, lstm_hidden_fwd)
    OPS[op].split_bwd = bwd in (unary_bwd, binary_bwd, no_bwd, esum_bwd, concat_bwd,
                                lstm_gates_bwd, lstm_cell_bwd, lstm_hidden_bwd, picknls_bwd)
    # these backward kernels assign an argument's gradient on its first write
    OPS[op].first_write = (bwd == unary_bwd or bwd == binary_bwd or bwd == matmul_bwd
                           or bwd == affine_bwd or bwd == softmax_bwd or bwd == picknls_bwd
                           or bwd == lstm_gates_bwd or bwd == lstm_cell_bwd or bwd == concat_bwd)
    return 0

cdef int defleaf(int op, const char* name) except -1:
    """A leaf: materialised when created, never scheduled."""
    return defop(op, name, 0, NULL, NULL)

cdef int defunary(int op, const char* name, const char* attrs=b"", const char* math=NULL,
                  KernelFn fwd=unary_fwd, KernelFn bwd=unary_bwd) except -1:
    """An op whose math is the unary line `math` (default: its name) of kernels/elementwise.h."""
    defop(op, name, 1, fwd, bwd, attrs)
    if not ab_find_unary(math if math != NULL else name, &OPS[op].math.ufwd, &OPS[op].math.ubwd):
        raise RuntimeError(f"no unary elementwise op {name!r} in kernels/elementwise.h")
    return 0

cdef int defbinary(int op, const char* name) except -1:
    """An op whose math is the binary line `name` of kernels/elementwise.h."""
    defop(op, name, 2, binary_fwd, binary_bwd)
    if not ab_find_binary(name, &OPS[op].math.bfwd, &OPS[op].math.bbwd_x, &OPS[op].math.bbwd_y):
        raise RuntimeError(f"no binary elementwise op {name!r} in kernels/elementwise.h")
    return 0

defleaf(OP_INPUT, b"input")
defleaf(OP_PARAM, b"parameter")
defleaf(OP_LOOKUP, b"lookup")
defop(OP_LOOKUP_BATCH, b"lookup_batch", 0, lookup_batch_fwd, lookup_batch_bwd)

defunary(OP_NEG, b"negate")
defunary(OP_ADD_CONST, b"add_constant", b"c: float")
defunary(OP_MUL_CONST, b"mul_constant", b"c: float")
defunary(OP_RSUB_CONST, b"constant_minus", b"c: float")
defunary(OP_RDIV_CONST, b"constant_divide", b"c: float")
defunary(OP_NOBACKPROP, b"nobackprop", b"", b"identity", unary_fwd, no_bwd)
defop(OP_DROPOUT, b"dropout", 1, dropout_fwd, dropout_bwd, b"p: float")
defunary(OP_NOISE, b"noise", b"stddev: float", b"identity", noise_fwd, unary_bwd)

defbinary(OP_ADD, b"add")
defbinary(OP_SUB, b"subtract")
defbinary(OP_CMULT, b"cmult")
defbinary(OP_CDIV, b"cdiv")
defbinary(OP_POW, b"pow")
defop(OP_ESUM, b"esum", -1, esum_fwd, esum_bwd)
defop(OP_AVERAGE, b"average", -1, esum_fwd, esum_bwd)
defop(OP_LOGSUMEXP, b"logsumexp", -1, logsumexp_fwd, logsumexp_bwd)
defop(OP_CONCAT, b"concatenate", -1, concat_fwd, concat_bwd, b"dim: int")
defop(OP_CONCAT_TO_BATCH, b"concatenate_to_batch", -1, concat_to_batch_fwd, concat_to_batch_bwd)
defop(OP_AFFINE, b"affine_transform", -1, affine_fwd, affine_bwd, b"", 1, 2)  # W1, W2 ... shared
defop(OP_MATMUL, b"matmul", 2, matmul_fwd, matmul_bwd, b"", 0)  # W shared

defop(OP_SUM_ELEMS, b"sum_elems", 1, reduce_fwd, reduce_bwd)
defop(OP_MEAN_ELEMS, b"mean_elems", 1, reduce_fwd, reduce_bwd)
defop(OP_SQUARED_NORM, b"squared_norm", 1, reduce_fwd, reduce_bwd)
defop(OP_L2_NORM, b"l2_norm", 1, reduce_fwd, reduce_bwd)
defop(OP_DOT, b"dot_product", 2, pair_reduce_fwd, pair_reduce_bwd)
defop(OP_SQUARED_DISTANCE, b"squared_distance", 2, pair_reduce_fwd, pair_reduce_bwd)
defop(OP_BINARY_LOG_LOSS, b"binary_log_loss", 2, pair_reduce_fwd, pair_reduce_bwd)
defop(OP_MAX_DIM, b"max_dim", 1, extreme_dim_fwd, recorded_positions_bwd, b"dim: int")
defop(OP_MIN_DIM, b"min_dim", 1, extreme_dim_fwd, recorded_positions_bwd, b"dim: int")
defop(OP_SUM_BATCHES, b"sum_batches", 1, sum_batches_fwd, sum_batches_bwd)
defop(OP_SUM_DIM, b"sum_dim", 1, sum_dim_fwd, sum_dim_bwd, b"mask: int, scale: float")
defop(OP_MEAN_DIM, b"mean_dim", 1, sum_dim_fwd, sum_dim_bwd, b"mask: int, scale: float")

defop(OP_SOFTMAX, b"softmax", 1, softmax_fwd, softmax_bwd, b"dim: int")
defop(OP_LOG_SOFTMAX, b"log_softmax", 1, softmax_fwd, softmax_bwd)
defop(OP_PICKNLS, b"pickneglogsoftmax", 1, picknls_fwd, picknls_bwd)
defop(OP_HINGE, b"hinge", 1, hinge_fwd, hinge_bwd, b"margin: float")

defop(OP_LSTM_GATES, b"lstm_gates", 1, lstm_gates_fwd, lstm_gates_bwd, b"hidden: int, forget_bias: float")
defop(OP_LSTM_CELL, b"lstm_cell", -1, lstm_cell_fwd, lstm_cell_bwd)
defop(OP_LSTM_HIDDEN, b"lstm_hidden", 2, lstm_hidden_fwd, lstm_hidden_bwd)

defop(OP_PICK, b"pick", 1, pick_fwd, pick_bwd, b"dim: int")
defop(OP_PICK_RANGE, b"pick_range", 1, pick_range_fwd, pick_range_bwd, b"dim: int, step: int")
defop(OP_PICK_BATCH_ELEMS, b"pick_batch_elems", 1, pick_batch_fwd, pick_batch_bwd)
defop(OP_TRANSPOSE, b"transpose", 1, transpose_fwd, transpose_bwd, b"perm: int[4]")
defunary(OP_RESHAPE, b"reshape", b"", b"identity")

defop(OP_CONV2D, b"conv2d", -1, conv2d_batch_fwd, conv2d_batch_bwd,
      b"stride: (int, int), is_valid: bool", 1, 1)  # filter and bias shared
defop(OP_MAXPOOL2D, b"maxpooling2d", 1, maxpool2d_batch_fwd, maxpool2d_batch_bwd,
      b"ksize: (int, int), stride: (int, int), is_valid: bool")

# the per-node index lists and ranges are in ibuf (each node's own), not attributes:
# nodes that select other rows of same-shaped arguments run as one batch
defop(OP_SELECT_ROWS, b"select_rows", 1, select_fwd, select_bwd, b"dim: int")
defop(OP_SELECT_COLS, b"select_cols", 1, select_fwd, select_bwd, b"dim: int")
defop(OP_STRIDED_SELECT, b"strided_select", 1, strided_fwd, strided_bwd)
defop(OP_KMAX_POOLING, b"kmax_pooling", 1, kmax_fwd, recorded_positions_bwd, b"dim: int")
defop(OP_SPARSEMAX, b"sparsemax", 1, sparsemax_fwd, sparsemax_bwd)
defop(OP_CONSTRAINED_SOFTMAX, b"constrained_softmax", 2, csoftmax_fwd, csoftmax_bwd)
defop(OP_INVERSE, b"inverse", 1, inverse_fwd, inverse_bwd)
defop(OP_LOGDET, b"logdet", 1, logdet_fwd, logdet_bwd)
# with or without the bias (the arity is part of the signature); the tensor is shared
# by identity (one gemm over the stacked vectors of a batch, as matmul's W)
defop(OP_CONTRACT3D_1D, b"contract3d_1d", -1, contract3d_1d_fwd, contract3d_1d_bwd, b"", 0)
defop(OP_CONTRACT3D_1D_1D, b"contract3d_1d_1d", -1, contract3d_1d_1d_fwd, contract3d_1d_1d_bwd, b"", 0)
# n and the filter's width follow from the argument shapes (in the signature)
defop(OP_KMH_NGRAM, b"kmh_ngram", 1, kmh_ngram_fwd, kmh_ngram_bwd)
defop(OP_FILTER1D_NARROW, b"filter1d_narrow", 2, filter1d_fwd, filter1d_bwd)
defop(OP_CIRC_CONV, b"circ_conv", 2, circ_fwd, circ_bwd)
defop(OP_CIRC_CORR, b"circ_corr", 2, circ_fwd, circ_bwd)
defbinary(OP_BMAX, b"bmax")
defbinary(OP_BMIN, b"bmin")
defunary(OP_ROUND, b"round", b"straight_through: float")
defunary(OP_CEIL, b"ceil", b"straight_through: float")
defunary(OP_FLOOR, b"floor", b"straight_through: float")
defunary(OP_POISSON_LOSS, b"poisson_loss", b"x: float")
defop(OP_L1_DISTANCE, b"l1_distance", 2, pair_reduce_fwd, pair_reduce_bwd)
defop(OP_HUBER_DISTANCE, b"huber_distance", 2, pair_reduce_fwd, pair_reduce_bwd, b"c: float")
defop(OP_DROPOUT_DIM, b"dropout_dim", 1, dropout_dim_fwd, dropout_bwd, b"p: float, shared: int")
defop(OP_CUMSUM, b"cumsum", 1, cumsum_fwd, cumsum_bwd, b"dim: int")
defop(OP_LOGSUMEXP_DIM, b"logsumexp_dim", 1, logsumexp_dim_fwd, logsumexp_dim_bwd, b"dim: int")
defop(OP_RESTRICTED_LOG_SOFTMAX, b"restricted_log_softmax", 1, restricted_log_softmax_fwd,
      restricted_log_softmax_bwd)
defop(OP_LAYER_NORM, b"layer_norm", 3, layer_norm_fwd, layer_norm_bwd)   # x, g, b stacked
defop(OP_STD_DIM, b"std_dim", 1, std_dim_fwd, std_dim_bwd, b"mask: int, scale: float")
defop(OP_ARGMAX, b"argmax", 1, argmax_fwd, argmax_bwd, b"straight_through: float")

# the API's unary ops: one line of kernels/elementwise.h each (their attribute, if any, is
# the constant A, a float)
cdef list _API_ATTRS = []
for _k in range(AB_UNARY_API_COUNT):
    _attr = ab_unary_api[_k].attr
    _API_ATTRS.append(b"" if _attr == b"_" else _attr + b": float")
    defunary(N_FIXED_OPS + _k, ab_unary_api[_k].name, _API_ATTRS[_k])

for _op in range(N_OPS):
    if OPS[_op].name == NULL:
        raise RuntimeError(f"op {_op} has no record")
if sizeof(Attrs) != 3 * sizeof(int64_t):
    raise RuntimeError("Attrs must be exactly the 3 words the signature compares")
if sizeof(Node) != 96:
    raise RuntimeError(f"a Node is {sizeof(Node)} bytes, not 96")


def op_names():
    """Names of all ops, indexed by op id."""
    return [OPS[i].name.decode() for i in range(N_OPS)]


def op_info():
    """{op name: its record} for tests and documentation: arity, leaf, which arguments
    are shared by identity, the attributes."""
    out = {}
    for i in range(N_OPS):
        out[OPS[i].name.decode()] = {
            "id": i, "nargs": OPS[i].nargs, "leaf": bool(OPS[i].leaf),
            "shared_arg": OPS[i].shared_arg, "shared_step": OPS[i].shared_step,
            "attrs": OPS[i].attrs.decode()}
    return out
