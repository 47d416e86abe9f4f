# Kinds (a signature named without node ids) and the hash tables of the learned
# strategy (engine/learned.pyx).
from libc.stdint cimport int32_t, int64_t, uint64_t
from autobatch.runtime.nodes cimport NodeView
from autobatch.engine.signatures cimport SigTable


cdef inline uint64_t mix64(uint64_t x) noexcept nogil:
    """splitmix64's finaliser: every input bit moves every output bit."""
    x ^= x >> 30
    x *= <uint64_t>0xBF58476D1CE4E5B9
    x ^= x >> 27
    x *= <uint64_t>0x94D049BB133111EB
    return x ^ (x >> 31)


cdef inline int64_t find_slot(const int32_t* table, int64_t size, const uint64_t* keys,
                              uint64_t key) noexcept nogil:
    """The slot of key in an open-addressing table of indices into keys (or the empty
    slot where it goes)."""
    cdef int64_t mask = size - 1, slot = <int64_t>(key & <uint64_t>mask)
    while table[slot] >= 0 and keys[table[slot]] != key:
        slot = (slot + 1) & mask
    return slot


cdef int32_t* rehashed(int32_t* table, int64_t* size, const uint64_t* keys, int64_t n) except NULL
cdef uint64_t kind_key(const SigTable* sigs, const NodeView* v, int32_t g,
                       uint64_t* weights) noexcept nogil
