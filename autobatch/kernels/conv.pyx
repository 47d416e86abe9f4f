# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Batched conv2d / maxpooling2d kernels with DyNet's semantics, on raw float arrays.

DyNet's rules, checked against DyNet itself (the dyNET38 2.2 wheel) and its
nodes-conv2d.cc / nodes-maxpooling2d.cc:

- Layout: image (H, W, C), element (h, w, c) at h + H*(w + W*c); filter
  (KH, KW, C, C_out); output (OH, OW, C_out). conv2d is a cross-correlation (no flip):
  y(i, j, o) = sum f(kh, kw, c, o) x(i*sh + kh - pad_top, j*sw + kw - pad_left, c).
- VALID: OH = ceil((H - KH + 1) / sh), no padding; KH > H is an error.
- SAME: OH = ceil(H / sh); padding total = max(0, (OH - 1)*sh + KH - H), pad_top =
  total // 2, so an odd remainder goes to the bottom (right); KH > H is allowed.
  Same rules, same padding, for maxpooling2d's window.
- maxpooling2d SAME pads with the lowest finite float (-FLT_MAX, Eigen's padding
  value), not -inf: a window that overlaps the padding is never below -FLT_MAX.
  The forward max starts from -inf and NaNs never win (an all-NaN window gives -inf).
- Max-pooling gradient: all of it goes to one element, the first in-image element of
  the window scanned rows (h) outer, columns (w) inner, replaced only by a strictly
  greater value; so on ties the smallest h, then the smallest w wins (and a NaN
  first in its window keeps the gradient, though the value ignores it).
- Deliberate difference: when SAME's unclamped padding total is <= -2 (kernel smaller
  than the stride, e.g. H=6, KH=1, sh=3), DyNet's backward uses pad_top = total/2 < 0
  while its forward clamps to 0: its filter gradient and its max-pooling input
  gradient are then those of a shifted window. We return the gradient of the
  forward DyNet computes (its conv2d input gradient and bias gradient are right).
- Output sizes are exact integer arithmetic here; DyNet computes them in float.

Batching: n images with one geometry and one shared filter run as one sgemm. The
patches of all images form one column-major (n*OH*OW) x (KH*KW*C) matrix whose rows
are (image, oh, ow) and whose columns (kh, kw, c) follow the filter's memory order, so
the filter is used in place as the K x C_out right operand, im2col copies a run of
output rows per (column, image, ow) (contiguous reads when sh == 1), and image i's
output channel o is one contiguous run of the product (rows i*OH*OW onward of column
o): one copy per (image, channel), which also adds the bias. With n == 1 the product
lands in y directly, and a 1x1 stride-1 kernel uses the image itself as the patch
matrix.
"""
from libc.stdint cimport int32_t, int64_t, INT32_MAX, uintptr_t
from libc.string cimport memcpy, memset
from libc.float cimport FLT_MAX
from libc.math cimport INFINITY
from scipy.linalg.cython_blas cimport sgemm, sgemv


# scratch beyond this many floats is refused: its byte count must still fit int64
cdef int64_t MAX_SCRATCH_FLOATS = (<int64_t>1) << 60

# ------------------------------------------------------------ geometry ----

cdef inline int64_t _mul_capped(int64_t a, int64_t b) noexcept nogil:
    """a * b, or INT32_MAX + 1 once it exceeds INT32_MAX. Inputs are <= INT32_MAX + 1,
    so the 64-bit product cannot overflow."""
    cdef int64_t p = a * b
    return p if p <= INT32_MAX else <int64_t>INT32_MAX + 1

cdef int _geom(ConvGeom* g, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW,
               int64_t C_out, int64_t sh, int64_t sw, bint is_valid,
               bint has_filter) noexcept nogil:
    cdef int64_t total
    memset(g, 0, sizeof(ConvGeom))
    if H < 1 or W < 1 or C < 1 or KH < 1 or KW < 1 or C_out < 1 or sh < 1 or sw < 1:
        return GEOM_BAD_ARG
    if (H > INT32_MAX or W > INT32_MAX or C > INT32_MAX or KH > INT32_MAX
            or KW > INT32_MAX or C_out > INT32_MAX or sh > INT32_MAX or sw > INT32_MAX):
        return GEOM_TOO_LARGE
    if is_valid and (KH > H or KW > W):
        return GEOM_FILTER_TOO_BIG
    g.H, g.W, g.C, g.KH, g.KW, g.C_out = H, W, C, KH, KW, C_out
    g.stride_h, g.stride_w = sh, sw
    if is_valid:
        g.OH = (H - KH) // sh + 1
        g.OW = (W - KW) // sw + 1
    else:
        g.OH = (H + sh - 1) // sh
        g.OW = (W + sw - 1) // sw
        # DyNet (Eigen) clamps a negative total to 0 in forward; see the docstring
        total = (g.OH - 1) * sh + KH - H
        g.pad_top = total // 2 if total > 0 else 0
        total = (g.OW - 1) * sw + KW - W
        g.pad_left = total // 2 if total > 0 else 0
    # every array a kernel indexes, and the patch length, stays below 2**31 elements
    # (BLAS takes int dimensions; argmax offsets are int32)
    if (_mul_capped(_mul_capped(H, W), C) > INT32_MAX
            or _mul_capped(_mul_capped(g.OH, g.OW), C_out) > INT32_MAX
            or _mul_capped(_mul_capped(KH, KW), C) > INT32_MAX
            or (has_filter and _mul_capped(_mul_capped(_mul_capped(KH, KW), C), C_out)
                > INT32_MAX)):
        memset(g, 0, sizeof(ConvGeom))
        return GEOM_TOO_LARGE
    return GEOM_OK

cdef int conv_geom(ConvGeom* g, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW,
                   int64_t C_out, int64_t stride_h, int64_t stride_w,
                   bint is_valid) noexcept nogil:
    return _geom(g, H, W, C, KH, KW, C_out, stride_h, stride_w, is_valid, True)

cdef int pool_geom(ConvGeom* g, int64_t H, int64_t W, int64_t C, int64_t KH, int64_t KW,
                   int64_t stride_h, int64_t stride_w, bint is_valid) noexcept nogil:
    return _geom(g, H, W, C, KH, KW, C, stride_h, stride_w, is_valid, False)

# ------------------------------------------------------------- scratch ----

cdef inline bint _pointwise(const ConvGeom* g) noexcept nogil:
    """1x1 kernel, stride 1 (hence no padding): the image is its own patch matrix."""
    return g.KH == 1 and g.KW == 1 and g.stride_h == 1 and g.stride_w == 1

cdef inline int64_t _rows(const ConvGeom* g, int64_t n) noexcept nogil:
    """n * OH * OW, the patch matrix's row count, or -1 if it exceeds a BLAS int."""
    cdef int64_t P = g.OH * g.OW
    if n > INT32_MAX // P:
        return -1
    return n * P

cdef inline int64_t _scratch(int64_t nP, int64_t patches, int64_t products) noexcept nogil:
    """nP * (patches + products) floats, -1 past MAX_SCRATCH_FLOATS."""
    if nP < 0 or patches + products > MAX_SCRATCH_FLOATS // nP:
        return -1
    return nP * (patches + products)

cdef int64_t conv2d_fwd_scratch(const ConvGeom* g, int64_t n) noexcept nogil:
    # [patch matrix nP x K, unless pointwise with n == 1][product nP x C_out, if n > 1]
    if n < 1:
        return 0
    cdef int64_t K = g.KH * g.KW * g.C
    return _scratch(_rows(g, n), 0 if (n == 1 and _pointwise(g)) else K,
                    g.C_out if n > 1 else 0)

cdef int64_t conv2d_bwd_scratch(const ConvGeom* g, int64_t n, bint need_dx,
                                bint need_df) noexcept nogil:
    # [dy gathered nP x C_out, if n > 1][patches for df, then their gradient for dx,
    # one after the other in the same nP x K block]
    if n < 1:
        return 0
    cdef int64_t K = g.KH * g.KW * g.C
    cdef bint patches = (need_dx or need_df) and not (n == 1 and _pointwise(g))
    return _scratch(_rows(g, n), K if patches else 0, g.C_out if n > 1 else 0)

cdef int64_t maxpool2d_argmax_size(const ConvGeom* g, int64_t n) noexcept nogil:
    return n * g.OH * g.OW * g.C

# ---------------------------------------------------------------- BLAS ----

cdef inline void _gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* A,
                       int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                       int64_t ldc) noexcept nogil:
    """Column-major C = op(A) op(B) + beta C; every size already checked to fit an int.
    One output column goes to gemv: sgemm would pack the whole of A for it."""
    cdef int im = <int>m, in_ = <int>n, ik = <int>k, ilda = <int>lda, ildb = <int>ldb
    cdef int ildc = <int>ldc, inc = 1
    cdef float one = 1.0
    if n == 1:
        inc = 1 if tb == b'N' else ildb
        if ta == b'N':
            sgemv(&ta, &im, &ik, &one, <float*>A, &ilda, <float*>B, &inc, &beta, C, &in_)
        else:
            sgemv(&ta, &ik, &im, &one, <float*>A, &ilda, <float*>B, &inc, &beta, C, &in_)
        return
    sgemm(&ta, &tb, &im, &in_, &ik, &one, <float*>A, &ilda, <float*>B, &ildb, &beta,
          C, &ildc)

# -------------------------------------------------------- im2col/col2im ----

cdef inline int64_t _floor_div(int64_t a, int64_t b) noexcept nogil:
    """floor(a / b) for b > 0 (C division truncates toward zero)."""
    cdef int64_t q = a // b
    if a % b != 0 and a < 0:
        q -= 1
    return q

cdef inline void _inside(int64_t k, int64_t pad, int64_t stride, int64_t size,
                         int64_t nout, int64_t* lo, int64_t* hi) noexcept nogil:
    """The outputs o in [lo, hi) whose kernel offset k reads inside the image:
    0 <= o*stride + k - pad < size. Computed once per offset, so the copy loops
    below have no bounds tests."""
    lo[0] = -_floor_div(k - pad, stride)
    if lo[0] < 0:
        lo[0] = 0
    hi[0] = _floor_div(size - 1 + pad - k, stride) + 1
    if hi[0] > nout:
        hi[0] = nout
    if hi[0] < lo[0]:
        hi[0] = lo[0]

cdef void _im2col(const ConvGeom* g, int64_t n, float** x, float* pm) noexcept nogil:
    """pm[(i*OH*OW + oh + OH*ow) + nP*(kh + KH*(kw + KW*c))] = x[i](oh*sh + kh - pad_top,
    ow*sw + kw - pad_left, c), or 0 where that falls in the padding."""
    cdef int64_t OH = g.OH, OW = g.OW, H = g.H, sh = g.stride_h
    cdef int64_t nP = n * OH * OW
    cdef int64_t c, kw, kh, i, ow, oh, hlo, hhi, wlo, whi, dh
    cdef float* col = pm
    cdef float* d
    cdef const float* xcol
    for c in range(g.C):
        for kw in range(g.KW):
            _inside(kw, g.pad_left, g.stride_w, g.W, OW, &wlo, &whi)
            for kh in range(g.KH):
                _inside(kh, g.pad_top, sh, H, OH, &hlo, &hhi)
                dh = kh - g.pad_top
                for i in range(n):
                    for ow in range(OW):
                        d = col + i * OH * OW + OH * ow
                        if ow < wlo or ow >= whi:
                            memset(d, 0, OH * sizeof(float))
                            continue
                        xcol = x[i] + H * (ow * g.stride_w + kw - g.pad_left + g.W * c)
                        memset(d, 0, hlo * sizeof(float))
                        if sh == 1:
                            memcpy(d + hlo, xcol + hlo + dh, (hhi - hlo) * sizeof(float))
                        else:
                            for oh in range(hlo, hhi):
                                d[oh] = xcol[oh * sh + dh]
                        memset(d + hhi, 0, (OH - hhi) * sizeof(float))
                col += nP

cdef void _col2im_add(const ConvGeom* g, int64_t n, const float* dpm,
                      float** dx) noexcept nogil:
    """The adjoint of _im2col: dx[i] += every patch entry read from it (padding dropped)."""
    cdef int64_t OH = g.OH, OW = g.OW, H = g.H, sh = g.stride_h
    cdef int64_t nP = n * OH * OW
    cdef int64_t c, kw, kh, i, ow, oh, hlo, hhi, wlo, whi, dh
    cdef const float* col = dpm
    cdef const float* d
    cdef float* xcol
    for c in range(g.C):
        for kw in range(g.KW):
            _inside(kw, g.pad_left, g.stride_w, g.W, OW, &wlo, &whi)
            for kh in range(g.KH):
                _inside(kh, g.pad_top, sh, H, OH, &hlo, &hhi)
                dh = kh - g.pad_top
                for i in range(n):
                    if dx[i] == NULL:
                        continue
                    for ow in range(wlo, whi):
                        d = col + i * OH * OW + OH * ow
                        xcol = dx[i] + H * (ow * g.stride_w + kw - g.pad_left + g.W * c)
                        for oh in range(hlo, hhi):
                            xcol[oh * sh + dh] += d[oh]
                col += nP

# ---------------------------------------------------------------- conv ----

cdef int conv2d_fwd(const ConvGeom* g, int64_t n, float** x, const float* f,
                    const float* bias, float** y, float* scratch) noexcept nogil:
    cdef int64_t P = g.OH * g.OW, K = g.KH * g.KW * g.C, CO = g.C_out
    cdef int64_t nP = n * P, i, o, p
    cdef float* pm
    cdef float* z
    cdef float* yo
    cdef const float* zo
    cdef float b
    if n < 1:
        return 0
    if conv2d_fwd_scratch(g, n) < 0:
        return -1
    if n == 1 and _pointwise(g):
        pm = x[0]
    else:
        pm = scratch
        _im2col(g, n, x, pm)
    if n == 1:
        _gemm(b'N', b'N', P, CO, K, pm, P, f, K, 0.0, y[0], P)
        if bias != NULL:
            for o in range(CO):
                yo = y[0] + o * P
                b = bias[o]
                for p in range(P):
                    yo[p] += b
        return 0
    z = scratch + nP * K
    _gemm(b'N', b'N', nP, CO, K, pm, nP, f, K, 0.0, z, nP)
    # rows i*P .. i*P + P of column o are image i's channel o: one run per (i, o)
    for i in range(n):
        for o in range(CO):
            yo = y[i] + o * P
            zo = z + i * P + o * nP
            b = bias[o] if bias != NULL else 0.0
            for p in range(P):
                yo[p] = zo[p] + b
    return 0

cdef int conv2d_bwd(const ConvGeom* g, int64_t n, float** x, const float* f, float** dy,
                    float** dx, float* df, float* db, float* scratch) noexcept nogil:
    cdef int64_t P = g.OH * g.OW, K = g.KH * g.KW * g.C, CO = g.C_out
    cdef int64_t nP = n * P, i, o, r
    cdef bint any_dx = False, direct = n == 1 and _pointwise(g)
    cdef float* dz
    cdef float* pm
    cdef double s
    if n < 1:
        return 0
    if dx != NULL:
        for i in range(n):
            any_dx = any_dx or dx[i] != NULL
    if conv2d_bwd_scratch(g, n, any_dx, df != NULL) < 0:
        return -1
    # dz: the output gradients as the nP x C_out matrix the forward product produced
    if n == 1:
        dz = dy[0]
        pm = scratch
    else:
        dz = scratch
        pm = scratch + nP * CO
        for i in range(n):
            for o in range(CO):
                memcpy(dz + i * P + o * nP, dy[i] + o * P, P * sizeof(float))
    if db != NULL:
        for o in range(CO):
            s = 0.0  # double: a sum over every position of every image
            for r in range(nP):
                s += dz[r + o * nP]
            db[o] += <float>s
    if df != NULL:
        if direct:
            pm = x[0]
        else:
            _im2col(g, n, x, pm)
        _gemm(b'T', b'N', K, CO, nP, pm, nP, dz, nP, 1.0, df, K)
    if any_dx:
        if direct:
            _gemm(b'N', b'T', P, K, CO, dz, P, f, K, 1.0, dx[0], P)
        else:
            # the patches for df are no longer needed: their gradient reuses the block
            _gemm(b'N', b'T', nP, K, CO, dz, nP, f, K, 0.0, pm, nP)
            _col2im_add(g, n, pm, dx)
    return 0

# ------------------------------------------------------------- maxpool ----

cdef void maxpool2d_fwd(const ConvGeom* g, int64_t n, float** x, float** y,
                        int32_t* argmax) noexcept nogil:
    cdef int64_t H = g.H, W = g.W, OH = g.OH, OW = g.OW
    cdef int64_t S = OH * OW * g.C, i, c, ow, oh, h, w, h0, h1, w0, w1, at, best_at
    cdef const float* plane
    cdef float v, val, best
    cdef bint clipped
    for i in range(n):
        for c in range(g.C):
            plane = x[i] + H * W * c
            for ow in range(OW):
                w0 = ow * g.stride_w - g.pad_left
                w1 = min(w0 + g.KW, W)
                w0 = max(w0, 0)
                for oh in range(OH):
                    h0 = oh * g.stride_h - g.pad_top
                    h1 = min(h0 + g.KH, H)
                    h0 = max(h0, 0)
                    clipped = h1 - h0 < g.KH or w1 - w0 < g.KW
                    # two maxima, as DyNet has: the value its forward (Eigen) returns,
                    # from -inf where a NaN never wins, and the element its backward
                    # picks, from the first element; they differ only on NaN and -inf.
                    # Rows outer, columns inner: DyNet's order, which decides ties.
                    val = -INFINITY
                    best_at = h0 + H * w0
                    best = plane[best_at]
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            at = h + H * w
                            v = plane[at]
                            if v > val:
                                val = v
                            if v > best:
                                best = v
                                best_at = at
                    if clipped and val < -FLT_MAX:
                        val = -FLT_MAX  # the padding value takes part in the max
                    y[i][oh + OH * (ow + OW * c)] = val
                    if argmax != NULL:
                        argmax[i * S + oh + OH * (ow + OW * c)] = <int32_t>(best_at + H * W * c)

cdef void maxpool2d_bwd(const ConvGeom* g, int64_t n, float** dy, const int32_t* argmax,
                        float** dx) noexcept nogil:
    cdef int64_t S = g.OH * g.OW * g.C, i, j
    cdef const int32_t* am
    for i in range(n):
        if dx[i] == NULL:
            continue
        am = argmax + i * S
        for j in range(S):
            dx[i][am[j]] += dy[i][j]
