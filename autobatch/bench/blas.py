"""Which BLAS runs, and pinning it to one thread for benchmarks.

BLAS libraries read their thread count when they are loaded, so the benchmark
re-executes itself with the variables set rather than changing them after import.
"""
import ctypes
import os
import sys

from autobatch.runtime.blas import openblas_kernel

THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


NATIVE_DROP = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def reexec_single_threaded(module_args, native=False):
    """Re-run `python -m <module_args>` with one BLAS thread unless already so.

    native=True (benchmark runs only) also removes OPENBLAS_CORETYPE and
    OPENBLAS_L2_SIZE from the environment, so that OpenBLAS picks the kernel of the
    processor it runs on instead of the one these variables force."""
    single = all(os.environ.get(v) == "1" for v in THREAD_VARS)
    forced = native and any(v in os.environ for v in NATIVE_DROP)
    if single and not forced:
        return
    env = dict(os.environ)
    env.update({v: "1" for v in THREAD_VARS})
    if native:
        for v in NATIVE_DROP:
            env.pop(v, None)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m"] + module_args, env)


def loaded_openblas():
    """[(library path, core name, threads)] for every OpenBLAS loaded in this process."""
    out = []
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line})
    except OSError:
        return out
    for path in paths:
        core, threads = openblas_kernel(ctypes.CDLL(path))
        out.append((path, core or "?", "?" if threads is None else threads))
    return out


def threadpool_kernels():
    """[(library file, architecture, threads)] as threadpoolctl sees them, if installed."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [(os.path.basename(i.get("filepath", "?")), i.get("architecture", "?"), i.get("num_threads", "?"))
            for i in threadpool_info() if i.get("internal_api") == "openblas"]


def describe():
    libs = loaded_openblas()
    env = {v: os.environ.get(v) for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if os.environ.get(v)}
    parts = [f"{os.path.basename(p)}: kernel {core}, {threads} thread(s)" for p, core, threads in libs]
    if env:
        parts.append("env " + " ".join(f"{k}={v}" for k, v in env.items()))
    return "; ".join(parts) or "no OpenBLAS found"
