# cython: language_level=3, boundscheck=False, wraparound=False
"""A parameter's values as the graphs read them.

DyNet's nodes hold the values of the time they were computed: a parameter node copies
the parameter, a lookup its row. Here a parameter node points into the parameter's
buffer instead (no copy per step), so whatever writes the values must not write into a
buffer a live graph has computed with:

- a trainer step writes out of place into a second buffer when a live graph reads the
  first (`step_target`, then `step_done` makes it current): the same memory traffic as
  in place, and the graph keeps the buffer it read; the second buffer is reused by the
  next step once that graph is renewed;
- the rare other writes (set_value, scale, populate, ...) copy first when a live graph
  reads the buffer (`writable`).

A graph is live from its renew to the next (or to its end): the engine registers its
base version (`graph_started`, `graph_ended`); a buffer remembers the base versions of
the graphs that computed nodes on it (`add_reader`). Lookup rows are copied into their
nodes when computed, so a table is read this way only as a whole-table expression.
"""
import numpy as np

from libc.stdlib cimport realloc
from libc.string cimport memcpy

cdef int32_t* _live = NULL          # base versions of the live graphs (any thread)
cdef int _n_live = 0, _cap_live = 0


cdef int graph_started(int32_t base) except -1:
    global _live, _cap_live, _n_live
    cdef int32_t* grown
    if _n_live == _cap_live:
        grown = <int32_t*>realloc(_live, (2 * _cap_live + 8) * sizeof(int32_t))
        if grown == NULL:
            raise MemoryError("autobatch: no memory to register a computation graph")
        _live, _cap_live = grown, 2 * _cap_live + 8
    _live[_n_live] = base
    _n_live += 1
    return 0


cdef void graph_ended(int32_t base) noexcept:
    global _n_live
    cdef int k
    for k in range(_n_live):
        if _live[k] == base:
            _n_live -= 1
            _live[k] = _live[_n_live]
            return


cdef inline bint _live_graph(int32_t base) noexcept:
    cdef int k
    for k in range(_n_live):
        if _live[k] == base:
            return True
    return False


cdef void _clear(Readers* r) noexcept:
    cdef int k
    for k in range(MAX_READERS):
        r.graph[k] = -1
    r.many = False


cdef void add_reader(ValueSource* s, int32_t base) noexcept:
    """Graph `base` computed a node on s.values."""
    cdef Readers* r = &s.readers
    cdef int k, free_slot = -1
    for k in range(MAX_READERS):
        if r.graph[k] == base:
            return
        if free_slot < 0 and (r.graph[k] < 0 or not _live_graph(r.graph[k])):
            free_slot = k
    if free_slot >= 0:
        r.graph[free_slot] = base
    else:
        r.many = True


cdef bint is_read(const Readers* r) noexcept:
    """Whether a live graph computed nodes on the buffer."""
    cdef int k
    if r.many:
        return True
    for k in range(MAX_READERS):
        if r.graph[k] >= 0 and _live_graph(r.graph[k]):
            return True
    return False


cdef float* _ptr(object arr):
    cdef float[::1] view = arr
    return &view[0] if view.shape[0] > 0 else NULL


cdef class _ReadersBox:
    """A replaced buffer's readers, kept beside it."""
    cdef Readers r


cdef object _readers_copy(const Readers* r):
    box = _ReadersBox()
    (<_ReadersBox>box).r = r[0]
    return box


cdef class ValueBuffers:
    """The values of one parameter (n float32): `current` is what nodes computed from
    now on read; see the module docstring for when writes go elsewhere."""

    def __init__(self, Py_ssize_t n):
        self.n = n
        self.current = np.zeros(n, dtype=np.float32)
        self.spare = None
        self.spare_values = NULL
        self.retired = []
        self.src.values = _ptr(self.current)
        _clear(&self.src.readers)
        _clear(&self.spare_readers)

    cdef void _prune(self):
        if self.retired:
            self.retired = [(a, r) for a, r in self.retired if is_read(&(<_ReadersBox>r).r)]

    cdef float* _free_spare(self) except? NULL:
        """A second buffer no live graph reads (made on first need; a read one is kept
        until its graphs end)."""
        if self.spare is not None and is_read(&self.spare_readers):
            self._prune()
            self.retired.append((self.spare, _readers_copy(&self.spare_readers)))
            self.spare = None
        if self.spare is None:
            self.spare = np.empty(self.n, dtype=np.float32)
            self.spare_values = _ptr(self.spare)
        _clear(&self.spare_readers)
        return self.spare_values

    cdef void _swap(self) noexcept:
        """The spare becomes current (no graph reads it: its readers were cleared)."""
        cdef Readers r = self.src.readers
        cdef float* values = self.src.values
        self.current, self.spare = self.spare, self.current
        self.src.values, self.spare_values = self.spare_values, values
        self.src.readers = self.spare_readers
        self.spare_readers = r

    cdef float* writable(self) except? NULL:
        """The current values, safe to change in place: copied to another buffer first
        when a live graph computed with them."""
        if self.n and is_read(&self.src.readers):
            memcpy(self._free_spare(), self.src.values, self.n * sizeof(float))
            self._swap()
        return self.src.values

    cdef float* step_target(self) except? NULL:
        """Where a step that reads every value writes the new ones: the current buffer
        (in place) unless a live graph reads it, else the spare; `step_done` after."""
        if self.n and is_read(&self.src.readers):
            return self._free_spare()
        return self.src.values

    cdef void step_done(self, float* target) noexcept:
        if target != self.src.values:
            self._swap()

    def values(self):
        """The current array, safe to change in place (see `writable`)."""
        self.writable()
        return self.current

    def is_read(self):
        """Whether a live graph computed nodes on the current values."""
        return bool(is_read(&self.src.readers))
