# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""A graph's random numbers: xoroshiro128+ for leaves, by counter for random ops
(see runtime/rng.pxd)."""
from libc.math cimport log, sqrt, cos, M_PI
from libc.stdint cimport uint64_t

cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))

cdef void rng_seed(Rng* r, uint64_t seed) noexcept nogil:
    # splitmix64 spreads the seed over the xoroshiro128+ state
    r.seed = mix64(seed)
    r.s0 = mix64(seed + <uint64_t>0x9E3779B97F4A7C15)
    r.s1 = mix64(seed + 2 * <uint64_t>0x9E3779B97F4A7C15)

cdef double rng_uniform(Rng* r) noexcept nogil:
    """Uniform in [0, 1) (xoroshiro128+)."""
    cdef uint64_t s0 = r.s0, s1 = r.s1
    cdef uint64_t result = s0 + s1
    s1 ^= s0
    r.s0 = _rotl(s0, 24) ^ s1 ^ (s1 << 16)
    r.s1 = _rotl(s1, 37)
    return (result >> 11) * (1.0 / 9007199254740992.0)

cdef double rng_normal(Rng* r) noexcept nogil:
    """Standard normal (Box-Muller)."""
    cdef double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r)
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2)
