# Elementwise kernels (unary/binary math of kernels/elementwise.h, broadcasting, dropout, noise, sums).
from autobatch.runtime.nodes cimport Batch

cdef void unary_fwd(Batch* b) noexcept nogil
cdef void unary_bwd(Batch* b) noexcept nogil
cdef void binary_fwd(Batch* b) noexcept nogil
cdef void binary_bwd(Batch* b) noexcept nogil
cdef void no_bwd(Batch* b) noexcept nogil
cdef void dropout_fwd(Batch* b) noexcept nogil
cdef void dropout_bwd(Batch* b) noexcept nogil
cdef void dropout_dim_fwd(Batch* b) noexcept nogil
cdef void noise_fwd(Batch* b) noexcept nogil
cdef void esum_fwd(Batch* b) noexcept nogil
cdef void esum_bwd(Batch* b) noexcept nogil
cdef void logsumexp_fwd(Batch* b) noexcept nogil
cdef void logsumexp_bwd(Batch* b) noexcept nogil
