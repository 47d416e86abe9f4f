# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Bump arenas (values, aux and backward scratch) and array growth, with one
out-of-memory policy: MemoryError, never abort()."""
import os

from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

cdef size_t CHUNK_MIN = 1 << 20

# AUTOBATCH_DEBUG_MOVE_ARRAYS=1: every growth of a graph array, and every append of a
# node, moves the array to new memory and poisons the old one before freeing it, so that
# a pointer kept across an append (docs/architecture.md, "Indices across appends") reads
# garbage, or is reported by valgrind, every time instead of once in many reallocations.
# Read once, when the library loads; a debugging switch (appends cost O(nodes) under it).
cdef bint _always_move = os.environ.get("AUTOBATCH_DEBUG_MOVE_ARRAYS", "0") not in ("", "0")
cdef unsigned char POISON = 0xA5     # a node read through a stale pointer: nd = -91, ...


cdef float* arena_alloc(Arena* a, size_t nfloats) noexcept nogil:
    """64-byte aligned room for nfloats floats, or NULL (and a.failed) when the
    memory cannot be had."""
    if nfloats > (<size_t>-1) // 8:
        a.failed = True
        return NULL
    cdef size_t nbytes = ((nfloats * sizeof(float) + 63) // 64) * 64
    if nbytes == 0:
        nbytes = 64
    if a.cur >= a.nchunks or a.used + nbytes > a.caps[a.cur]:
        if not _next_chunk(a, nbytes):
            a.failed = True
            return NULL
    cdef char* p = a.chunks[a.cur] + a.used
    a.used += nbytes
    a.total += nbytes
    if a.total > a.peak:
        a.peak = a.total
    return <float*>p


cdef bint _next_chunk(Arena* a, size_t nbytes) noexcept nogil:
    """Move on to the next held chunk with room for nbytes, or to a new one (twice
    the last, at least nbytes); False if the memory cannot be had."""
    cdef int j = a.cur + 1 if a.cur < a.nchunks else a.nchunks
    while j < a.nchunks and a.caps[j] < nbytes:
        j += 1
    if j == a.nchunks:
        if not _add_chunk(a, nbytes):
            return False
    a.cur = j
    a.used = 0
    return True


cdef bint _add_chunk(Arena* a, size_t nbytes) noexcept nogil:
    cdef size_t cap = CHUNK_MIN
    cdef void* q
    if a.nchunks > 0 and 2 * a.caps[a.nchunks - 1] > cap:
        cap = 2 * a.caps[a.nchunks - 1]
    if nbytes > cap:
        cap = nbytes
    if a.nchunks == a.maxchunks and not _grow_chunk_list(a):
        return False
    q = realloc(NULL, cap)
    if q == NULL and cap > nbytes:      # try without the doubling headroom
        cap = nbytes
        q = realloc(NULL, cap)
    if q == NULL:
        return False
    a.chunks[a.nchunks] = <char*>q
    a.caps[a.nchunks] = cap
    a.nchunks += 1
    return True


cdef bint _grow_chunk_list(Arena* a) noexcept nogil:
    cdef int m = 8 if a.maxchunks == 0 else 2 * a.maxchunks
    cdef char** chunks = <char**>realloc(a.chunks, m * sizeof(char*))
    if chunks == NULL:
        return False
    a.chunks = chunks
    cdef size_t* caps = <size_t*>realloc(a.caps, m * sizeof(size_t))
    if caps == NULL:
        return False
    a.caps = caps
    a.maxchunks = m
    return True


cdef float* arena_alloc_or_raise(Arena* a, size_t nfloats) except NULL:
    cdef float* p = arena_alloc(a, nfloats)
    if p == NULL:
        a.failed = False
        raise MemoryError(f"autobatch: cannot allocate {nfloats * 4} bytes for values")
    return p


cdef int arena_check(Arena* a) except -1:
    """Raise MemoryError if an allocation failed in code that could not raise."""
    if a.failed:
        a.failed = False
        raise MemoryError("autobatch: out of memory in a kernel's scratch")
    return 0


cdef void arena_reset(Arena* a) noexcept nogil:
    """Forget every allocation. The chunks are kept and filled again from the first:
    their pages stay mapped, where freeing them (or merging them into a new block)
    would fault every page in again on first touch (~2 us a page on a VM: tens of ms
    in the steps after the first)."""
    a.cur = 0
    a.used = 0
    a.total = 0
    a.peak = 0
    a.failed = False


cdef ArenaMark arena_mark(const Arena* a) noexcept nogil:
    cdef ArenaMark m
    m.cur = a.cur
    m.used = a.used
    m.total = a.total
    return m


cdef void arena_revert(Arena* a, ArenaMark m) noexcept nogil:
    """Give back everything allocated since mark m (the arena was not reset since):
    allocation resumes where it stood; chunks added since are kept for reuse."""
    a.cur = m.cur
    a.used = m.used
    a.total = m.total


cdef void arena_free(Arena* a) noexcept nogil:
    cdef int i
    for i in range(a.nchunks):
        free(a.chunks[i])
    free(a.chunks)
    free(a.caps)
    memset(a, 0, sizeof(Arena))


cdef size_t arena_capacity(const Arena* a) noexcept nogil:
    cdef size_t total = 0
    cdef int i
    for i in range(a.nchunks):
        total += a.caps[i]
    return total


cdef void* grow_slow(void* p, int64_t* cap, int64_t need, size_t item) except NULL:
    cdef int64_t c = next_capacity(cap[0], need)
    cdef void* q = move_array(p, c, cap[0], item) if _always_move and p != NULL \
        else resize(p, c, item)
    cap[0] = c
    return q


cdef bint arrays_always_move() noexcept:
    """Whether AUTOBATCH_DEBUG_MOVE_ARRAYS is on (see above)."""
    return _always_move


cdef void* move_array(void* p, int64_t cap, int64_t used, size_t item) except NULL:
    """p's first `used` items in new memory with room for `cap`; p (of `used` items or
    more) poisoned and freed. What realloc may do, done always (the debugging switch)."""
    cdef void* q = malloc(cap * item if cap > 0 else 1)
    if q == NULL:
        raise MemoryError("autobatch: cannot grow graph arrays")
    if p != NULL:
        memcpy(q, p, used * item)
        memset(p, POISON, used * item)
        free(p)
    return q


cdef int64_t next_capacity(int64_t cap, int64_t need) noexcept nogil:
    """Doubling from cap (at least 16) until need fits."""
    if cap < 16:
        cap = 16
    while cap < need:
        cap *= 2
    return cap


cdef void* resize(void* p, int64_t n, size_t item) except NULL:
    """p with room for n items (the first ones kept); MemoryError if it cannot be had.
    Arrays that share one capacity (the columns of a table) grow with it."""
    cdef void* q = realloc(p, n * item)
    if q == NULL:
        raise MemoryError("autobatch: cannot grow graph arrays")
    return q
