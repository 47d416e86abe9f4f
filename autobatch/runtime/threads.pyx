# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The engine's threads: one pool (``runtime/pool.h``) shared by every graph of the process,
and the products split over it.

A product large enough to gain is cut into one block per thread along the larger
of its output's two dimensions (each block one single-threaded sgemm: splitting the
rows packs half of W per thread, splitting the columns half of X). The calling thread
computes blocks too and never waits for a block no worker has started, so a worker
that a busy machine does not schedule costs little. Blocks write disjoint parts of
C and each sums over the whole of k, so the numbers are those of one call."""
from autobatch.kernels.gemm cimport gemm_serial

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
cdef int ALIGN = 16                 # block starts are multiples of 16 floats (64 bytes)


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


ctypedef struct GemmJob:
    char ta, tb
    int m, n, k, lda, ldb, ldc
    float alpha, beta
    float* A
    float* B
    float* C
    bint split_rows         # blocks of C's rows (else of its columns)
    int block               # rows or columns of a block


cdef void gemm_block(void* ctx, int c) noexcept nogil:
    cdef GemmJob* g = <GemmJob*>ctx
    cdef int at = c * g.block
    cdef int size = min(g.block, (g.m if g.split_rows else g.n) - at)
    if g.split_rows:        # rows at.. of op(A) and C
        gemm_serial(g.ta, g.tb, size, g.n, g.k, g.alpha,
                    g.A + (at if g.ta == b'N' else <size_t>at * g.lda), g.lda, g.B, g.ldb,
                    g.beta, g.C + at, g.ldc)
    else:                   # columns at.. of op(B) and C
        gemm_serial(g.ta, g.tb, g.m, size, g.k, g.alpha, g.A, g.lda,
                    g.B + (<size_t>at * g.ldb if g.tb == b'N' else at), g.ldb,
                    g.beta, g.C + <size_t>at * g.ldc, g.ldc)


cdef void gemm_threaded(char ta, char tb, int m, int n, int k, float alpha,
                        float* A, int lda, float* B, int ldb, float beta,
                        float* C, int ldc) noexcept nogil:
    """gemm_serial's C = alpha op(A) op(B) + beta C, in blocks over the pool's threads
    when it is large enough to gain."""
    cdef int threads = ab_pool_threads(), along
    cdef GemmJob g
    if threads == 1 or <double>m * n * k < PAR_MIN_WORK:
        gemm_serial(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
        return
    g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc = ta, tb, m, n, k, lda, ldb, ldc
    g.alpha, g.beta, g.A, g.B, g.C = alpha, beta, A, B, C
    g.split_rows = m > n
    along = m if g.split_rows else n
    g.block = (along + threads - 1) // threads
    g.block = (g.block + ALIGN - 1) // ALIGN * ALIGN
    if g.block >= along:
        gemm_serial(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
        return
    ab_pool_run(gemm_block, &g, (along + g.block - 1) // g.block)


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


def gemm_for_tests(str ta, str tb, float alpha, float[::1, :] A, float[::1, :] B, float beta,
                   float[::1, :] C):
    """C = alpha op(A) op(B) + beta C on Fortran-ordered float32 arrays, through the
    engine's gemm (split over the threads when large): for the tests of the split."""
    cdef char cta = ord(ta), ctb = ord(tb)
    cdef int m = C.shape[0], n = C.shape[1]
    cdef int k = A.shape[1] if cta == b'N' else A.shape[0]
    if (A.shape[0] if cta == b'N' else A.shape[1]) != m or \
            (B.shape[0] if ctb == b'N' else B.shape[1]) != k or \
            (B.shape[1] if ctb == b'N' else B.shape[0]) != n:
        raise ValueError("gemm_for_tests: shapes do not agree")
    with nogil:
        gemm_threaded(cta, ctb, m, n, k, alpha, &A[0, 0], A.shape[0], &B[0, 0], B.shape[0],
                      beta, &C[0, 0], m)
