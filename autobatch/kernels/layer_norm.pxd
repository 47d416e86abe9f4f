# Normalisation kernels: layer_norm.
from autobatch.runtime.nodes cimport Batch

cdef void layer_norm_fwd(Batch* b) noexcept nogil
cdef void layer_norm_bwd(Batch* b) noexcept nogil
