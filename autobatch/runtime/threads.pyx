# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The engine's threads: one pool (``runtime/pool.h``) shared by every graph of the
process, and the thresholds above which a kernel's work is split over it (the split
products are in kernels/gemm.pyx). How many threads by default: thread_policy.py."""
import logging
import os

from autobatch.runtime import thread_policy

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)


cdef extern from "pool.h" nogil:
    ctypedef void (*ab_chunk_fn)(void* ctx, int chunk) noexcept nogil
    void ab_pool_run(ab_chunk_fn fn, void* ctx, int chunks)
    int ab_pool_resize(int n)
    int ab_pool_threads()
    int AB_MAX_THREADS
    enum:
        AB_N_STATS
    struct ab_pool_state:
        unsigned long long stat[AB_N_STATS]
        double waited_ns
        int skip, backoff
    ab_pool_state ab_pool
    pthread_mutex_t* ab_busy "(&ab_pool.busy)"


# products below this many multiply-adds run on one thread: half of one is then
# ~10 us of sgemm, against ~1 us of handing it to a polling worker. Re-measured: 2^18
# pays alone (256 x 512 weights times 2 columns, 9.7 us -> 5.6 us) but not in a
# training step (Tree-LSTM, LM, tagger 1-3 % slower than with 2^20, side by side)
cdef double PAR_MIN_WORK = 1 << 20
# batches of elementwise work (engine/parallel.pyx, fused chains) below this many output
# elements run on one thread (~10 us of the cheapest loops; re-measured, a chain of
# tanh and logistic over 256-vectors: 2 threads / 1 = 0.89-0.99 at 4K-16K, 1.07 at
# 32K, 1.32 at 64K)
cdef long PAR_MIN_ELEMS = 32768


cdef void pool_run(ChunkFn fn, void* ctx, int chunks) noexcept nogil:
    ab_pool_run(<ab_chunk_fn>fn, ctx, chunks)


cdef int pool_threads() noexcept nogil:
    return ab_pool_threads()


cdef bint split_worthwhile(int nodes, int per_node) noexcept nogil:
    return nodes >= 2 and ab_pool_threads() > 1 and <long>nodes * per_node >= PAR_MIN_ELEMS


cdef bint gemm_split_worthwhile(int m, int n, int k) noexcept nogil:
    return ab_pool_threads() > 1 and <double>m * n * k >= PAR_MIN_WORK


def set_split_thresholds(double gemm_work, long elements):
    """The sizes from which work is split over the threads (multiply-adds of a product,
    output elements of a batch); returns the old pair. For tests, which split tiny
    graphs to check the split paths."""
    global PAR_MIN_WORK, PAR_MIN_ELEMS
    old = (PAR_MIN_WORK, PAR_MIN_ELEMS)
    PAR_MIN_WORK, PAR_MIN_ELEMS = gemm_work, elements
    return old


# how the thread count was chosen (the policy's sentence, the variable, or the call),
# and the process that chose it: a forked child has no workers (pool.h)
cdef object REASON = "1 (before configure_from_environment)"
cdef object REASON_PID = None
cdef int REASON_THREADS = 1


cdef _resize(int want, str why):
    global REASON, REASON_PID, REASON_THREADS
    cdef int err
    if want < 1 or want > AB_MAX_THREADS:
        raise ValueError(f"threads must be between 1 and {AB_MAX_THREADS}, got {want}")
    with nogil:
        err = ab_pool_resize(want)
    REASON, REASON_PID, REASON_THREADS = why, os.getpid(), ab_pool_threads()
    if err:
        REASON = f"{why}; only {ab_pool_threads()} could be started"
        raise OSError(err, f"could not start thread {ab_pool_threads() + 1} of {want}")


def set_num_threads(n):
    """Use ``n`` threads (an int from 1 to 64, or ``"auto"``) in the engine's kernels:
    large matrix products and large batches of elementwise work are split over them.
    ``"auto"`` is the default policy: the cores this process may run on
    (``os.sched_getaffinity``), shared among the MPI ranks of the node; the count at
    import is that, or ``AUTOBATCH_NUM_THREADS`` from the environment. ``1`` runs every
    kernel on the calling thread (no worker). ``n`` above the free cores only adds
    waiting. Returns nothing; ValueError for a count out of range.

    The threads are shared by every graph of the process; while one thread's graph
    uses them, another thread's products run on that thread alone. Independent of
    ``set_blas_threads`` (BLAS's own threads): use one or the other. With more than
    one thread a split product may differ from the one-thread product in the last
    bits (docs/threads.md).

    Example::

        >>> dy.set_num_threads(1)        # one thread: the numbers of any machine
        >>> dy.get_num_threads()
        1
        >>> dy.set_num_threads("auto")   # back to the default
    """
    if isinstance(n, str) and n == "auto":
        want, why = thread_policy.default_threads()
    else:
        want = int(n)
        why = f"set_num_threads({want})"
    _resize(want, why)


def configure_from_environment():
    """Threads from ``AUTOBATCH_NUM_THREADS`` (a count, or ``auto``), else the default
    policy (set_num_threads("auto")), at import. A default the system refuses to start
    in full keeps the workers it could start (a warning is logged)."""
    want, why = thread_policy.from_environment()
    if want == ab_pool_threads() and REASON_PID is not None:
        return
    try:
        _resize(want, why)
    except OSError as e:
        if why.startswith(thread_policy.ENV_VAR):
            raise
        logging.getLogger("autobatch.runtime.threads").warning("engine threads: %s", e)


def threads_reason():
    """How the engine's thread count was chosen: the default policy's sentence (the
    cores it counted), ``AUTOBATCH_NUM_THREADS=n`` or ``set_num_threads(n)``; shown
    by ``python -m autobatch``."""
    if REASON_THREADS > 1 and REASON_PID != os.getpid() and ab_pool_threads() == 1:
        return "a forked child: the pool's workers stayed in the parent process"
    return REASON


# the names of pool.h's counters, in the order of its AB_STAT_ enum
STAT_NAMES = ("jobs", "shared", "busy", "backed_off", "missed", "late")


def pool_statistics(reset=False):
    """What the pool did since it started (or since the last reset): ``jobs`` (work
    that could be split), ``shared`` (run with a worker), ``busy`` (run alone: another
    thread's job had the pool), ``backed_off`` (run alone after a job the workers lost),
    ``missed`` (the workers did not come), ``late`` (the caller waited longer for a
    worker's chunk than it took for its own), ``waited_s`` (the callers' waits for
    started chunks). For measurements and tests (docs/threads.md, busy machines)."""
    with nogil:
        pthread_mutex_lock(ab_busy)
    out = {name: int(ab_pool.stat[k]) for k, name in enumerate(STAT_NAMES)}
    out["waited_s"] = ab_pool.waited_ns * 1e-9
    if reset:
        for k in range(AB_N_STATS):
            ab_pool.stat[k] = 0
        ab_pool.waited_ns = 0
    pthread_mutex_unlock(ab_busy)
    return out


def get_num_threads():
    """The number of threads the engine's kernels use (``set_num_threads``; by
    default the cores this process may run on).

    Example::

        >>> dy.get_num_threads()
        2
    """
    return ab_pool_threads()
