# Concatenation, picking, transposition, lookup rows.
from autobatch.runtime.nodes cimport Batch

cdef void concat_fwd(Batch* b) noexcept nogil
cdef void concat_bwd(Batch* b) noexcept nogil
cdef void concat_to_batch_fwd(Batch* b) noexcept nogil
cdef void concat_to_batch_bwd(Batch* b) noexcept nogil
cdef void pick_fwd(Batch* b) noexcept nogil
cdef void pick_bwd(Batch* b) noexcept nogil
cdef void pick_range_fwd(Batch* b) noexcept nogil
cdef void pick_range_bwd(Batch* b) noexcept nogil
cdef void pick_batch_fwd(Batch* b) noexcept nogil
cdef void pick_batch_bwd(Batch* b) noexcept nogil
cdef void transpose_fwd(Batch* b) noexcept nogil
cdef void transpose_bwd(Batch* b) noexcept nogil
cdef void lookup_batch_fwd(Batch* b) noexcept nogil
cdef void lookup_batch_bwd(Batch* b) noexcept nogil
