# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The engine's threads: one pool (``runtime/pool.h``) shared by every graph of the
process, and the thresholds above which a kernel's work is split over it (the split
products are in kernels/gemm.pyx)."""

cdef extern from "pool.h" nogil:
    ctypedef void (*ab_chunk_fn)(void* ctx, int chunk) noexcept nogil
    void ab_pool_run(ab_chunk_fn fn, void* ctx, int chunks)
    int ab_pool_resize(int n)
    int ab_pool_threads()
    int AB_MAX_THREADS

# products below this many multiply-adds run on one thread: half of one is then
# ~10 us of sgemm, against ~1 us of handing it to a spinning worker
cdef double PAR_MIN_WORK = 1 << 20
# batches of elementwise work (engine/parallel.pyx, fused chains) below this many output
# elements run on one thread (~10 us of the cheapest loops)
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


def set_num_threads(n):
    """Use ``n`` threads (an int >= 1) in the engine's kernels: large matrix products are
    split over them (each part one single-threaded BLAS call). The default is 1, or
    ``AUTOBATCH_NUM_THREADS`` from the environment; ``n`` above the machine's cores
    only adds waiting. Returns nothing; ValueError for n < 1 or above 64.

    The threads are shared by every graph of the process; while one thread's graph
    uses them, another thread's products run on that thread alone. Independent of
    ``set_blas_threads`` (BLAS's own threads): use one or the other.

    Example::

        >>> dy.set_num_threads(2)        # both cores of a two-core machine
        >>> dy.get_num_threads()
        2
    """
    cdef int want = int(n), err
    if want < 1 or want > AB_MAX_THREADS:
        raise ValueError(f"threads must be between 1 and {AB_MAX_THREADS}, got {want}")
    with nogil:
        err = ab_pool_resize(want)
    if err:
        raise OSError(err, f"could not start thread {ab_pool_threads() + 1} of {want}")


def configure_from_environment():
    """Threads from ``AUTOBATCH_NUM_THREADS`` (default 1), at import."""
    import os
    value = os.environ.get("AUTOBATCH_NUM_THREADS", "1")
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"AUTOBATCH_NUM_THREADS must be a positive integer, got {value!r}") from None
    if n != ab_pool_threads():
        set_num_threads(n)


def get_num_threads():
    """The number of threads the engine's kernels use (``set_num_threads``).

    Example::

        >>> dy.get_num_threads()
        1
    """
    return ab_pool_threads()
