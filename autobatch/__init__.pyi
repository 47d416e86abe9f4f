# Types of the package namespace (`import autobatch as dy`): what __init__.py imports,
# re-exported. api/core's names come in whole (its stub lists every op and elementwise
# function); a name that __init__.py takes from another module needs a line here too
# (tests/test_stubs.py and stubtest in .ci/stubs say which).
from autobatch import config as config
from autobatch import distributed as distributed
from autobatch.api.core import *
from autobatch.engine.stats import profiling as profiling, set_profiling as set_profiling
from autobatch.engine.strategies import (
    Frontier as Frontier, available_strategies as available_strategies,
    default_strategy as default_strategy, register_strategy as register_strategy,
    set_default_strategy as set_default_strategy,
)
from autobatch.engine.learned import LearnedStrategy as LearnedStrategy
from autobatch.runtime.blas import blas_info as blas_info, set_blas_threads as set_blas_threads
from autobatch.runtime.threads import set_num_threads as set_num_threads, get_num_threads as get_num_threads
from autobatch.model.builders import (
    BiRNNBuilder as BiRNNBuilder, CoupledLSTMBuilder as CoupledLSTMBuilder,
    GRUBuilder as GRUBuilder, LSTMBuilder as LSTMBuilder, RNNState as RNNState,
    SimpleRNNBuilder as SimpleRNNBuilder, StackedRNNState as StackedRNNState,
    TreeLSTMBuilder as TreeLSTMBuilder, TreeState as TreeState,
    VanillaLSTMBuilder as VanillaLSTMBuilder, _RNNBuilder as _RNNBuilder,
)
from autobatch.io.registry import (
    register_savable as register_savable, savable_classes as savable_classes,
)
from autobatch.settings import (
    DynetParams as DynetParams, init as init, init_from_params as init_from_params,
    reset_random_seed as reset_random_seed,
)
from autobatch.api.extras import (
    HAVE_CUDA as HAVE_CUDA, available_devices as available_devices, npvalues as npvalues,
    values as values, zeroes as zeroes, ERRMSG as ERRMSG, DeviceInfo as DeviceInfo,
    get_device_info as get_device_info, print_graphviz as print_graphviz,
    FloatValue as FloatValue, UnsignedValue as UnsignedValue,
    FloatVectorValue as FloatVectorValue, UnsignedVectorValue as UnsignedVectorValue,
    inputTensorTranspose as inputTensorTranspose,
)
from autobatch.api.tensor import Tensor as Tensor
from autobatch.model.lstm_builders import (
    CompactVanillaLSTMBuilder as CompactVanillaLSTMBuilder, FastLSTMBuilder as FastLSTMBuilder,
    SparseLSTMBuilder as SparseLSTMBuilder,
)
from autobatch.model.softmax_builders import (
    ClassFactoredSoftmaxBuilder as ClassFactoredSoftmaxBuilder, SoftmaxBuilder as SoftmaxBuilder,
    StandardSoftmaxBuilder as StandardSoftmaxBuilder,
)
from autobatch.errors import (
    DimensionError as DimensionError, ModelFileError as ModelFileError,
    StaleExpressionError as StaleExpressionError,
)
from autobatch.model.initializers import (
    PyInitializer as PyInitializer, ConstInitializer as ConstInitializer, FromFileInitializer as FromFileInitializer,
    GlorotInitializer as GlorotInitializer, IdentityInitializer as IdentityInitializer,
    NormalInitializer as NormalInitializer, NumpyInitializer as NumpyInitializer,
    SaxeInitializer as SaxeInitializer, UniformInitializer as UniformInitializer,
)
from autobatch.model.parameters import (
    Model as Model, ParameterCollection as ParameterCollection,
)
from autobatch.report import config_info as config_info, show_config as show_config
from autobatch.io.formats import (
    load as load, load_generator as load_generator, save as save,
)
from autobatch.strategies import Strategy as Strategy
from autobatch.model.trainers import (
    AdadeltaTrainer as AdadeltaTrainer, AdagradTrainer as AdagradTrainer,
    AdamTrainer as AdamTrainer, AmsgradTrainer as AmsgradTrainer,
    CyclicalSGDTrainer as CyclicalSGDTrainer, MomentumSGDTrainer as MomentumSGDTrainer,
    RMSPropTrainer as RMSPropTrainer, SimpleSGDTrainer as SimpleSGDTrainer, Trainer as Trainer,
)

__version__: str

# snake_case aliases
input_tensor = inputTensor
input_vector = inputVector
scalar_input = scalarInput
logistic_sigmoid = logistic
rectified = rectify
