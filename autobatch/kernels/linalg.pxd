# Linear algebra: inverse and log-determinant (LAPACK).
from autobatch.runtime.nodes cimport Batch

cdef void inverse_fwd(Batch* b) noexcept nogil
cdef void inverse_bwd(Batch* b) noexcept nogil
cdef void logdet_fwd(Batch* b) noexcept nogil
cdef void logdet_bwd(Batch* b) noexcept nogil
