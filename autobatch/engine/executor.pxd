# Running batches forward, and the log of what ran (read by backward and statistics).
from libc.stdint cimport int32_t, int64_t, uint8_t
from autobatch.runtime.nodes cimport Batch

ctypedef struct BatchLog:
    int32_t* ids            # node ids of every batch run, in order
    int64_t n_ids, cap_ids
    int64_t* at             # batch k: ids[at[k] : at[k] + count[k]]
    int32_t* count
    uint8_t* chained        # batch k is a fused stage of the chain that batch k - 1 is in
    int64_t n, cap          # batches

cdef int run_batch(BatchLog* log, Batch* ctx, int32_t* ids, int n, bint check_validity) except -1
cdef int32_t* log_stage(BatchLog* log, const int32_t* ids, int n) except NULL
cdef int check_finite(Batch* b, float* block, int64_t count) except -1
cdef void log_reset(BatchLog* log) noexcept nogil
cdef void log_free(BatchLog* log) noexcept nogil
