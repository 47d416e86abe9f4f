# Reductions.
from autobatch.runtime.nodes cimport Batch

cdef void reduce_fwd(Batch* b) noexcept nogil
cdef void reduce_bwd(Batch* b) noexcept nogil
cdef void pair_reduce_fwd(Batch* b) noexcept nogil
cdef void pair_reduce_bwd(Batch* b) noexcept nogil
cdef void extreme_dim_fwd(Batch* b) noexcept nogil
cdef void recorded_positions_bwd(Batch* b) noexcept nogil
cdef void argmax_fwd(Batch* b) noexcept nogil
cdef void argmax_bwd(Batch* b) noexcept nogil
cdef void sum_dim_fwd(Batch* b) noexcept nogil
cdef void sum_dim_bwd(Batch* b) noexcept nogil
cdef void sum_batches_fwd(Batch* b) noexcept nogil
cdef void sum_batches_bwd(Batch* b) noexcept nogil
cdef void std_dim_fwd(Batch* b) noexcept nogil
cdef void std_dim_bwd(Batch* b) noexcept nogil
