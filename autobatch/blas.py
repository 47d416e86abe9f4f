"""The BLAS behind the engine's gemm calls: which one, and how many threads.

The engine calls `sgemm` through `scipy.linalg.cython_blas`, i.e. scipy's own
OpenBLAS (numpy's is a separate library and is not touched). Batched gemms here are
small (a few hundred columns at most), and threaded BLAS on them mostly waits for
its threads: on a busy two-core machine a training step ran up to 4x slower. So the
engine uses one BLAS thread unless told otherwise, like DyNet on the CPU:
`AUTOBATCH_BLAS_THREADS=N` in the environment, or `autobatch.set_blas_threads(N)`.
"""
import ctypes
import os

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
    fn = get_ptr(capsule, get_name(capsule))
    info = _DlInfo()
    libc = ctypes.CDLL(None)
    if not libc.dladdr(ctypes.c_void_p(fn), ctypes.byref(info)) or not info.dli_fname:
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
    """Threads for the engine's BLAS calls. Returns False if the BLAS offers no way
    to set them (it is then left as it is)."""
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
    _load()
    return openblas_kernel(_lib)[1]


def blas_info():
    """{'library': path, 'kernel': OpenBLAS core name, 'threads': n} of the engine's BLAS."""
    _load()
    kernel, threads = openblas_kernel(_lib)
    return {"library": _path or None, "kernel": kernel, "threads": threads}


def _configure_from_environment():
    value = os.environ.get("AUTOBATCH_BLAS_THREADS", "1")
    try:
        set_blas_threads(int(value))
    except ValueError:
        raise ValueError(f"AUTOBATCH_BLAS_THREADS must be a positive integer, got {value!r}") from None
