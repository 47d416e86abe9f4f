# Profile timers of a graph (dy.set_profiling): where a step's time goes. Compiled in,
# off by default: when off, a Batch's `prof` is NULL and each timed place costs one
# NULL test. Declarations only (no module).
from libc.stdint cimport int64_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

cdef enum:
    P_KERNEL = 0    # inside the batched kernels (forward and backward), everything below included
    P_GEMM = 1      # inside BLAS calls of the product kernels
    P_GATHER = 2    # copying operands together (gathers, stacking output gradients,
                    # adding stacked gradients back to their nodes)
    P_MEMORY = 3    # backward: assigning and zeroing gradient memory
    P_NCAT = 4

ctypedef struct Profile:
    double seconds[4]
    int64_t calls[4]

# Memory traffic of the products' stacked operands, counted always (stats()): per
# batch and operand, whether the operand's values (forward, or the gather again in
# backward) or its gradients (backward's dX) were used in place because the nodes'
# memory was already contiguous and in order, or copied; and the floats copied.
ctypedef struct Traffic:
    int64_t in_place
    int64_t copied
    int64_t copied_floats
    int64_t reused      # stacked operands read from an earlier copy of the same values
    int64_t grads_in_place
    int64_t grads_scattered

cdef inline double prof_now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9

cdef inline double prof_start(Profile* p) noexcept nogil:
    return prof_now() if p != NULL else 0.0

cdef inline void prof_stop(Profile* p, int cat, double t0) noexcept nogil:
    if p != NULL:
        p.seconds[cat] += prof_now() - t0
        p.calls[cat] += 1
