# The op table: one record per op (see OpDef in runtime/nodes.pxd), indexed by op id.
from autobatch.runtime.nodes cimport OpDef
from autobatch.runtime.op_ids cimport *

cdef const OpDef* op_table() noexcept nogil
cdef int n_ops() noexcept nogil         # N_FIXED_OPS + the API's unary ops of kernels/elementwise.h
