# The conv ops' batch kernels: the images of every node of a batch go to one call of
# the raw kernels of kernels/conv.pyx.
from autobatch.runtime.nodes cimport Batch

cdef void conv2d_batch_fwd(Batch* b) noexcept nogil
cdef void conv2d_batch_bwd(Batch* b) noexcept nogil
cdef void maxpool2d_batch_fwd(Batch* b) noexcept nogil
cdef void maxpool2d_batch_bwd(Batch* b) noexcept nogil
