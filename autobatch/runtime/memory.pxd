# Memory: bump arenas for node values and scratch, and growth of the graph's arrays.
# One out-of-memory policy: MemoryError. Code that cannot raise (nogil kernels) gets
# NULL from arena_alloc, returns early, and the caller raises (arena_check).
from libc.stdint cimport int64_t

# chunks are never moved, so pointers stay valid until reset; a reset keeps them all
# (their pages stay mapped) and allocation starts again from the first
ctypedef struct Arena:
    char** chunks
    size_t* caps
    int nchunks         # chunks held
    int maxchunks
    int cur             # the chunk allocations come from (nchunks: none yet)
    size_t used         # bytes used in chunk cur
    size_t total        # bytes handed out since reset (peak tracking)
    size_t peak
    bint failed         # an allocation failed since the last arena_check

# where an arena stood (cg_checkpoint), to give back what was allocated since
ctypedef struct ArenaMark:
    int cur
    size_t used
    size_t total

cdef float* arena_alloc(Arena* a, size_t nfloats) noexcept nogil
cdef float* arena_alloc_or_raise(Arena* a, size_t nfloats) except NULL
cdef int arena_check(Arena* a) except -1
cdef void arena_reset(Arena* a) noexcept nogil
cdef ArenaMark arena_mark(const Arena* a) noexcept nogil
cdef void arena_revert(Arena* a, ArenaMark m) noexcept nogil
cdef void arena_free(Arena* a) noexcept nogil
cdef size_t arena_capacity(const Arena* a) noexcept nogil

cdef void* grow_slow(void* p, int64_t* cap, int64_t need, size_t item) except NULL
cdef bint arrays_always_move() noexcept
cdef void* move_array(void* p, int64_t cap, int64_t used, size_t item) except NULL
cdef int64_t next_capacity(int64_t cap, int64_t need) noexcept nogil
cdef void* resize(void* p, int64_t n, size_t item) except NULL

cdef inline void* grow(void* p, int64_t* cap, int64_t need, size_t item) except NULL:
    """Room for `need` items of p (doubling); MemoryError instead of a crash. The
    common case, enough room already, costs one comparison."""
    if need <= cap[0] and p != NULL:
        return p
    return grow_slow(p, cap, need, item)
