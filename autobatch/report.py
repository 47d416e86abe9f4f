"""What this installation of autobatch runs on: ``python -m autobatch`` prints it, and
``autobatch.show_config()`` does the same from a program (as ``np.show_config()``).
Paste it into a bug report."""
import importlib.metadata
import importlib.util
import platform
import sys

from autobatch.engine.strategies import available_strategies, default_strategy
from autobatch.kernels.elementwise import simd_level
from autobatch.kernels.packed import packed_isa, packed_limits
from autobatch.model.update_rules import simd_level as update_simd_level
from autobatch.runtime.blas import blas_info
from autobatch.runtime.threads import get_num_threads, threads_reason
from autobatch.version import __version__

# optional packages: (import name, distribution name, what it brings)
EXTRAS = [
    ("torch", "torch", "the bench's PyTorch baselines"),
    ("mpi4py", "mpi4py", "autobatch.distributed (data-parallel training)"),
    ("tqdm", "tqdm", "progress bars in the bench and the examples"),
    ("dynet", "dynet38", "the bench's DyNet baseline"),
]


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def config_info():
    """The report as a dict: ``version``, ``python``, ``numpy``, ``scipy``, ``blas``
    (``library``, ``kernel``, ``threads``: see ``autobatch.blas_info``), ``simd`` (the
    clone of the elementwise loops in use), ``update_simd`` (the level of the trainers'
    update rules: avx512f, avx2 or default), ``packed_gemm`` (the products' packed-weight
    kernel: avx512, avx2 or off), ``packed_unlimited`` (True when it takes products
    of every size: the AVX-512 kernel beside a BLAS kernel without AVX-512),
    ``threads`` (the engine's, see ``autobatch.set_num_threads``), ``threads_reason`` (how
    that count was chosen: the default policy and the cores it counted, the environment
    variable or the call), ``default_strategy``, ``strategies`` and
    ``extras`` (name -> installed version, or None when absent). Nothing optional is
    imported: an extra is looked up, not loaded."""
    import numpy
    import scipy

    extras = {}
    for module, distribution, _ in EXTRAS:
        found = importlib.util.find_spec(module) is not None
        extras[module] = (_version(distribution) or "installed") if found else None
    return {
        "version": __version__,
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "blas": blas_info(),
        "simd": simd_level(),
        "update_simd": update_simd_level(),
        "packed_gemm": packed_isa(),
        "packed_unlimited": packed_limits()[1] is None,
        "threads": get_num_threads(),
        "threads_reason": threads_reason(),
        "default_strategy": default_strategy(),
        "strategies": list(available_strategies()),
        "extras": extras,
    }


def format_config(info=None):
    """The report as text (the lines ``python -m autobatch`` prints)."""
    info = config_info() if info is None else info
    blas = info["blas"]
    lines = [
        f"autobatch {info['version']}",
        f"  python:           {info['python']}",
        f"  platform:         {info['platform']}",
        f"  numpy, scipy:     {info['numpy']}, {info['scipy']}",
        f"  BLAS library:     {blas['library'] or 'unknown'}",
        f"  BLAS kernel:      {blas['kernel'] or 'unknown (not OpenBLAS?)'}",
        f"  BLAS threads:     {blas['threads'] if blas['threads'] is not None else 'unknown'}"
        "  (AUTOBATCH_BLAS_THREADS or autobatch.set_blas_threads)",
        f"  elementwise SIMD: {info['simd']}",
        f"  update rules:     {info['update_simd']}  (AUTOBATCH_UPDATE_SIMD)",
        f"  packed gemm:      {info['packed_gemm']}"
        f"{', every size (the BLAS kernel has no AVX-512)' if info.get('packed_unlimited') else ''}"
        "  (AUTOBATCH_PACKED_GEMM)",
        f"  engine threads:   {info['threads']}  ({info.get('threads_reason', 'unknown')}; "
        "AUTOBATCH_NUM_THREADS or autobatch.set_num_threads)",
        f"  default strategy: {info['default_strategy']}"
        f"  (registered: {', '.join(info['strategies'])})",
        "  optional packages:",
    ]
    for module, _, purpose in EXTRAS:
        version = info["extras"][module]
        lines.append(f"    {module + ':':<8s} {version or 'not installed':<14s} {purpose}")
    return "\n".join(lines)


def show_config(file=None):
    """Print the version, the BLAS library, kernel and thread count, the SIMD levels of the
    elementwise kernels and the update rules, the default strategy and which optional packages (torch, mpi4py,
    tqdm, dynet) are installed, to ``file`` (default: standard output).

    Example::

        >>> import autobatch as dy
        >>> dy.show_config()           # or, from a shell: python -m autobatch
    """
    if file is not None and not callable(getattr(file, "write", None)):
        raise TypeError(f"show_config: file must have a write() method, got {type(file).__name__}")
    print(format_config(), file=file or sys.stdout)
