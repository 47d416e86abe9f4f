# Selections: rows or columns by index lists, strided ranges, k-max pooling.
from autobatch.runtime.nodes cimport Batch

cdef void select_fwd(Batch* b) noexcept nogil
cdef void select_bwd(Batch* b) noexcept nogil
cdef void strided_fwd(Batch* b) noexcept nogil
cdef void strided_bwd(Batch* b) noexcept nogil
cdef void kmax_fwd(Batch* b) noexcept nogil
