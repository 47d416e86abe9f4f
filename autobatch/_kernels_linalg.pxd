# Linear algebra: inverse and log-determinant (LAPACK), 3-d tensor contractions.
from autobatch._nodes cimport Batch

cdef void inverse_fwd(Batch* b) noexcept nogil
cdef void inverse_bwd(Batch* b) noexcept nogil
cdef void logdet_fwd(Batch* b) noexcept nogil
cdef void logdet_bwd(Batch* b) noexcept nogil
cdef void contract3d_1d_fwd(Batch* b) noexcept nogil
cdef void contract3d_1d_bwd(Batch* b) noexcept nogil
cdef void contract3d_1d_1d_fwd(Batch* b) noexcept nogil
cdef void contract3d_1d_1d_bwd(Batch* b) noexcept nogil
