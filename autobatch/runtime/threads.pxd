# The engine's threads (dy.set_num_threads): a pool that runs chunks of a kernel on
# the calling thread and its workers, and gemm split over it.
ctypedef void (*ChunkFn)(void* ctx, int chunk) noexcept nogil

cdef void pool_run(ChunkFn fn, void* ctx, int chunks) noexcept nogil
cdef int pool_threads() noexcept nogil
cdef bint split_worthwhile(int nodes, int per_node) noexcept nogil   # a batch's elementwise work
cdef bint gemm_split_worthwhile(int m, int n, int k) noexcept nogil  # a product's
cdef void gemm_threaded(char ta, char tb, int m, int n, int k, float alpha,
                        float* A, int lda, float* B, int ldb, float beta,
                        float* C, int ldc) noexcept nogil
