# A parameter's values as the graphs read them: the buffer nodes made now read, which
# live graphs computed nodes on it, and a second buffer a trainer step writes into when
# a live graph still reads the first (runtime/param_buffers.pyx).
from libc.stdint cimport int32_t

cdef enum:
    MAX_READERS = 4      # graphs remembered per buffer; more: held until it is replaced

ctypedef struct Readers:
    int32_t graph[MAX_READERS]   # base versions of the graphs that read the buffer (-1: free)
    bint many                    # more graphs than slots read it

ctypedef struct ValueSource:
    float* values                # the buffer a node computed now reads
    Readers readers              # the graphs whose computed nodes point into `values`

cdef int graph_started(int32_t base) except -1
cdef void graph_ended(int32_t base) noexcept
cdef void add_reader(ValueSource* s, int32_t base) noexcept
cdef bint is_read(const Readers* r) noexcept

cdef class ValueBuffers:
    cdef ValueSource src
    cdef readonly object current        # the float32 array `src.values` points into
    cdef object spare                   # a second array of the same size, or None
    cdef float* spare_values            # its first element (NULL: none, or no elements)
    cdef Readers spare_readers
    cdef list retired                   # [(array, Readers)]: replaced, still read
    cdef readonly Py_ssize_t n
    cdef void _prune(self)
    cdef float* _free_spare(self) except? NULL
    cdef void _swap(self) noexcept
    cdef float* writable(self) except? NULL
    cdef float* step_target(self) except? NULL
    cdef void step_done(self, float* target) noexcept
