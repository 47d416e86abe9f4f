# Weights packed once per pass for the products (kernels/gemm_packed.h): the cache a graph
# owns, and the gemm that uses it.
from autobatch.runtime.memory cimport Arena
from autobatch.runtime.profile cimport Profile

# op(A) of one weight, packed into panels of mr rows
ctypedef struct PackEntry:
    const float* src    # the weight's values (a parameter's storage)
    char ta             # 'N': op(A) = A, 'T': op(A) = A^T
    int m, k, lda       # op(A) is m x k
    int mr
    float* panels

# Valid for one pass of the engine only (see kernels/packed.pyx): packs_begin forgets it all.
ctypedef struct PackCache:
    Arena mem           # the panels; capacity kept from pass to pass
    PackEntry* items
    int n, cap

cdef void packs_begin(PackCache* c) noexcept nogil
cdef void packs_free(PackCache* c) noexcept nogil
cdef bint packed_gemm(PackCache* c, Profile* prof, char ta, int m, int n, int k,
                      const float* A, int lda, const float* B, int ldb, float beta,
                      float* C, int ldc) noexcept nogil
cdef bint packed_weight_grad(Arena* scratch, Profile* prof, int m, int n, int k,
                             const float* dY, const float* X, float beta,
                             float* dW) noexcept nogil
