# Ops along one dimension of each batch element: cumulative sums, logsumexp_dim.
from autobatch.runtime.nodes cimport Batch

cdef void cumsum_fwd(Batch* b) noexcept nogil
cdef void cumsum_bwd(Batch* b) noexcept nogil
cdef void logsumexp_dim_fwd(Batch* b) noexcept nogil
cdef void logsumexp_dim_bwd(Batch* b) noexcept nogil
