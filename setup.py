"""Build the Cython extensions. Metadata lives in pyproject.toml."""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

# the engine, one job per module; a module comes after those it cimports
MOD_NAMES = [
    "autobatch._memory",        # arenas and growth; MemoryError on exhaustion
    "autobatch._random",        # random numbers of the random ops
    "autobatch._threads",       # the kernels' thread pool; products split over it
    "autobatch._packed",        # weights packed once per pass for the products
    # batched kernels by family (node types in _nodes.pxd, helpers in _kernel_util.pxd)
    "autobatch._kernels_elementwise",
    "autobatch._kernels_products",
    "autobatch._kernels_reduce",
    "autobatch._kernels_softmax",
    "autobatch._kernels_recurrent",
    "autobatch._kernels_structure",
    "autobatch._kernels_select",    # select_rows/cols, strided_select, kmax_pooling
    "autobatch._kernels_sparsemax", # sparsemax, constrained_softmax
    "autobatch._kernels_linalg",    # inverse, logdet (LAPACK)
    "autobatch._kernels_contract",  # 3-d tensor contractions
    "autobatch._kernels_seq",       # kmh_ngram, filter1d_narrow, circular conv/corr
    "autobatch._kernels_along",     # cumulative sums and logsumexp along a dimension
    "autobatch._kernels_norm",      # layer normalisation
    "autobatch._kernels_conv",  # convolution and max pooling on raw float* images
    "autobatch._kernels_conv_np",   # ... their numpy entry points, for kernel tests
    "autobatch._conv_nodes",    # ... over the images of every node of a batch
    "autobatch._optable",       # the op table: one record per op
    "autobatch._parallel",      # a batch's kernel as ranges of its nodes on the threads
    "autobatch._signatures",    # interning signatures derived from the op records
    "autobatch._scheduler",     # the ready frontier
    "autobatch._strategies",    # the strategies' policies and their registry
    "autobatch._executor",      # running batches forward
    "autobatch._fusion",        # fused elementwise chains
    "autobatch._backward",      # the reverse pass
    "autobatch._stats",         # statistics and debug views
    "autobatch._checkpoints",   # cg_revert: dropping nodes, signatures and computed batches
    "autobatch._graph",         # node storage and the graph's public methods
    "autobatch._core",          # the DyNet-style expression API
    "autobatch._update",        # the trainers' update rules as compiled loops
]

# the trainers' rules: exact float32 rounding order (they must give the numbers of the
# numpy expressions), so no contraction into FMAs where a target has them; sqrtf need
# not set errno (nothing reads it), which lets its loops vectorise
EXTRA_ARGS = {"autobatch._update": ["-ffp-contract=off", "-fno-math-errno"]}

# translate and compile on every core this process may use (pip runs setup.py with no -j)
JOBS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

extensions = [
    # -fno-trapping-math: nothing here enables floating-point traps, and without it
    # GCC will not turn the selects of the elementwise kernels into vector blends
    Extension(name, [name.replace(".", "/") + ".pyx"], include_dirs=["autobatch"],
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
