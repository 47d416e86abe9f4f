# The random numbers of random ops. Leaves (random_normal, random_uniform) draw from a
# sequential generator when they are created, in program order; scheduled random ops
# (dropout, noise) draw by counter from (the graph's seed, node id, element), so their
# numbers do not depend on the strategy or the order in which batches run.
from libc.math cimport log, sqrt, cos, M_PI
from libc.stdint cimport int64_t, uint64_t

ctypedef struct Rng:
    uint64_t s0, s1     # xoroshiro128+ state
    uint64_t seed       # the graph's seed

cdef double rng_uniform(Rng* r) noexcept nogil
cdef double rng_normal(Rng* r) noexcept nogil
cdef void rng_seed(Rng* r, uint64_t seed) noexcept nogil

cdef inline uint64_t mix64(uint64_t z) noexcept nogil:
    """splitmix64's finalizer: a bijection that mixes every bit into every bit."""
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)

cdef inline uint64_t node_stream(const Rng* r, int64_t node) noexcept nogil:
    """The key of a node's random numbers in this graph."""
    return mix64(r.seed ^ mix64(<uint64_t>node + <uint64_t>0xD1B54A32D192ED03))

cdef inline double stream_uniform(uint64_t stream, int64_t k) noexcept nogil:
    """The k-th uniform in [0, 1) of a node's stream (splitmix64 at position k)."""
    return (mix64(stream + (<uint64_t>k + 1) * <uint64_t>0x9E3779B97F4A7C15) >> 11) \
        * (1.0 / 9007199254740992.0)

cdef inline double stream_normal(uint64_t stream, int64_t k) noexcept nogil:
    """The k-th standard normal of a node's stream (Box-Muller on uniforms 2k, 2k+1)."""
    cdef double u1 = 1.0 - stream_uniform(stream, 2 * k), u2 = stream_uniform(stream, 2 * k + 1)
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2)
