# Weight gradients of a backward, at once or postponed (kernels/weight_grads.pyx).
from autobatch.runtime.memory cimport Arena
from autobatch.runtime.nodes cimport WeightGrads
from autobatch.runtime.profile cimport Profile

cdef int weight_grads_start(WeightGrads* d, int cap, bint share) noexcept nogil
cdef void weight_grads_free(WeightGrads* d) noexcept nogil
cdef void weight_grad_gemm(Arena* scratch, Profile* prof, int r, int k, int M,
                           float* dY, float* X, float beta, float* dW) noexcept nogil
cdef bint postpone_weight_grad(WeightGrads* d, float* dW, float* dY, float* X, int r, int k,
                               int m) noexcept nogil
cdef void flush_weight_grads(WeightGrads* d, Arena* scratch, Profile* prof) noexcept nogil
