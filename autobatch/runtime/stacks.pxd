# The stacked operands a forward pass already copied together, so that a product whose
# stacked argument is the same sequence of values reads that copy instead of copying
# again (the gate products of a cell written with ops all read one input: a leaf's word
# vectors, rows of a lookup table that are never consecutive). Declarations only (no
# module). The copies live in the graph's forward arena (until renew_cg); the cache is
# emptied at the start of every forward, since the values a copy was made from (a
# parameter's rows, an input) may change between forwards.
from libc.stdint cimport int64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memset

cdef enum:
    N_STACKS = 4        # the copies remembered (the most recent ones)

ctypedef struct Stack:
    const float** src   # the values copied, in order (none: n == 0)
    int64_t cap
    int n
    int per
    float* out          # where they are, stacked

ctypedef struct StackCache:
    Stack e[N_STACKS]
    Stack probe         # the sources of the operand being looked up
    int next            # the entry the next copy replaces (the oldest)


cdef inline const float** stack_probe(StackCache* c, int n) noexcept nogil:
    """Room for the n sources of an operand to look up, or NULL when memory is short
    (the operand is then copied and not remembered)."""
    cdef const float** grown
    if c.probe.cap < n:
        grown = <const float**>realloc(c.probe.src, <size_t>n * sizeof(float*))
        if grown == NULL:
            return NULL
        c.probe.src = grown
        c.probe.cap = n
    return c.probe.src


cdef inline float* stack_find(StackCache* c, int n, int per) noexcept nogil:
    """The copy of exactly the probe's n sources (each `per` floats), or NULL."""
    cdef int k, j
    cdef Stack* s
    for k in range(N_STACKS):
        s = &c.e[k]
        if s.n != n or s.per != per:
            continue
        j = 0
        while j < n and s.src[j] == c.probe.src[j]:
            j += 1
        if j == n:
            return s.out
    return NULL


cdef inline void stack_keep(StackCache* c, int n, int per, float* out) noexcept nogil:
    """Remember that `out` holds the probe's n sources stacked, in place of the oldest
    copy (the two swap their room, so nothing is copied)."""
    cdef Stack* s = &c.e[c.next]
    cdef Stack old = s[0]
    s.src, s.cap, s.n, s.per, s.out = c.probe.src, c.probe.cap, n, per, out
    c.probe.src, c.probe.cap = old.src, old.cap
    c.next = (c.next + 1) % N_STACKS


cdef inline void stacks_clear(StackCache* c) noexcept nogil:
    cdef int k
    for k in range(N_STACKS):
        c.e[k].n = 0


cdef inline void stacks_free(StackCache* c) noexcept nogil:
    cdef int k
    for k in range(N_STACKS):
        free(c.e[k].src)
    free(c.probe.src)
    memset(c, 0, sizeof(StackCache))
