"""Kernel-level tests of autobatch.kernels.conv (batched conv2d and maxpooling2d).

The references below are plain float64 numpy written from DyNet's rules (see the
module docstring of _kernels_conv), not from the kernels; their gradients are checked
by finite differences; a fixture recorded from DyNet itself pins the rules.
"""
import itertools
import json
import math
import os

import numpy as np
import pytest

from autobatch.kernels import conv_testing as K

FLT_MAX = float(np.finfo(np.float32).max)
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "conv_dynet.npz")


# ------------------------------------------------------------ references ----

def ref_geom(H, W, KH, KW, sh, sw, valid):
    """DyNet's dim_forward (float ceil) and Eigen's SAME padding, clamped at 0."""
    if valid:
        OH, OW = math.ceil((H - KH + 1) / sh), math.ceil((W - KW + 1) / sw)
        return OH, OW, 0, 0
    OH, OW = math.ceil(H / sh), math.ceil(W / sw)
    return OH, OW, max(0, (OH - 1) * sh + KH - H) // 2, max(0, (OW - 1) * sw + KW - W) // 2


def padded(x, KH, KW, sh, sw, valid, fill):
    """x inside a frame of `fill` large enough for every window; also the geometry."""
    H, W, C = x.shape
    OH, OW, pt, pl = ref_geom(H, W, KH, KW, sh, sw, valid)
    xp = np.full((pt + (OH - 1) * sh + KH + H, pl + (OW - 1) * sw + KW + W, C), fill)
    xp[pt:pt + H, pl:pl + W] = x
    return xp, OH, OW, pt, pl


def ref_conv(x, f, b, stride, valid):
    KH, KW, _, CO = f.shape
    xp, OH, OW, _, _ = padded(np.asarray(x, float), KH, KW, *stride, valid, 0.0)
    y = np.zeros((OH, OW, CO))
    for i, j in itertools.product(range(OH), range(OW)):
        win = xp[i * stride[0]:i * stride[0] + KH, j * stride[1]:j * stride[1] + KW]
        y[i, j] = np.einsum("hwc,hwco->o", win, f)
    return y if b is None else y + b


def ref_conv_bwd(x, f, dy, stride, valid):
    """(dx, df, db) of sum(dy * conv(x, f, b))."""
    H, W, _ = x.shape
    KH, KW, _, _ = f.shape
    xp, OH, OW, pt, pl = padded(np.asarray(x, float), KH, KW, *stride, valid, 0.0)
    dxp, df = np.zeros_like(xp), np.zeros(f.shape)
    for i, j in itertools.product(range(OH), range(OW)):
        rows = slice(i * stride[0], i * stride[0] + KH)
        cols = slice(j * stride[1], j * stride[1] + KW)
        dxp[rows, cols] += np.einsum("hwco,o->hwc", f, dy[i, j])
        df += np.einsum("hwc,o->hwco", xp[rows, cols], dy[i, j])
    return dxp[pt:pt + H, pl:pl + W], df, dy.sum(axis=(0, 1))


def ref_pool(x, ksize, stride, valid):
    """(pooled, dx of sum(dy * pooled) as a function of dy -> dx). Padding is -FLT_MAX;
    the gradient goes to the first maximum in row-major (h, then w) window order."""
    H, W, C = x.shape
    KH, KW = ksize
    xp, OH, OW, pt, pl = padded(np.asarray(x, float), KH, KW, *stride, valid, -FLT_MAX)
    inside = np.zeros(xp.shape[:2], bool)
    inside[pt:pt + H, pl:pl + W] = True
    y, winner = np.zeros((OH, OW, C)), {}
    for i, j, c in itertools.product(range(OH), range(OW), range(C)):
        rows = slice(i * stride[0], i * stride[0] + KH)
        cols = slice(j * stride[1], j * stride[1] + KW)
        y[i, j, c] = xp[rows, cols, c].max()
        vals = np.where(inside[rows, cols], xp[rows, cols, c], -np.inf)
        a, bb = np.unravel_index(np.argmax(vals), vals.shape)  # first maximum, C order
        winner[i, j, c] = (i * stride[0] + a - pt, j * stride[1] + bb - pl, c)

    def backward(dy):
        dx = np.zeros(x.shape)
        for key, at in winner.items():
            dx[at] += dy[key]
        return dx
    return y, backward


# ----------------------------------------------------------------- cases ----

def _case(H, W, C, KH, KW, CO, sh, sw, valid, n, bias):
    return dict(H=H, W=W, C=C, KH=KH, KW=KW, CO=CO, stride=(sh, sw), valid=valid, n=n,
                bias=bias)


def cases():
    picked = [
        _case(5, 5, 2, 1, 1, 3, 1, 1, True, 1, True),    # pointwise: no im2col, n == 1
        _case(4, 6, 3, 1, 1, 2, 1, 1, False, 4, True),   # pointwise, batched
        _case(7, 5, 2, 1, 1, 2, 2, 3, False, 3, False),  # 1x1, strided
        _case(6, 6, 2, 1, 2, 2, 3, 3, False, 2, True),   # SAME padding total < 0: clamped
        _case(7, 7, 1, 4, 4, 2, 3, 3, False, 2, True),   # even kernel, odd padding
        _case(4, 5, 2, 5, 6, 1, 1, 2, False, 3, True),   # kernel larger than the image
        _case(1, 1, 1, 1, 1, 1, 1, 1, True, 5, False),   # everything 1
        _case(1, 1, 3, 3, 3, 2, 2, 2, False, 2, True),   # 1x1 image, SAME 3x3
        _case(9, 8, 3, 3, 3, 4, 1, 1, True, 5, True),
        _case(9, 8, 3, 3, 3, 4, 1, 1, False, 5, True),
        _case(8, 9, 2, 2, 3, 1, 3, 2, True, 3, True),    # one output channel: gemv
        _case(6, 7, 1, 1, 1, 3, 1, 1, True, 1, False),   # K == 1 with C == 1
    ]
    rng = np.random.default_rng(20240601)
    drawn = []
    while len(drawn) < 120:
        H, W = rng.integers(1, 10, size=2)
        KH, KW = rng.integers(1, 6, size=2)
        sh, sw = rng.integers(1, 4, size=2)
        valid = bool(rng.random() < 0.5)
        if valid and (KH > H or KW > W):
            continue
        drawn.append(_case(int(H), int(W), int(rng.choice([1, 2, 3])), int(KH), int(KW),
                           int(rng.choice([1, 2, 4])), int(sh), int(sw), valid,
                           int(rng.integers(1, 6)), bool(rng.random() < 0.5)))
    return picked + drawn


CASES = cases()
IDS = ["{H}x{W}x{C}_k{KH}x{KW}x{CO}_s{stride[0]}{stride[1]}_{v}_n{n}".format(
    v="valid" if c["valid"] else "same", **c) for c in CASES]


def make(case, seed, integers=False):
    rng = np.random.default_rng(seed)
    draw = (lambda *s: rng.integers(-3, 4, size=s).astype(float)) if integers else \
        (lambda *s: rng.standard_normal(s))
    xs = [draw(case["H"], case["W"], case["C"]) for _ in range(case["n"])]
    f = draw(case["KH"], case["KW"], case["C"], case["CO"])
    b = draw(case["CO"]) if case["bias"] else None
    # float32 inputs; the float64 references see exactly the same numbers
    as32 = lambda a: None if a is None else np.asfortranarray(a, dtype=np.float32)
    return [as32(x) for x in xs], as32(f), as32(b), rng


def close(got, want, rtol=1e-5):
    want = np.asarray(want, float)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(1.0, np.abs(want).max()))


# ------------------------------------------------------------- geometry ----

@pytest.mark.parametrize("valid", [True, False])
def test_geometry_follows_dynet_formulas(valid):
    for H, KH, s in itertools.product(range(1, 12), range(1, 7), range(1, 5)):
        if valid and KH > H:
            continue
        code, g = K._conv_geom_np(H, 2 * H + 1, 3, KH, KH + 1, 2, (s, s + 1), valid)
        OH, OW, pt, pl = ref_geom(H, 2 * H + 1, KH, KH + 1, s, s + 1, valid)
        assert code == 0
        assert (g["OH"], g["OW"], g["pad_top"], g["pad_left"]) == (OH, OW, pt, pl)


def test_geometry_refuses_bad_and_huge_shapes():
    ok, too_big, bad, huge = 0, -2, -1, -3
    assert K._conv_geom_np(3, 3, 1, 4, 1, 1, (1, 1), True)[0] == too_big
    assert K._conv_geom_np(3, 3, 1, 4, 1, 1, (1, 1), False)[0] == ok
    for args in [(0, 3, 1, 1, 1, 1), (3, 3, 0, 1, 1, 1), (3, 3, 1, 1, 1, 0), (3, 3, 1, -1, 1, 1)]:
        assert K._conv_geom_np(*args, (1, 1), False)[0] == bad
    assert K._conv_geom_np(3, 3, 1, 1, 1, 1, (0, 1), False)[0] == bad
    assert K._conv_geom_np(2**31, 1, 1, 1, 1, 1, (1, 1), False)[0] == huge
    assert K._conv_geom_np(2**16, 2**15, 1, 1, 1, 1, (1, 1), False)[0] == huge   # image 2**31
    assert K._conv_geom_np(2**16, 2**15 - 1, 1, 1, 1, 1, (1, 1), True)[0] == ok
    assert K._conv_geom_np(2**62, 2**62, 2**62, 1, 1, 1, (1, 1), False)[0] == huge
    # output 2**31 elements from a small image, or a filter of 2**31 elements
    assert K._conv_geom_np(2**15, 2**15, 1, 1, 1, 2, (1, 1), False)[0] == huge
    assert K._conv_geom_np(4, 4, 2**11, 4, 4, 2**16, (1, 1), False)[0] == huge
    # pooling has no filter, and its output channels are the input's
    code, g = K._conv_geom_np(4, 4, 2**11, 4, 4, 0, (1, 1), False, pool=True)
    assert code == ok and g["C_out"] == 2**11


def test_scratch_sizes_and_batch_limit():
    # 40000 x 40000 1x1: one image fits a BLAS int, two do not (n * OH * OW > 2**31 - 1)
    assert K._conv_scratch_np(40000, 40000, 1, 1, 1, 1, (1, 1), True, 1, True, True) == (0, 0)
    assert K._conv_scratch_np(40000, 40000, 1, 1, 1, 1, (1, 1), True, 2, True, True) == (-1, -1)
    # 5x5x2, 3x3 VALID, 4 output channels: P = 9 positions, K = 18 patch entries
    fwd, bwd = K._conv_scratch_np(5, 5, 2, 3, 3, 4, (1, 1), True, 3, True, False)
    assert (fwd, bwd) == (27 * (18 + 4), 27 * (18 + 4))
    assert K._conv_scratch_np(5, 5, 2, 3, 3, 4, (1, 1), True, 1, False, False) == (9 * 18, 0)
    assert K._conv_scratch_np(5, 5, 2, 3, 3, 4, (1, 1), True, 3, False, False)[1] == 27 * 4


# ---------------------------------------------- reference gradient checks ----

def numeric_grad(fn, a, eps=1e-6):
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        old = a[idx]
        a[idx] = old + eps
        up = fn()
        a[idx] = old - eps
        down = fn()
        a[idx] = old
        g[idx] = (up - down) / (2 * eps)
    return g


@pytest.mark.parametrize("case", CASES[:8], ids=IDS[:8])
def test_reference_conv_gradient_is_the_derivative(case):
    case = dict(case, bias=True)
    xs, f, b, rng = make(case, 1)
    x, f, b = xs[0].astype(float), f.astype(float), b.astype(float)
    dy = rng.standard_normal(ref_conv(x, f, b, case["stride"], case["valid"]).shape)
    loss = lambda: float((ref_conv(x, f, b, case["stride"], case["valid"]) * dy).sum())
    dx, df, db = ref_conv_bwd(x, f, dy, case["stride"], case["valid"])
    for analytic, wrt in [(dx, x), (df, f), (db, b)]:
        np.testing.assert_allclose(analytic, numeric_grad(loss, wrt), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", CASES[:8], ids=IDS[:8])
def test_reference_pool_gradient_is_the_derivative(case):
    x = np.random.default_rng(2).standard_normal((case["H"], case["W"], case["C"]))
    win = (case["KH"], case["KW"])
    y, backward = ref_pool(x, win, case["stride"], case["valid"])
    dy = np.random.default_rng(3).standard_normal(y.shape)
    loss = lambda: float((ref_pool(x, win, case["stride"], case["valid"])[0] * dy).sum())
    # distinct values: the max is differentiable, small steps keep the winner
    np.testing.assert_allclose(backward(dy), numeric_grad(loss, x), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ conv ----

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv_forward(case):
    xs, f, b, _ = make(case, 10)
    ys = K._conv2d_fwd_np(xs, f, b, case["stride"], case["valid"])
    assert len(ys) == case["n"]
    for x, y in zip(xs, ys):
        assert y.dtype == np.float32 and y.flags.f_contiguous
        close(y, ref_conv(x, f.astype(float), b, case["stride"], case["valid"]))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv_backward_accumulates(case):
    xs, f, b, rng = make(case, 11)
    stride, valid = case["stride"], case["valid"]
    dys = [rng.standard_normal(ref_conv(x, f, None, stride, valid).shape).astype(np.float32)
           for x in xs]
    # gradients start non-zero: the kernels add to them
    dx0 = [rng.standard_normal(x.shape).astype(np.float32) for x in xs]
    df0 = rng.standard_normal(f.shape).astype(np.float32)
    db0 = rng.standard_normal(f.shape[3]).astype(np.float32)
    dxs, df, db = K._conv2d_bwd_np(xs, f, dys, stride, valid,
                                   [d.copy() for d in dx0], df0.copy(), db0.copy())
    want_df, want_db = df0.astype(float), db0.astype(float)
    for x, dy, d0, dx in zip(xs, dys, dx0, dxs):
        rdx, rdf, rdb = ref_conv_bwd(x, f.astype(float), dy, stride, valid)
        close(dx, d0 + rdx)
        want_df, want_db = want_df + rdf, want_db + rdb
    close(df, want_df)
    close(db, want_db)


@pytest.mark.parametrize("case", [c for c in CASES if c["n"] > 1][:20],
                         ids=[i for c, i in zip(CASES, IDS) if c["n"] > 1][:20])
def test_conv_batched_equals_single_calls(case):
    xs, f, b, rng = make(case, 12)
    stride, valid = case["stride"], case["valid"]
    ys = K._conv2d_fwd_np(xs, f, b, stride, valid)
    dys = [rng.standard_normal(y.shape).astype(np.float32) for y in ys]
    zeros = lambda: ([np.zeros_like(x) for x in xs], np.zeros_like(f),
                     np.zeros(f.shape[3], np.float32))
    dxs, df, db = K._conv2d_bwd_np(xs, f, dys, stride, valid, *zeros())
    df1, db1 = np.zeros_like(f), np.zeros(f.shape[3], np.float32)
    for i, x in enumerate(xs):
        np.testing.assert_allclose(ys[i], K._conv2d_fwd_np([x], f, b, stride, valid)[0],
                                   rtol=1e-6, atol=1e-6)
        (dx1,), df1, db1 = K._conv2d_bwd_np([x], f, [dys[i]], stride, valid,
                                            [np.zeros_like(x)], df1, db1)
        np.testing.assert_allclose(dxs[i], dx1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(df, df1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, db1, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [CASES[i] for i in (0, 1, 3, 8, 10)],
                         ids=[IDS[i] for i in (0, 1, 3, 8, 10)])
def test_conv_backward_computes_only_what_is_asked(case):
    xs, f, b, rng = make(case, 13)
    stride, valid = case["stride"], case["valid"]
    dys = [rng.standard_normal(y.shape).astype(np.float32)
           for y in K._conv2d_fwd_np(xs, f, None, stride, valid)]
    full = K._conv2d_bwd_np(xs, f, dys, stride, valid, [np.zeros_like(x) for x in xs],
                            np.zeros_like(f), np.zeros(f.shape[3], np.float32))
    only_dx = K._conv2d_bwd_np(xs, f, dys, stride, valid, [np.zeros_like(x) for x in xs])
    only_df = K._conv2d_bwd_np(xs, f, dys, stride, valid, df=np.zeros_like(f))
    only_db = K._conv2d_bwd_np(xs, f, dys, stride, valid, db=np.zeros(f.shape[3], np.float32))
    for part, got in [(0, only_dx), (1, only_df), (2, only_db)]:
        assert all(got[k] is None for k in range(3) if k != part)
        if part == 0:
            for a, c in zip(got[0], full[0]):
                np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_allclose(got[part], full[part], rtol=1e-6, atol=1e-6)
    # some images without a gradient: the others still get theirs, the skipped stay None
    some = [np.zeros_like(x) if i % 2 == 0 else None for i, x in enumerate(xs)]
    got, _, _ = K._conv2d_bwd_np(xs, f, dys, stride, valid, some)
    for i, d in enumerate(got):
        if i % 2:
            assert d is None
        else:
            np.testing.assert_allclose(d, full[0][i], rtol=1e-6, atol=1e-6)


def test_conv_is_cross_correlation():
    x = np.arange(12, dtype=np.float32).reshape(3, 4, 1)
    f = np.zeros((2, 2, 1, 1), np.float32)
    f[0, 1] = 1.0   # picks x(i, j + 1): a flipped filter would pick x(i + 1, j)
    (y,) = K._conv2d_fwd_np([x], f, None, (1, 1), True)
    np.testing.assert_array_equal(y[:, :, 0], x[:2, 1:, 0])


def test_conv_rejects_mismatched_inputs():
    x = np.zeros((4, 4, 2), np.float32)
    with pytest.raises(ValueError):
        K._conv2d_fwd_np([x], np.zeros((2, 2, 3, 1), np.float32), None, (1, 1), True)
    with pytest.raises(ValueError):
        K._conv2d_fwd_np([x], np.zeros((5, 2, 2, 1), np.float32), None, (1, 1), True)
    with pytest.raises(ValueError):
        K._conv2d_fwd_np([x, np.zeros((4, 5, 2), np.float32)],
                         np.zeros((2, 2, 2, 1), np.float32), None, (1, 1), True)
    with pytest.raises(ValueError):
        K._conv2d_fwd_np([x], np.zeros((2, 2, 2, 1), np.float32), None, (0, 1), False)


# --------------------------------------------------------------- maxpool ----

@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_maxpool_forward_backward(case, ties):
    xs, _, _, rng = make(case, 14, integers=ties)
    win, stride, valid = (case["KH"], case["KW"]), case["stride"], case["valid"]
    ys, argmax = K._maxpool_fwd_np(xs, win, stride, valid)
    assert argmax.dtype == np.int32 and argmax.shape == (len(xs), ys[0].size)
    dys = [rng.standard_normal(y.shape).astype(np.float32) for y in ys]
    dx0 = [rng.standard_normal(x.shape).astype(np.float32) for x in xs]
    dxs = K._maxpool_bwd_np(xs[0].shape, win, stride, valid, argmax, dys,
                            [d.copy() for d in dx0])
    for x, y, dy, d0, dx in zip(xs, ys, dys, dx0, dxs):
        want, backward = ref_pool(x, win, stride, valid)
        np.testing.assert_array_equal(y, want.astype(np.float32))
        close(dx, d0 + backward(dy))


def test_maxpool_ties_go_to_the_first_row_then_column():
    x = np.array([[0, 5], [5, 0]], np.float32).reshape(2, 2, 1)
    _, argmax = K._maxpool_fwd_np([x], (2, 2), (1, 1), True)
    assert argmax.tolist() == [[0 + 2 * 1]]   # (h=0, w=1), not (h=1, w=0) at offset 1
    _, argmax = K._maxpool_fwd_np([np.zeros((2, 2, 1), np.float32)], (2, 2), (1, 1), True)
    assert argmax.tolist() == [[0]]


def test_maxpool_padding_value_and_nan():
    ninf, nan = -np.inf, np.nan
    # 3x3, window 2, stride 2, SAME: padding below and right; windows 1-3 touch it
    x = np.full((3, 3, 1), ninf, np.float32)
    (y,), _ = K._maxpool_fwd_np([x], (2, 2), (2, 2), False)
    np.testing.assert_array_equal(y.ravel(order="F"), [ninf, -FLT_MAX, -FLT_MAX, -FLT_MAX])
    x = np.full((4, 4, 1), nan, np.float32)
    x[0, 0] = 1.0
    x[3, 3] = 2.0
    (y,), argmax = K._maxpool_fwd_np([x], (2, 2), (2, 2), True)
    np.testing.assert_array_equal(y[:, :, 0], [[1.0, ninf], [ninf, 2.0]])
    # as in DyNet's backward, the gradient starts at a window's first element and moves
    # only to a greater one: an all-NaN window's goes to its first element, and so does
    # the last window's, whose first element is a NaN (nothing compares greater)
    assert argmax.tolist() == [[0, 2, 8, 2 + 4 * 2]]


def test_maxpool_rejects_bad_windows():
    x = np.zeros((3, 3, 1), np.float32)
    with pytest.raises(ValueError):
        K._maxpool_fwd_np([x], (4, 1), (1, 1), True)
    with pytest.raises(ValueError):
        K._maxpool_fwd_np([x], (0, 1), (1, 1), False)


# ------------------------------------------------ recorded DyNet results ----

def dynet_cases():
    with np.load(DATA) as data:
        arrays = {k: data[k] for k in data.files}
    return [(c, {k.split("/", 1)[1]: v for k, v in arrays.items()
                 if k.startswith(c["name"] + "/")})
            for c in json.loads(str(arrays["cases"]))]


def images(a):
    """DyNet's batch (H, W, C, B) as a list of B images."""
    return [np.asfortranarray(a[..., i]) for i in range(a.shape[-1])]


@pytest.mark.parametrize("case,arrays", dynet_cases(), ids=lambda v: v.get("name", ""))
def test_matches_recorded_dynet(case, arrays):
    win, stride, valid, kind = tuple(case["ksize"]), tuple(case["stride"]), case["is_valid"], \
        case["kind"]
    xs, f, b = images(arrays["x"]), arrays["f"], arrays["b"]
    if kind != "pool":
        ys = K._conv2d_fwd_np(xs, f, b, stride, valid)
        close(np.stack(ys, -1), arrays["conv_y"])
        dxs, df, db = K._conv2d_bwd_np(xs, f, images(arrays["conv_dy"]), stride, valid,
                                       [np.zeros_like(x) for x in xs], np.zeros_like(f),
                                       np.zeros_like(b))
        close(np.stack(dxs, -1), arrays["conv_dx"])
        close(db, arrays["conv_db"])
        if kind == "dynet_bwd_differs":
            # DyNet's filter gradient is not the derivative of its own forward here
            assert not np.allclose(df, arrays["conv_df"], atol=1e-3)
            want = sum(ref_conv_bwd(x, f.astype(float), d, stride, valid)[1]
                       for x, d in zip(xs, images(arrays["conv_dy"])))
            close(df, want)
        else:
            close(df, arrays["conv_df"])
    ys, argmax = K._maxpool_fwd_np(xs, win, stride, valid)
    np.testing.assert_array_equal(np.stack(ys, -1), arrays["pool_y"])
    dxs = K._maxpool_bwd_np(xs[0].shape, win, stride, valid, argmax, images(arrays["pool_dy"]),
                            [np.zeros_like(x) for x in xs])
    if kind == "dynet_bwd_differs":
        assert not np.allclose(np.stack(dxs, -1), arrays["pool_dx"])
        for x, d, dx in zip(xs, images(arrays["pool_dy"]), dxs):
            close(dx, ref_pool(x, win, stride, valid)[1](d))
    else:
        close(np.stack(dxs, -1), arrays["pool_dx"])


def test_fixture_is_small():
    assert os.path.getsize(DATA) < 50_000
