# Weights packed once per pass for the products (kernels/gemm_packed.h): the cache a graph
# owns, and the gemm that uses it.
from autobatch.runtime.memory cimport Arena
from autobatch.runtime.pack_cache cimport PackCache, PackEntry
from autobatch.runtime.profile cimport Profile


cdef void packs_begin(PackCache* c) noexcept nogil
cdef void packs_free(PackCache* c) noexcept nogil
cdef bint packed_gemm(PackCache* c, Profile* prof, char ta, int m, int n, int k,
                      const float* A, int lda, const float* B, int ldb, float beta,
                      float* C, int ldc) noexcept nogil
cdef bint packed_weight_grad(Arena* scratch, Profile* prof, int m, int n, int k,
                             const float* dY, const float* X, float beta,
                             float* dW) noexcept nogil
