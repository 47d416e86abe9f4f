# Batched 2-d convolution and max pooling on raw float arrays (DyNet's conv2d,
# conv2d_bias and maxpooling2d). Knows nothing of nodes or graphs: the engine hands
# in n same-geometry images as pointer arrays, one shared filter, and scratch memory.
from libc.stdint cimport int32_t, int64_t

# return codes of conv_geom / pool_geom (and -1 from the conv kernels: batch too large)
cdef enum:
    GEOM_OK = 0
    GEOM_BAD_ARG = -1         # a dimension or a stride < 1
    GEOM_FILTER_TOO_BIG = -2  # VALID and the filter is taller or wider than the image
    GEOM_TOO_LARGE = -3       # an image, patch or output exceeds 2**31 - 1 elements

# Shapes are DyNet's column-major: image (H, W, C), filter (KH, KW, C, C_out), output
# (OH, OW, C_out); for pooling KH x KW is the window and C_out == C.
ctypedef struct ConvGeom:
    int64_t H, W, C
    int64_t KH, KW
    int64_t stride_h, stride_w
    int64_t pad_top, pad_left   # rows/columns of padding before the image (SAME only)
    int64_t OH, OW, C_out

cdef int conv_geom(ConvGeom* g, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW,
                   int64_t C_out, int64_t stride_h, int64_t stride_w,
                   bint is_valid) noexcept nogil
cdef int pool_geom(ConvGeom* g, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW,
                   int64_t stride_h, int64_t stride_w, bint is_valid) noexcept nogil

# Scratch sizes in floats for a batch of n images; -1 when n images cannot be one call
# (n * OH * OW must fit a BLAS int): split the batch. Backward needs none of it when
# neither dx nor df is wanted and n == 1.
cdef int64_t conv2d_fwd_scratch(const ConvGeom* g, int64_t n) noexcept nogil
cdef int64_t conv2d_bwd_scratch(const ConvGeom* g, int64_t n, bint need_dx,
                                bint need_df) noexcept nogil
# int32 slots of the argmax record of maxpool2d_fwd (one per output element)
cdef int64_t maxpool2d_argmax_size(const ConvGeom* g, int64_t n) noexcept nogil

# y[i] = conv(x[i], f) (+ bias): n images, one sgemm. bias may be NULL. Returns 0, or
# -1 if conv2d_fwd_scratch(g, n) is -1 (nothing written).
cdef int conv2d_fwd(const ConvGeom* g, int64_t n, float** x, const float* f,
                    const float* bias, float** y, float* scratch) noexcept nogil
# Accumulates (+=) dx[i], df, db from dy[i]. dx, df, db may each be NULL (not wanted),
# and so may single dx[i]; x is read only when df is wanted. Returns 0, or -1 as above.
cdef int conv2d_bwd(const ConvGeom* g, int64_t n, float** x, const float* f, float** dy,
                    float** dx, float* df, float* db, float* scratch) noexcept nogil
# y[i] = maxpool(x[i]); argmax (may be NULL) receives, per output element, the offset
# of the winning input element within its image; image i's record starts at
# i * OH * OW * C.
cdef void maxpool2d_fwd(const ConvGeom* g, int64_t n, float** x, float** y,
                        int32_t* argmax) noexcept nogil
# dx[i][argmax] += dy[i] (dx[i] may be NULL)
cdef void maxpool2d_bwd(const ConvGeom* g, int64_t n, float** dy, const int32_t* argmax,
                        float** dx) noexcept nogil
