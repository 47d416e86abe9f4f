# Sparse relatives of softmax: sparsemax and constrained softmax.
from autobatch.runtime.nodes cimport Batch

cdef void sparsemax_fwd(Batch* b) noexcept nogil
cdef void sparsemax_bwd(Batch* b) noexcept nogil
cdef void csoftmax_fwd(Batch* b) noexcept nogil
cdef void csoftmax_bwd(Batch* b) noexcept nogil
