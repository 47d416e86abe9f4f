# The engine's threads (dy.set_num_threads): a pool that runs chunks of a kernel on
# the calling thread and its workers.
ctypedef void (*ChunkFn)(void* ctx, int chunk) noexcept nogil

cdef void pool_run(ChunkFn fn, void* ctx, int chunks) noexcept nogil
cdef int pool_threads() noexcept nogil
cdef bint split_worthwhile(int nodes, int per_node) noexcept nogil   # a batch's elementwise work
cdef bint gemm_split_worthwhile(int m, int n, int k) noexcept nogil  # a product's
