# DyNet's 3-d tensor contractions: contract3d_1d[_bias], contract3d_1d_1d[_bias].
from autobatch.runtime.nodes cimport Batch

cdef void contract3d_1d_fwd(Batch* b) noexcept nogil
cdef void contract3d_1d_bwd(Batch* b) noexcept nogil
cdef void contract3d_1d_1d_fwd(Batch* b) noexcept nogil
cdef void contract3d_1d_1d_bwd(Batch* b) noexcept nogil
