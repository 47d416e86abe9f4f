# Softmax and the losses built on it.
from autobatch.runtime.nodes cimport Batch

cdef void softmax_fwd(Batch* b) noexcept nogil
cdef void softmax_bwd(Batch* b) noexcept nogil
cdef void picknls_fwd(Batch* b) noexcept nogil
cdef void picknls_bwd(Batch* b) noexcept nogil
cdef void hinge_fwd(Batch* b) noexcept nogil
cdef void hinge_bwd(Batch* b) noexcept nogil
cdef void restricted_log_softmax_fwd(Batch* b) noexcept nogil
cdef void restricted_log_softmax_bwd(Batch* b) noexcept nogil
