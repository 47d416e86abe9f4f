"""autobatch: write per-instance code, get batched execution.

    import autobatch as dy

runs DyNet-style programs: expressions record nodes of a lazy graph; when a value is
needed, a Cython scheduler groups same-signature nodes across the whole minibatch
into batched kernels, forward and backward.

``ELEMENTWISE_FUNCTIONS`` maps the name of every elementwise function made from a line
of ``kernels/elementwise.h`` (``tanh``, ``logistic``, ``elu``, ...) to the function.
``HAVE_CUDA`` is False, as in a CPU build of DyNet: autobatch runs on the CPU only;
``ERRMSG`` is the message of the error GPU flags raise (DyNet's name for it).
``python -m autobatch`` prints the version, BLAS and SIMD in use (``show_config()``).
"""
from autobatch.version import __version__
from autobatch.errors import DimensionError, ModelFileError, StaleExpressionError
from autobatch.engine.stats import set_profiling, profiling
from autobatch.engine.strategies import (
    Frontier, register_strategy, available_strategies, set_default_strategy, default_strategy,
)
from autobatch.engine.learned import LearnedStrategy
from autobatch.api.core import (
    Expression, Parameters, LookupParameters,
    renew_cg, cg_version, cg, set_random_seed, cg_checkpoint, cg_revert, print_text_graphviz,
    set_default_fusion, default_fusion,
    parameter, const_parameter, lookup, lookup_batch,
    inputTensor, inputVector, scalarInput, inputMatrix, vecInput, matInput, sparse_inputTensor,
    to_device, forward,
    zeros, ones, constant, random_normal, random_uniform,
    ELEMENTWISE_FUNCTIONS, pow, nobackprop, dropout, noise,
    cmult, cdiv, colwise_add, dot_product, affine_transform, esum, average, logsumexp,
    sum_elems, mean_elems, squared_norm, squared_distance, l2_norm, binary_log_loss,
    sum_batches, sum_dim, mean_dim, max_dim, min_dim, softmax, log_softmax,
    pickneglogsoftmax, pickneglogsoftmax_batch, hinge, hinge_batch,
    pick, pick_batch, pick_range, pick_batch_elem, pick_batch_elems,
    concatenate, concatenate_cols, concatenate_to_batch, transpose, reshape,
    lstm_gates, lstm_cell, lstm_hidden, vanilla_lstm_gates, vanilla_lstm_gates_concat,
    vanilla_lstm_gates_dropout, vanilla_lstm_gates_dropout_concat, vanilla_lstm_c, vanilla_lstm_h,
    conv2d, conv2d_bias, maxpooling2d,
    select_rows, select_cols, pickrange, strided_select, kmax_pooling, fold_rows, one_hot,
    inverse, logdet, trace_of_product, contract3d_1d, contract3d_1d_bias, contract3d_1d_1d,
    contract3d_1d_1d_bias, sparsemax, constrained_softmax, kmh_ngram, filter1d_narrow,
    circ_conv, circ_corr,
    bmax, bmin, emax, flip_gradient, round, ceil, floor, argmax,
    cumsum, logsumexp_dim, moment_elems, moment_dim, moment_batches, mean_batches,
    std_elems, std_dim, std_batches, layer_norm, weight_norm,
    pairwise_rank_loss, poisson_loss, l1_distance, huber_distance, hinge_dim,
    dropout_dim, dropout_batch, block_dropout, random_bernoulli, random_gumbel,
)
# tanh, logistic, rectify, elu, exp, log, ...: one function per line of AB_UNARY_OPS
# in kernels/elementwise.h (its __all__; editors and mypy see them through api/core.pyi)
from autobatch.api.core import *  # noqa: F401,F403
from autobatch.model.initializers import (
    PyInitializer, GlorotInitializer, NormalInitializer, UniformInitializer, ConstInitializer,
    IdentityInitializer, SaxeInitializer, NumpyInitializer, FromFileInitializer,
)
from autobatch.model.parameters import ParameterCollection, Model
from autobatch.settings import reset_random_seed
from autobatch.io.formats import save, load, load_generator
from autobatch.io.registry import register_savable, savable_classes
from autobatch.model.trainers import (
    Trainer, SimpleSGDTrainer, CyclicalSGDTrainer, MomentumSGDTrainer, AdagradTrainer,
    AdadeltaTrainer, RMSPropTrainer, AdamTrainer, AmsgradTrainer,
)
from autobatch.model.builders import (
    RNNState, StackedRNNState, _RNNBuilder, SimpleRNNBuilder, VanillaLSTMBuilder, LSTMBuilder,
    CoupledLSTMBuilder, GRUBuilder,
    BiRNNBuilder, TreeLSTMBuilder, TreeState,
)
from autobatch.model.lstm_builders import FastLSTMBuilder, CompactVanillaLSTMBuilder, SparseLSTMBuilder
from autobatch.api.extras import HAVE_CUDA, npvalues, values, zeroes, available_devices
from autobatch.api.extras import (
    ERRMSG, DeviceInfo, get_device_info, print_graphviz, FloatValue, UnsignedValue,
    FloatVectorValue, UnsignedVectorValue, inputTensorTranspose,
)
from autobatch.api.tensor import Tensor
from autobatch.model.softmax_builders import (
    SoftmaxBuilder, StandardSoftmaxBuilder, ClassFactoredSoftmaxBuilder,
)
from autobatch.strategies import Strategy
from autobatch.settings import DynetParams, init, init_from_params
from autobatch import config          # dy.config.set(...): DyNet's dynet_config
from autobatch import distributed     # dy.distributed: data-parallel training (needs MPI only when used)

# snake_case aliases
input_tensor = inputTensor
input_vector = inputVector
scalar_input = scalarInput
logistic_sigmoid = logistic
rectified = rectify

from autobatch.runtime.blas import blas_info, set_blas_threads, _configure_from_environment
from autobatch.runtime.threads import set_num_threads, get_num_threads
from autobatch.runtime.threads import configure_from_environment as _configure_threads
from autobatch.kernels.packed import configure_from_environment as _configure_packed
from autobatch.kernels.packed import configure_for_blas as _configure_packed_for_blas
from autobatch.report import show_config, config_info

_configure_from_environment()
_configure_threads()
_configure_packed()
_configure_packed_for_blas(blas_info()["kernel"])
init()      # DyNet's --dynet-* flags of sys.argv, read at import as DyNet does
