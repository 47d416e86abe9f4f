# Running batches forward, and the log of what ran (read by backward and statistics).
from libc.stdint cimport int32_t, int64_t
from autobatch._nodes cimport Batch

ctypedef struct BatchLog:
    int32_t* ids            # node ids of every batch run, in order
    int64_t n_ids, cap_ids
    int64_t* at             # batch k: ids[at[k] : at[k] + count[k]]
    int32_t* count
    int64_t n, cap          # batches

cdef int run_batch(BatchLog* log, Batch* ctx, int32_t* ids, int n, bint check_validity) except -1
cdef void log_reset(BatchLog* log) noexcept nogil
cdef void log_free(BatchLog* log) noexcept nogil
