"""Op cases (see op_cases.py) of DyNet's linear algebra and tensor ops: inverse,
logdet, the 3-d contractions, kmh_ngram, filter1d_narrow, circ_conv, circ_corr, and
the composite trace_of_product (dot_product). Imported by op_cases.py."""
import numpy as np

import autobatch as dy
from autobatch.testing import MAX_DIMS, from_full

from op_cases import variant


def _matrices(c, n, bs, scale=0.3):
    """Well-conditioned n x n matrices (2 I + noise; positive determinant), as a
    full value (n, n, 1, 1, bs)."""
    m = 2 * np.eye(n)[:, :, None] + c.rng.uniform(-scale, scale, (n, n, bs))
    return m[:, :, None, None, :]


def _per_matrix(v, f):
    """f of each batch element's matrix of a full value, stacked as a full value."""
    return np.stack([np.atleast_2d(f(v[:, :, 0, 0, e])) for e in range(v.shape[MAX_DIMS])],
                    axis=-1)[:, :, None, None, :]


def _inverse_variant(name, n, bs, shape=None):
    shape = shape or (n, n)

    def fn(c):
        x = c.arg(shape, bs=bs, values=_matrices(c, n, bs))
        return (lambda: dy.inverse(x.expr())), \
            (lambda: from_full(_per_matrix(x.value(), np.linalg.inv), len(shape)))
    variant("inverse", name)(fn)


_inverse_variant("3x3", 3, 1)
_inverse_variant("2x2_batched", 2, 3)
_inverse_variant("1x1", 1, 1, shape=(1,))
_inverse_variant("5x5", 5, 1)


def _logdet_variant(name, n, bs):
    def fn(c):
        x = c.arg((n, n), bs=bs, values=_matrices(c, n, bs))
        return (lambda: dy.logdet(x.expr())), \
            (lambda: from_full(_per_matrix(x.value(), lambda m: np.linalg.slogdet(m)[1]), 1))
    variant("logdet", name)(fn)


_logdet_variant("3x3", 3, 1)
_logdet_variant("2x2_batched", 2, 2)
_logdet_variant("4x4", 4, 1)


def _trace_variant(name, shape, bs_x, bs_y):
    def fn(c):
        x, y = c.arg(shape, bs=bs_x), c.arg(shape, bs=bs_y)
        return (lambda: dy.trace_of_product(x.expr(), y.expr())), \
            (lambda: from_full((x.value() * y.value()).sum(axis=(0, 1, 2, 3), keepdims=True), 1))
    variant("dot_product", "trace_of_product_" + name)(fn)


_trace_variant("mat", (3, 2), 1, 1)
_trace_variant("square_batched", (2, 2), 2, 1)
_trace_variant("vec", (3,), 1, 1)


# ------------------------------------------------------------ contractions ----

def _contract_variant(op, name, I, J, K, bs, bias=False):
    two = op == "contract3d_1d_1d"

    def fn(c):
        A = c.arg((I, J, K), bs=bs[0], key=f"{op}-{name}-A")
        y = c.arg((K,), bs=bs[1])
        z = c.arg((J,), bs=bs[2]) if two else None
        b = c.arg((I,) if two else (I, J), bs=bs[-1]) if bias else None

        def build():
            args = [A.expr(), y.expr()] + ([z.expr()] if two else []) + ([b.expr()] if bias else [])
            f = {(False, False): dy.contract3d_1d, (False, True): dy.contract3d_1d_bias,
                 (True, False): dy.contract3d_1d_1d, (True, True): dy.contract3d_1d_1d_bias}
            return f[two, bias](*args)

        def ref():
            n_bs = max(bs)

            def full(arg):
                v = arg.value()
                return np.broadcast_to(v, v.shape[:MAX_DIMS] + (n_bs,))
            out = np.einsum("ijkb,kb->ijb", full(A)[:, :, :, 0], full(y)[:, 0, 0, 0])
            if two:
                out = np.einsum("ijb,jb->ib", out, full(z)[:, 0, 0, 0])[:, None, None, None, :]
            else:
                out = out[:, :, None, None, :]
            if bias:
                out = out + b.value()
            return from_full(out, 1 if two else 2)
        return build, ref
    variant(op, name)(fn)


_contract_variant("contract3d_1d", "plain", 2, 3, 4, (1, 1))
_contract_variant("contract3d_1d", "bias", 3, 2, 2, (1, 1, 1), bias=True)
_contract_variant("contract3d_1d", "batched_y", 2, 2, 3, (1, 2))
_contract_variant("contract3d_1d", "batched_A_bias", 2, 3, 2, (2, 1, 2), bias=True)
_contract_variant("contract3d_1d", "j1", 3, 1, 2, (1, 1))
_contract_variant("contract3d_1d_1d", "plain", 2, 3, 4, (1, 1, 1))
_contract_variant("contract3d_1d_1d", "bias", 3, 2, 2, (1, 1, 1, 1), bias=True)
_contract_variant("contract3d_1d_1d", "batched_z_bias", 2, 3, 2, (1, 1, 2, 1), bias=True)
_contract_variant("contract3d_1d_1d", "batched_A", 2, 2, 3, (2, 2, 1))


# ------------------------------------------------------- kmh_ngram, filter1d ----

def _kmh_variant(name, shape, bs, n):
    def fn(c):
        x = c.arg(shape, bs=bs)

        def ref():
            v = x.value()
            oc = shape[1] - n + 1
            return from_full(sum(v[:, t:t + oc] for t in range(n)), 2)
        return (lambda: dy.kmh_ngram(x.expr(), n)), ref
    variant("kmh_ngram", name)(fn)


_kmh_variant("n2", (3, 4), 1, 2)
_kmh_variant("n3_batched", (2, 5), 2, 3)
_kmh_variant("n1", (2, 3), 1, 1)
_kmh_variant("all_columns", (2, 3), 1, 3)


def _filter1d_variant(name, R, C, W, F, bs_x=1, bs_f=1):
    fshape = (R, W) if F is None else (R, W, F)

    def fn(c):
        x = c.arg((R, C), bs=bs_x)
        f = c.arg(fshape, bs=bs_f, key=f"filter1d-{name}")

        def ref():
            xv, fv = x.value()[:, :, 0, 0, :], f.value()[:, :, :, 0, :]
            bs = max(xv.shape[-1], fv.shape[-1])
            xv, fv = np.broadcast_to(xv, xv.shape[:2] + (bs,)), np.broadcast_to(fv, fv.shape[:3] + (bs,))
            oc = C - W + 1
            out = np.stack([np.einsum("rwfb,rwb->fb", fv, xv[:, j:j + W]) for j in range(oc)], axis=1)
            return from_full(out[:, :, None, None, :], 2)
        return (lambda: dy.filter1d_narrow(x.expr(), f.expr())), ref
    variant("filter1d_narrow", name)(fn)


_filter1d_variant("one_filter", 3, 5, 2, None)
_filter1d_variant("three_filters", 2, 4, 3, 3)
_filter1d_variant("batched_x", 2, 3, 2, 2, bs_x=2)
_filter1d_variant("full_width", 2, 3, 3, 2)


# ---------------------------------------------------- circ_conv, circ_corr ----

def _circ_ref(conv):
    def ref(u, v):
        n = u.shape[0]
        u, v = np.broadcast_arrays(u, v)
        out = np.zeros_like(u)
        for k in range(n):
            for i in range(n):
                out[k] += u[i] * v[(k - i) % n if conv else (i + k) % n]
        return out
    return ref


def _circ_variant(op, name, n, bs_u, bs_v):
    f = dy.circ_conv if op == "circ_conv" else dy.circ_corr

    def fn(c):
        u, v = c.arg((n,), bs=bs_u), c.arg((n,), bs=bs_v)
        return (lambda: f(u.expr(), v.expr())), \
            (lambda: from_full(_circ_ref(op == "circ_conv")(u.value(), v.value()), 1))
    variant(op, name)(fn)


for _op in ("circ_conv", "circ_corr"):
    _circ_variant(_op, "n4", 4, 1, 1)
    _circ_variant(_op, "n1", 1, 1, 1)
    _circ_variant(_op, "batched_u", 5, 2, 1)
    _circ_variant(_op, "batched_both", 3, 2, 2)
