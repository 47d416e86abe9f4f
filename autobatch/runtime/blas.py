"""The BLAS behind the engine's gemm calls: which one, and how many threads.

The engine calls `sgemm` through `scipy.linalg.cython_blas`, i.e. scipy's own
OpenBLAS (numpy's is a separate library and is not touched). Batched gemms here are
small (a few hundred columns at most), and threaded BLAS on them mostly waits for
its threads: on a busy two-core machine a training step ran up to 4x slower. So the
engine uses one BLAS thread unless told otherwise, like DyNet on the CPU:
`AUTOBATCH_BLAS_THREADS=N` in the environment, or `autobatch.set_blas_threads(N)`.
"""
import ctypes
import logging
import os

_log = logging.getLogger("autobatch.runtime.blas")

_lib = None        # ctypes handle of the library that cython_blas.sgemm lives in
_path = None


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _find_library():
    """Path of the shared library that implements cython_blas.sgemm (Linux/glibc)."""
    from scipy.linalg import cython_blas
    capsule = cython_blas.__pyx_capi__["sgemm"]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype = ctypes.c_void_p
    get_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return _file_of(get_ptr(capsule, get_name(capsule)))


def _file_of(address):
    """The shared library file that holds a function's address (dladdr), or None."""
    info = _DlInfo()
    libc = ctypes.CDLL(None)
    if not libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode()


def openblas_function(lib, name):
    """An OpenBLAS entry point of a loaded library (ctypes), whatever the build's
    naming: scipy's wheels prefix `scipy_`, 64-bit-integer builds end in `64_`."""
    if lib is None:
        return None
    for prefix in ("scipy_openblas_", "openblas_"):
        for suffix in ("", "64_"):
            f = getattr(lib, prefix + name + suffix, None)
            if f is not None:
                return f
    return None


def openblas_kernel(lib):
    """(core name, threads) of a loaded OpenBLAS library; None where it does not say."""
    core = openblas_function(lib, "get_corename")
    threads = openblas_function(lib, "get_num_threads")
    if core is not None:
        core.restype = ctypes.c_char_p
    return (core().decode() if core is not None else None,
            int(threads()) if threads is not None else None)


def _load():
    global _lib, _path
    if _path is not None:
        return
    try:
        _path = _find_library() or ""
        _lib = ctypes.CDLL(_path) if _path else None
    except (OSError, AttributeError, KeyError, ImportError):
        _path, _lib = "", None


def set_blas_threads(n):
    """Use ``n`` threads (an int >= 1) in the engine's BLAS calls (scipy's OpenBLAS, not
    numpy's). Returns True, or False if the BLAS offers no way to set them (it is then
    left as it is); ValueError for n < 1. The default is 1 (or ``AUTOBATCH_BLAS_THREADS``):
    the batched gemms here are small, and more threads pay only for wide layers.

    Example::

        >>> dy.set_blas_threads(2)       # hidden size 1024 on a machine of its own
        True
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"BLAS threads must be >= 1, got {n}")
    _load()
    f = openblas_function(_lib, "set_num_threads")
    if f is None:
        return False
    f.argtypes = [ctypes.c_int]
    f(n)
    return True


def blas_threads():
    """The engine's BLAS thread count (None if the BLAS does not say)."""
    _load()
    return openblas_kernel(_lib)[1]


def blas_info():
    """The engine's BLAS as a dict: ``library`` (the file of the OpenBLAS that scipy's
    ``cython_blas`` calls, or of ``cython_blas`` itself when that BLAS is not OpenBLAS),
    ``kernel`` (OpenBLAS's core name, e.g. 'Haswell'; None if it does not say) and
    ``threads`` (None if unknown). ``python -m autobatch`` prints it.

    Example::

        >>> dy.blas_info()["threads"]      # 1 unless AUTOBATCH_BLAS_THREADS says otherwise
        1
    """
    _load()
    kernel, threads = openblas_kernel(_lib)
    core = openblas_function(_lib, "get_corename")
    library = _file_of(ctypes.cast(core, ctypes.c_void_p).value) if core is not None else None
    library = library or _path
    return {"library": os.path.normpath(library) if library else None, "kernel": kernel,
            "threads": threads}


def _configure_from_environment():
    value = os.environ.get("AUTOBATCH_BLAS_THREADS", "1")
    try:
        done = set_blas_threads(int(value))
    except ValueError:
        raise ValueError(f"AUTOBATCH_BLAS_THREADS must be a positive integer, got {value!r}") from None
    if not done:
        _log.debug("the BLAS of scipy.linalg.cython_blas (%s) offers no thread setting: left as it is",
                  _path or "not found")
