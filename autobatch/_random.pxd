# The random numbers of random ops (dropout, noise, random_normal ...).
from libc.stdint cimport uint64_t

ctypedef struct Rng:
    uint64_t s0, s1

cdef double rng_uniform(Rng* r) noexcept nogil
cdef double rng_normal(Rng* r) noexcept nogil
cdef void rng_seed(Rng* r, uint64_t seed) noexcept nogil
