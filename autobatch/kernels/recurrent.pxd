# Fused LSTM cells.
from autobatch.runtime.nodes cimport Batch

cdef void lstm_gates_fwd(Batch* b) noexcept nogil
cdef void lstm_gates_bwd(Batch* b) noexcept nogil
cdef void lstm_cell_fwd(Batch* b) noexcept nogil
cdef void lstm_cell_bwd(Batch* b) noexcept nogil
cdef void lstm_hidden_fwd(Batch* b) noexcept nogil
cdef void lstm_hidden_bwd(Batch* b) noexcept nogil
