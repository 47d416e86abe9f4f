# Matrix products and postponed weight gradients.
from autobatch.runtime.nodes cimport Batch, WeightGrads
from autobatch.runtime.memory cimport Arena
from autobatch.runtime.profile cimport Profile

cdef void matmul_fwd(Batch* b) noexcept nogil
cdef void matmul_bwd(Batch* b) noexcept nogil
cdef void affine_fwd(Batch* b) noexcept nogil
cdef void affine_bwd(Batch* b) noexcept nogil
cdef void flush_weight_grads(WeightGrads* d, Arena* scratch, Profile* prof) noexcept nogil
