"""Build the Cython extensions. Metadata lives in pyproject.toml."""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

# the engine, one job per module; a module comes after those it cimports
MOD_NAMES = [
    # runtime/: what every compiled part runs on
    "autobatch.runtime.memory",         # arenas and growth; MemoryError on exhaustion
    "autobatch.runtime.rng",            # random streams of the random ops
    "autobatch.runtime.threads",        # the kernels' thread pool; products split over it
    "autobatch.runtime.param_buffers",  # parameter values and the live graphs that read them
    # kernels/: batched kernels by family on raw float* (node types in runtime/nodes.pxd,
    # helpers in kernels/common.pxd)
    "autobatch.kernels.gemm",           # products split over the threads
    "autobatch.kernels.packed",         # weights packed once per pass for the products
    "autobatch.kernels.elementwise",
    "autobatch.kernels.weight_grads",   # weight gradients, at once or postponed to the end
    "autobatch.kernels.products",
    "autobatch.kernels.reduce",
    "autobatch.kernels.softmax",
    "autobatch.kernels.recurrent",
    "autobatch.kernels.structure",
    "autobatch.kernels.select",         # select_rows/cols, strided_select, kmax_pooling
    "autobatch.kernels.sparsemax",      # sparsemax, constrained_softmax
    "autobatch.kernels.linalg",         # inverse, logdet (LAPACK)
    "autobatch.kernels.contract",       # 3-d tensor contractions
    "autobatch.kernels.filters1d",      # kmh_ngram, filter1d_narrow, circular conv/corr
    "autobatch.kernels.cumulative",     # cumulative sums and logsumexp along a dimension
    "autobatch.kernels.layer_norm",     # layer normalisation
    "autobatch.kernels.conv",           # convolution and max pooling on raw float* images
    "autobatch.kernels.conv_testing",   # ... their numpy entry points, for kernel tests
    "autobatch.kernels.conv_batch",     # ... over the images of every node of a batch
    # engine/: the op table, scheduling, execution, backward
    "autobatch.engine.optable",         # the op table: one record per op
    "autobatch.engine.parallel",        # a batch's kernel as ranges of its nodes on the threads
    "autobatch.engine.signatures",      # interning signatures derived from the op records
    "autobatch.engine.scheduler",       # the ready frontier
    "autobatch.engine.cost_model",      # the 'cost' strategy's time model
    "autobatch.engine.strategies",      # the strategies' policies and their registry
    "autobatch.engine.executor",        # running batches forward
    "autobatch.engine.fusion",          # fused elementwise chains
    "autobatch.engine.layout",          # the order of a batch's outputs in memory
    "autobatch.engine.kinds",           # a signature's kind: named without node ids
    "autobatch.engine.kind_frontier",   # the ready frontier by kind, kept as it changes
    "autobatch.engine.learned",         # a batching policy learned per model (Q-learning)
    "autobatch.engine.forward",         # the forward loop: pick, run, fuse, release
    "autobatch.engine.backward",        # the reverse pass
    "autobatch.engine.stats",           # statistics and debug views
    "autobatch.engine.checkpoints",     # cg_revert: dropping nodes, signatures and computed batches
    "autobatch.engine.graph",           # node storage and the graph's public methods
    # api/: the DyNet-style expression API, one extension of several includes
    "autobatch.api.core",
    # model/: the trainers' update rules as compiled loops
    "autobatch.model.update_rules",
    # io/: a loaded file's values assigned to a collection with no signal in between
    "autobatch.io.assign_all",
]

# the trainers' rules (model/update_rules.h, each loop also compiled for AVX2 and
# AVX-512): exact float32 rounding order (they must give the numbers of the numpy
# expressions at every level), so no contraction into FMAs where a target has them;
# sqrtf need not set errno (nothing reads it), which lets its loops vectorise; and the
# zeroing of the gradient stays in the loop (split out as a memset, it would stream the
# gradient from memory a second time)
EXTRA_ARGS = {"autobatch.model.update_rules": ["-ffp-contract=off", "-fno-math-errno",
                                               "-fno-tree-loop-distribute-patterns"]}

# translate and compile on every core this process may use (pip runs setup.py with no -j)
JOBS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

# the C headers, beside the modules that use them
HEADER_DIRS = ["autobatch/runtime", "autobatch/kernels"]

extensions = [
    # -fno-trapping-math: nothing here enables floating-point traps, and without it
    # GCC will not turn the selects of the elementwise kernels into vector blends
    Extension(name, [name.replace(".", "/") + ".pyx"], include_dirs=HEADER_DIRS,
              extra_compile_args=["-O3", "-fno-trapping-math"] + EXTRA_ARGS.get(name, []))
    for name in MOD_NAMES
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            # the signature as the docstring's first line: help(), editors and the API
            # reference (Sphinx autodoc) show it
            "embedsignature": True,
        },
        nthreads=JOBS,
    ),
    options={"build_ext": {"parallel": JOBS}},
)
