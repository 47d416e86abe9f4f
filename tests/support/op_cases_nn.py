"""Op cases (see op_cases.py) of the fused LSTM ops (lstm_gates, lstm_cell,
lstm_hidden, and DyNet's vanilla_lstm_* functions built on them) and the image ops (conv2d, conv2d_bias, maxpooling2d). Imported by
op_cases.py, so the generated tests cover them."""
import numpy as np

import autobatch as dy
from autobatch.testing import from_full

from op_cases import variant
from op_cases_products import mm

# ------------------------------------------------------- fused LSTM ops ----
# Gate vectors are blocks of h: [i, f_1 .. f_k, o, g].


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _gates_ref(v, h, forget_bias):
    nb = v.shape[0] // h
    out = _sigmoid(v)
    out[h:(nb - 2) * h] = _sigmoid(v[h:(nb - 2) * h] + forget_bias)
    out[(nb - 1) * h:] = np.tanh(v[(nb - 1) * h:])
    return out


def _lstm_gates_variant(name, h, nb, bs, forget_bias):
    def fn(c):
        x = c.arg((nb * h,), bs=bs, lo=-2, hi=2)
        return (lambda: dy.lstm_gates(x.expr(), h, forget_bias)), \
            (lambda: from_full(_gates_ref(x.value(), h, forget_bias), 1))
    variant("lstm_gates", name)(fn)


_lstm_gates_variant("lstm", 3, 4, 1, 1.0)
_lstm_gates_variant("tree", 2, 5, 1, 0.5)
_lstm_gates_variant("leaf", 2, 3, 1, 0.0)
_lstm_gates_variant("batched", 2, 4, 2, 1.0)


def _lstm_cell_variant(name, h, k, bs):
    def fn(c):
        g = c.arg(((k + 3) * h,), bs=bs, lo=0.1, hi=0.9)
        prev = [c.arg((h,), bs=bs) for _ in range(k)]

        def ref():
            gv = g.value()
            out = gv[:h] * gv[(k + 2) * h:]
            for m, p in enumerate(prev):
                out = out + gv[(1 + m) * h:(2 + m) * h] * p.value()
            return from_full(out, 1)
        return (lambda: dy.lstm_cell(g.expr(), [p.expr() for p in prev])), ref
    variant("lstm_cell", name)(fn)


_lstm_cell_variant("lstm", 3, 1, 1)
_lstm_cell_variant("tree", 2, 2, 1)
_lstm_cell_variant("leaf", 2, 0, 1)
_lstm_cell_variant("batched", 2, 1, 3)


def _lstm_hidden_variant(name, h, nb, bs):
    def fn(c):
        cell = c.arg((h,), bs=bs, lo=-2, hi=2)
        g = c.arg((nb * h,), bs=bs, lo=0.1, hi=0.9)
        return (lambda: dy.lstm_hidden(cell.expr(), g.expr())), \
            (lambda: from_full(g.value()[(nb - 2) * h:(nb - 1) * h] * np.tanh(cell.value()), 1))
    variant("lstm_hidden", name)(fn)


_lstm_hidden_variant("lstm", 3, 4, 1)
_lstm_hidden_variant("leaf", 2, 3, 1)
_lstm_hidden_variant("batched", 2, 4, 2)




# DyNet's vanilla_lstm_gates* are composites: concatenate (x_t's parts), cmult (the
# dropout masks), affine_transform, lstm_gates with the forget bias of 1. Variants of
# lstm_gates, the op that ends them; the weights shared by every instance.

def _vanilla_gates_variant(name, h, ins, bs, concat=False, mask_bs=0):
    """ins: the sizes of x_t's parts; mask_bs > 0: the dropout variants, masks of that
    batch size."""
    def fn(c):
        xs = [c.arg((i,), bs=bs) for i in ins]
        hp = c.arg((h,), bs=bs)
        wx = c.arg((4 * h, sum(ins)), key="Wx")
        wh = c.arg((4 * h, h), key="Wh")
        b = c.arg((4 * h,), key="b")
        # the masks are constants, as in DyNet (no gradient reaches them)
        masks = [c.rng.uniform(0, 2, (n, mask_bs)) for n in (sum(ins), h)] if mask_bs else []

        def build():
            x_t = [x.expr() for x in xs] if concat else xs[0].expr()
            args = [x_t, hp.expr(), wx.expr(), wh.expr(), b.expr()] + \
                [dy.inputTensor(m if mask_bs > 1 else m[:, 0], batched=mask_bs > 1) for m in masks]
            f = {(False, False): dy.vanilla_lstm_gates, (True, False): dy.vanilla_lstm_gates_concat,
                 (False, True): dy.vanilla_lstm_gates_dropout,
                 (True, True): dy.vanilla_lstm_gates_dropout_concat}[concat, bool(masks)]
            return f(*args)

        def ref():
            x, hv = np.concatenate([x.value() for x in xs], axis=0), hp.value()
            if masks:
                x, hv = (v * m.reshape(-1, 1, 1, 1, mask_bs) for v, m in zip((x, hv), masks))
            pre = mm(wx.value(), x) + mm(wh.value(), hv) + b.value()
            return from_full(_gates_ref(pre, h, 1.0), 1)
        return build, ref
    variant("lstm_gates", name, gemm=True)(fn)


_vanilla_gates_variant("vanilla", 3, (4,), 1)
_vanilla_gates_variant("vanilla_batched", 2, (3,), 2)
_vanilla_gates_variant("vanilla_concat", 2, (3, 2), 1, concat=True)
_vanilla_gates_variant("vanilla_concat_batched", 2, (2, 1, 3), 2, concat=True)
_vanilla_gates_variant("vanilla_dropout", 2, (3,), 2, mask_bs=1)
_vanilla_gates_variant("vanilla_dropout_batched_masks", 2, (3,), 2, mask_bs=2)
_vanilla_gates_variant("vanilla_dropout_concat", 2, (2, 2), 2, concat=True, mask_bs=2)
_vanilla_gates_variant("vanilla_dropout_concat_one_input", 3, (3,), 1, concat=True, mask_bs=1)


def _vanilla_cell_case(c):
    g = c.arg((8,), bs=2, lo=0.1, hi=0.9)
    prev = c.arg((2,), bs=2)
    return (lambda: dy.vanilla_lstm_c(prev.expr(), g.expr())), \
        (lambda: from_full(g.value()[:2] * g.value()[6:] + g.value()[2:4] * prev.value(), 1))


def _vanilla_hidden_case(c):
    cell = c.arg((2,), bs=2, lo=-2, hi=2)
    g = c.arg((8,), bs=2, lo=0.1, hi=0.9)
    return (lambda: dy.vanilla_lstm_h(cell.expr(), g.expr())), \
        (lambda: from_full(g.value()[4:6] * np.tanh(cell.value()), 1))


variant("lstm_cell", "vanilla")(_vanilla_cell_case)
variant("lstm_hidden", "vanilla")(_vanilla_hidden_case)


# --------------------------------------------------------- images ----
# Images (H, W, C) and filters (KH, KW, C_in, C_out) are 2-d parameters reshaped; the
# filter and bias are shared by every instance (one node per graph, as a parameter).

def _padded(x, KH, KW, stride, valid, fill):
    """DyNet's windows over x (H, W, C): x inside a frame of `fill` (SAME pads a total
    of max(0, (O-1)s + K - H), the top/left getting half, rounded down), and the output
    size (OH, OW); VALID has no padding."""
    H, W, C = x.shape
    if valid:
        OH, OW, pt, pl = -(-(H - KH + 1) // stride[0]), -(-(W - KW + 1) // stride[1]), 0, 0
    else:
        OH, OW = -(-H // stride[0]), -(-W // stride[1])
        pt = max(0, (OH - 1) * stride[0] + KH - H) // 2
        pl = max(0, (OW - 1) * stride[1] + KW - W) // 2
    xp = np.full((pt + (OH - 1) * stride[0] + KH + H, pl + (OW - 1) * stride[1] + KW + W, C), fill)
    xp[pt:pt + H, pl:pl + W] = x
    return xp, OH, OW


def _windows(x, KH, KW, stride, valid, fill):
    """(i, j, window (KH, KW, C)) for every output position."""
    xp, OH, OW = _padded(x, KH, KW, stride, valid, fill)
    for i in range(OH):
        for j in range(OW):
            yield i, j, xp[i * stride[0]:i * stride[0] + KH, j * stride[1]:j * stride[1] + KW]


def _ref_conv(x, f, b, stride, valid):
    """DyNet's conv2d: cross-correlation of x (H, W, C) with f (KH, KW, C, CO)."""
    KH, KW, _, CO = f.shape
    _, OH, OW = _padded(x, KH, KW, stride, valid, 0.0)
    y = np.zeros((OH, OW, CO))
    for i, j, win in _windows(x, KH, KW, stride, valid, 0.0):
        y[i, j] = np.einsum("hwc,hwco->o", win, f)
    return y if b is None else y + b


def _ref_pool(x, ksize, stride, valid):
    """DyNet's maxpooling2d: SAME pads with -FLT_MAX."""
    _, OH, OW = _padded(x, *ksize, stride, valid, 0.0)
    y = np.zeros((OH, OW, x.shape[2]))
    for i, j, win in _windows(x, *ksize, stride, valid, -np.finfo(np.float32).max):
        y[i, j] = win.max(axis=(0, 1))
    return y


def _images(arg, bs):
    """The images of an argument's value, one (H, W, C) float64 array per batch element."""
    v = arg.value()
    return [v[:, :, :, 0, k] for k in range(bs)]


def _stack(outs):
    """Per-image (OH, OW, C) results in npvalue() layout (the batch last if > 1)."""
    out = np.stack(outs, axis=-1)
    return out[..., 0] if out.shape[-1] == 1 else out


def _conv_variant(name, H, W, C, KH, KW, CO, stride, valid, bias=False, bs=1):
    def fn(c):
        x = c.arg((H, W, C), bs=bs)
        f = c.arg((KH, KW, C, CO), key=f"conv-{name}-f")
        b = c.arg((CO,), key=f"conv-{name}-b") if bias else None

        def build():
            if bias:
                return dy.conv2d_bias(x.expr(), f.expr(), b.expr(), stride, is_valid=valid)
            return dy.conv2d(x.expr(), f.expr(), stride, is_valid=valid)

        def ref():
            bv = b.value()[:, 0, 0, 0, 0] if bias else None
            fv = f.value()[..., 0]
            return _stack([_ref_conv(img, fv, bv, stride, valid) for img in _images(x, bs)])
        return build, ref
    variant("conv2d", name)(fn)


_conv_variant("valid", 5, 4, 2, 2, 3, 3, (1, 1), True)
_conv_variant("same-stride2", 5, 6, 1, 3, 3, 2, (2, 2), False)
_conv_variant("bias-same", 4, 4, 3, 3, 2, 2, (1, 2), False, bias=True)
_conv_variant("1x1-batched", 3, 3, 2, 1, 1, 2, (1, 1), True, bs=2)


def _pool_variant(name, H, W, C, ksize, stride, valid, bs=1):
    def fn(c):
        x = c.distinct((H, W, C), bs=bs)
        return (lambda: dy.maxpooling2d(x.expr(), ksize, stride, is_valid=valid)), \
            (lambda: _stack([_ref_pool(img, ksize, stride, valid) for img in _images(x, bs)]))
    variant("maxpooling2d", name)(fn)


_pool_variant("valid", 4, 5, 2, (2, 2), (2, 2), True)
_pool_variant("same-overlap", 5, 5, 1, (3, 3), (2, 2), False)
_pool_variant("batched", 4, 4, 2, (2, 1), (2, 1), True, bs=2)
