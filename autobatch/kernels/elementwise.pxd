# Elementwise kernels (unary/binary math of kernels/elementwise.h, broadcasting, dropout, noise, sums).
from autobatch.runtime.nodes cimport Batch, ab_unary_fwd, ab_unary_bwd, ab_binary_fwd, ab_binary_bwd

cdef void unary_fwd(Batch* b) noexcept nogil
cdef void unary_bwd(Batch* b) noexcept nogil
cdef void binary_fwd(Batch* b) noexcept nogil
cdef void binary_bwd(Batch* b) noexcept nogil
cdef void no_bwd(Batch* b) noexcept nogil
cdef void dropout_fwd(Batch* b) noexcept nogil
cdef void dropout_bwd(Batch* b) noexcept nogil
cdef void dropout_dim_fwd(Batch* b) noexcept nogil
cdef void noise_fwd(Batch* b) noexcept nogil
cdef void esum_fwd(Batch* b) noexcept nogil
cdef void esum_bwd(Batch* b) noexcept nogil
cdef void logsumexp_fwd(Batch* b) noexcept nogil
cdef void logsumexp_bwd(Batch* b) noexcept nogil

# the lines of kernels/elementwise.h, by name; the API's unary ops as data
cdef extern from "elementwise.h" nogil:
    int ab_find_unary(const char* name, ab_unary_fwd* fwd, ab_unary_bwd* bwd)
    int ab_find_binary(const char* name, ab_binary_fwd* fwd, ab_binary_bwd* bwd_x, ab_binary_bwd* bwd_y)
    ctypedef struct ab_unary_info:      # a line of AB_UNARY_OPS
        const char* name
        const char* attr                # keyword of the constant A; "_": none
        float attr_default
        ab_unary_fwd fwd
        ab_unary_bwd bwd
        const char* fwd_text            # FWD and DERIV of the line, as text
        const char* deriv_text
    const ab_unary_info* ab_unary_api
    const char* ab_simd_level()
    int AB_UNARY_API_COUNT
