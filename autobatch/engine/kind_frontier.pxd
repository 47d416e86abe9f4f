# The learned strategy's ready frontier by kind (engine/learned.pyx reads it): the set
# of kinds with a ready signature, its hash, per kind its ready signature of lowest
# average depth, and the fallback's choice, kept up to date as batches are taken and
# released.
from libc.stdint cimport int32_t, int64_t, uint64_t
from autobatch.engine.scheduler cimport KindFrontier, Sched

# orders of signatures: none kept; by average depth (agenda's); by average height,
# highest first, then depth (critical_sig's, lookahead's start)
cdef enum:
    ORDER_NONE, ORDER_DEPTH, ORDER_HEIGHT

cdef int kf_begin(Sched* s, int64_t n_kinds, int order) except -1
cdef uint64_t kf_state(Sched* s, const uint64_t* kind_hash) noexcept nogil
cdef int32_t kf_best(Sched* s, int32_t kind) noexcept nogil
cdef int32_t kf_first(Sched* s) noexcept nogil
cdef void kf_taken(Sched* s, int32_t sig, const uint64_t* kind_hash) noexcept nogil
cdef bint kf_checks() noexcept nogil
cdef int kf_verify(Sched* s, const uint64_t* kind_hash) except -1
