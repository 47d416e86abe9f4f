# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""numpy entry points to the raw convolution kernels of kernels/conv.pyx, for the
kernel-level tests (tests/test_conv_kernels.py); the engine never uses them."""
from libc.stdint cimport int32_t, int64_t, INT32_MAX, uintptr_t
from libc.string cimport memcpy, memset

import numpy as np

from autobatch.kernels.conv cimport *

# ------------------------------------------- numpy entry points (tests only) ----
# They allocate with numpy what the engine takes from its arena, and fill outputs and
# scratch with NaN first, so a kernel that skips an element or reads scratch it did not
# write shows up in the result.

cdef inline float* _fptr(a):
    return NULL if a is None else <float*><uintptr_t>a.ctypes.data

def _f32(a, int ndim, name):
    """a as a Fortran-ordered float32 array (the same object when it already is one)."""
    a = np.asfortranarray(a, dtype=np.float32)
    if a.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {a.shape}")
    return a

def _pointers(arrays):
    """A uintp array of data pointers; None becomes NULL."""
    return np.array([0 if a is None else a.ctypes.data for a in arrays], dtype=np.uintp)

def _images(xs):
    xs = [_f32(x, 3, "image") for x in xs]
    if not xs:
        raise ValueError("at least one image")
    if any(x.shape != xs[0].shape for x in xs):
        raise ValueError("images of one batch share their shape")
    return xs

cdef ConvGeom _geom_or_raise(shape, kdims, int64_t C_out, stride, bint is_valid,
                             bint pool) except *:
    cdef ConvGeom g
    cdef int code
    H, W, C = shape
    if pool:
        code = pool_geom(&g, H, W, C, kdims[0], kdims[1], stride[0], stride[1], is_valid)
    else:
        code = conv_geom(&g, H, W, C, kdims[0], kdims[1], C_out, stride[0], stride[1],
                         is_valid)
    if code != GEOM_OK:
        raise ValueError(f"bad geometry (code {code})")
    return g

def _conv_geom_np(H, W, C, KH, KW, C_out, stride, is_valid, pool=False):
    """(return code, dict of the ConvGeom fields) of conv_geom / pool_geom."""
    cdef ConvGeom g
    cdef int code
    if pool:
        code = pool_geom(&g, H, W, C, KH, KW, stride[0], stride[1], is_valid)
    else:
        code = conv_geom(&g, H, W, C, KH, KW, C_out, stride[0], stride[1], is_valid)
    return code, g

def _conv_scratch_np(H, W, C, KH, KW, C_out, stride, is_valid, n, need_dx, need_df):
    """(forward, backward) scratch floats for n images, -1 when they cannot be one call."""
    cdef ConvGeom g = _geom_or_raise((H, W, C), (KH, KW), C_out, stride, is_valid, False)
    return conv2d_fwd_scratch(&g, n), conv2d_bwd_scratch(&g, n, need_dx, need_df)

def _conv2d_fwd_np(xs, f, bias, stride, is_valid):
    """conv2d (bias None) or conv2d_bias of each image: a list of (OH, OW, C_out) arrays."""
    xs = _images(xs)
    f = _f32(f, 4, "filter")
    if f.shape[2] != xs[0].shape[2]:
        raise ValueError("filter channels differ from image channels")
    if bias is not None:
        bias = _f32(bias, 1, "bias")
        if bias.shape[0] != f.shape[3]:
            raise ValueError("bias length differs from output channels")
    cdef ConvGeom g = _geom_or_raise(xs[0].shape, f.shape, f.shape[3], stride, is_valid, False)
    cdef int64_t n = len(xs)
    cdef int64_t need = conv2d_fwd_scratch(&g, n)
    if need < 0:
        raise ValueError("batch too large for one call")
    scratch = np.full(max(need, 1), np.nan, dtype=np.float32)
    ys = [np.full((g.OH, g.OW, g.C_out), np.nan, dtype=np.float32, order="F")
          for _ in range(n)]
    cdef uintptr_t[::1] xp = _pointers(xs), yp = _pointers(ys)
    cdef float* fp = _fptr(f)
    cdef float* bp = _fptr(bias)
    cdef float* sp = _fptr(scratch)
    cdef int rc
    with nogil:
        rc = conv2d_fwd(&g, n, <float**>&xp[0], fp, bp, <float**>&yp[0], sp)
    if rc != 0:
        raise ValueError("conv2d_fwd refused the batch")
    return ys

def _conv2d_bwd_np(xs, f, dys, stride, is_valid, dxs=None, df=None, db=None):
    """Accumulate into dxs (a list; None entries: not wanted), df and db (None: not
    wanted); returns (dxs, df, db) as accumulated."""
    xs = _images(xs)
    f = _f32(f, 4, "filter")
    cdef ConvGeom g = _geom_or_raise(xs[0].shape, f.shape, f.shape[3], stride, is_valid, False)
    cdef int64_t n = len(xs)
    dys = [_f32(d, 3, "dy") for d in dys]
    if len(dys) != n or any(d.shape != (g.OH, g.OW, g.C_out) for d in dys):
        raise ValueError("one (OH, OW, C_out) output gradient per image")
    if dxs is not None:
        dxs = [None if d is None else _f32(d, 3, "dx") for d in dxs]
        if len(dxs) != n or any(d is not None and d.shape != xs[0].shape for d in dxs):
            raise ValueError("one image-shaped gradient (or None) per image")
    if df is not None:
        df = _f32(df, 4, "df")
        if df.shape != f.shape:
            raise ValueError("df has the filter's shape")
    if db is not None:
        db = _f32(db, 1, "db")
        if db.shape[0] != g.C_out:
            raise ValueError("db has C_out elements")
    cdef int64_t need = conv2d_bwd_scratch(&g, n, dxs is not None and
                                           any(d is not None for d in dxs), df is not None)
    if need < 0:
        raise ValueError("batch too large for one call")
    scratch = np.full(max(need, 1), np.nan, dtype=np.float32)
    cdef uintptr_t[::1] xp = _pointers(xs), dyp = _pointers(dys)
    cdef uintptr_t[::1] dxp = _pointers(dxs if dxs is not None else [None] * n)
    cdef float** dxpp = NULL if dxs is None else <float**>&dxp[0]
    cdef float* fp = _fptr(f)
    cdef float* dfp = _fptr(df)
    cdef float* dbp = _fptr(db)
    cdef float* sp = _fptr(scratch)
    cdef int rc
    with nogil:
        rc = conv2d_bwd(&g, n, <float**>&xp[0], fp, <float**>&dyp[0], dxpp, dfp, dbp, sp)
    if rc != 0:
        raise ValueError("conv2d_bwd refused the batch")
    return dxs, df, db

def _maxpool_fwd_np(xs, ksize, stride, is_valid):
    """(list of pooled images, int32 argmax record of shape (n, OH*OW*C))."""
    xs = _images(xs)
    cdef ConvGeom g = _geom_or_raise(xs[0].shape, ksize, 0, stride, is_valid, True)
    cdef int64_t n = len(xs)
    ys = [np.full((g.OH, g.OW, g.C), np.nan, dtype=np.float32, order="F") for _ in range(n)]
    argmax = np.full((n, g.OH * g.OW * g.C), -1, dtype=np.int32)
    assert argmax.size == maxpool2d_argmax_size(&g, n)
    cdef uintptr_t[::1] xp = _pointers(xs), yp = _pointers(ys)
    cdef int32_t[:, ::1] am = argmax
    with nogil:
        maxpool2d_fwd(&g, n, <float**>&xp[0], <float**>&yp[0], &am[0, 0])
    return ys, argmax

def _maxpool_bwd_np(x_shape, ksize, stride, is_valid, argmax, dys, dxs):
    """Accumulate into dxs (None entries: not wanted) through the argmax record."""
    cdef ConvGeom g = _geom_or_raise(tuple(x_shape), ksize, 0, stride, is_valid, True)
    cdef int64_t n = len(dys)
    dys = [_f32(d, 3, "dy") for d in dys]
    dxs = [None if d is None else _f32(d, 3, "dx") for d in dxs]
    argmax = np.ascontiguousarray(argmax, dtype=np.int32)
    if (argmax.shape != (n, g.OH * g.OW * g.C) or len(dxs) != n
            or any(d.shape != (g.OH, g.OW, g.C) for d in dys)
            or any(d is not None and d.shape != tuple(x_shape) for d in dxs)):
        raise ValueError("shapes do not match the geometry")
    if n and (argmax.min() < 0 or argmax.max() >= g.H * g.W * g.C):
        raise ValueError("argmax offsets outside the image")
    cdef uintptr_t[::1] dyp = _pointers(dys), dxp = _pointers(dxs)
    cdef int32_t[:, ::1] am = argmax
    if n:
        with nogil:
            maxpool2d_bwd(&g, n, <float**>&dyp[0], &am[0, 0], <float**>&dxp[0])
    return dxs
