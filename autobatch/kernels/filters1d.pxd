# Sequence filters over the columns of a matrix, and circular convolution/correlation.
from autobatch.runtime.nodes cimport Batch

cdef void kmh_ngram_fwd(Batch* b) noexcept nogil
cdef void kmh_ngram_bwd(Batch* b) noexcept nogil
cdef void filter1d_fwd(Batch* b) noexcept nogil
cdef void filter1d_bwd(Batch* b) noexcept nogil
cdef void circ_fwd(Batch* b) noexcept nogil
cdef void circ_bwd(Batch* b) noexcept nogil
