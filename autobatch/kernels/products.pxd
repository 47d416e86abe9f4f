# Matrix products.
from autobatch.runtime.nodes cimport Batch
from autobatch.runtime.memory cimport Arena
from autobatch.runtime.profile cimport Profile

cdef void matmul_fwd(Batch* b) noexcept nogil
cdef void matmul_bwd(Batch* b) noexcept nogil
cdef void affine_fwd(Batch* b) noexcept nogil
cdef void affine_bwd(Batch* b) noexcept nogil
