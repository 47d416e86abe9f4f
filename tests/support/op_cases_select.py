"""Op cases (see op_cases.py) of DyNet's selections and sparse softmaxes:
select_rows, select_cols, strided_select, kmax_pooling, sparsemax,
constrained_softmax, and the composites pickrange (pick_range) and fold_rows
(reshape + sum_dim). Imported by op_cases.py, so the generated tests cover them."""
import numpy as np

import autobatch as dy
from autobatch.testing import MAX_DIMS, from_full

from op_cases import variant


def _per_element(v, f):
    """Apply f to each batch element (d0, d1, d2, d3) of a full value; stack the
    results (full arrays again)."""
    return np.stack([f(v[..., e]) for e in range(v.shape[MAX_DIMS])], axis=-1)


# ------------------------------------------------------- select_rows/cols ----

def _select_variant(op, name, shape, bs, index):
    f = dy.select_rows if op == "select_rows" else dy.select_cols
    axis = 0 if op == "select_rows" else 1

    def fn(c):
        x = c.arg(shape, bs=bs)
        idx = index(c)
        return (lambda: f(x.expr(), idx)), \
            (lambda: from_full(np.take(x.value(), idx, axis=axis), len(shape)))
    variant(op, name)(fn)


_select_variant("select_rows", "vec", (5,), 1, lambda c: [c.instance % 5, 0])
_select_variant("select_rows", "mat_repeated", (3, 2), 1, lambda c: [2, c.instance % 3, 2])
_select_variant("select_rows", "batched_mat", (4, 3), 2, lambda c: [(c.instance + 1) % 4])
_select_variant("select_rows", "3d", (3, 2, 2), 1, lambda c: [1, c.instance % 3])
_select_variant("select_rows", "4d_batched", (2, 1, 2, 2), 2, lambda c: [1, 0])
_select_variant("select_cols", "mat", (2, 4), 1, lambda c: [3, c.instance % 4])
_select_variant("select_cols", "repeated", (3, 3), 1, lambda c: [c.instance % 3] * 2)
_select_variant("select_cols", "batched", (2, 3), 3, lambda c: [2, 0, 1])
_select_variant("select_cols", "col", (3, 1), 1, lambda c: [0])


# --------------------------------------------------------- strided_select ----

def _strided_variant(name, shape, bs, strides, start, end):
    def fn(c):
        x = c.arg(shape, bs=bs)

        def ref():
            v = x.value()
            sl = [slice(None)] * (MAX_DIMS + 1)
            for k in range(len(shape) + 1):
                a = k if k < len(shape) else MAX_DIMS
                sl[a] = slice(start[k] if k < len(start) else None,
                              end[k] if k < len(end) else None,
                              strides[k] if k < len(strides) else None)
            return from_full(v[tuple(sl)], len(shape))
        return (lambda: dy.strided_select(x.expr(), strides, start, end)), ref
    variant("strided_select", name)(fn)


_strided_variant("mat", (4, 6), 1, [2, 2], [0, 1], [4, 6])
_strided_variant("defaults", (5, 3), 1, [3], [], [])
_strided_variant("vec_ceil", (7,), 1, [3], [1], [7])
_strided_variant("batch_entry", (4, 3), 3, [1, 1, 2], [0, 0, 1], [])
_strided_variant("3d", (3, 4, 2), 2, [2, 3, 1], [1, 0, 1], [3, 4, 2])
_strided_variant("4d", (2, 3, 2, 3), 1, [1, 2, 1, 2], [1, 0, 0, 1], [2, 3, 2, 3])
_strided_variant("huge_step", (3, 4), 2, [2**40, 3, 2**31], [1, 1, 1], [])


# ----------------------------------------------------------- kmax_pooling ----

def _kmax_line(line, k):
    """DyNet's rule: the values >= the k-th largest, the first k, in order."""
    c = np.sort(line)[::-1][k - 1]
    return np.array([v for v in line if v >= c][:k])


def _kmax_variant(name, shape, bs, k, d=None):
    def fn(c):
        x = c.distinct(shape, bs)
        dim = 1 if d is None else d
        build = (lambda: dy.kmax_pooling(x.expr(), k)) if d is None else \
            (lambda: dy.kmax_pooling(x.expr(), k, d=d))
        return build, (lambda: from_full(np.apply_along_axis(_kmax_line, dim, x.value(), k), len(shape)))
    variant("kmax_pooling", name)(fn)


_kmax_variant("rows_k2", (3, 5), 1, 2)
_kmax_variant("rows_k1", (2, 4), 1, 1)
_kmax_variant("d0_vec", (5,), 1, 3, d=0)
_kmax_variant("d0_mat", (4, 3), 1, 2, d=0)
_kmax_variant("batched", (2, 4), 2, 3)
_kmax_variant("3d_d2", (2, 2, 4), 1, 2, d=2)
_kmax_variant("4d_batched_d3", (2, 1, 2, 3), 2, 2, d=3)
_kmax_variant("all", (2, 3), 1, 3)


# --------------------------------------------------------------- sparsemax ----

def _sparsemax_ref(z):
    s = np.sort(z)[::-1]
    cs = np.cumsum(s)
    k = np.arange(1, len(z) + 1)
    support = 1 + k * s > cs
    kz = k[support][-1]
    tau = (cs[kz - 1] - 1) / kz
    return np.maximum(z - tau, 0)


# values whose support is clear (no x_i within 0.05 of tau), for the finite differences
_SPARSE = {"vec": ((4,), 1, [0.5, 1.2, -0.3, 1.0]),
           "dense": ((3,), 1, [0.3, 0.1, 0.2]),
           "one": ((4,), 1, [2.0, 0.1, -0.5, 0.3]),
           "col": ((5, 1), 1, [0.9, -1.0, 0.8, 0.05, 0.6]),
           "batched": ((4,), 2, [0.5, 1.2, -0.3, 1.0, 0.1, 0.2, 0.3, -0.2])}


def _sparsemax_variant(name, shape, bs, values):
    def fn(c):
        full = np.array(values).reshape(bs, -1).T.reshape(shape + (1,) * (MAX_DIMS - len(shape)) + (bs,))
        x = c.arg(shape, bs=bs, values=full)
        return (lambda: dy.sparsemax(x.expr())), \
            (lambda: from_full(np.apply_along_axis(_sparsemax_ref, 0, x.value()), len(shape)))
    variant("sparsemax", name)(fn)


for _name, (_shape, _bs, _values) in _SPARSE.items():
    _sparsemax_variant(_name, _shape, _bs, _values)


# ---------------------------------------------------- constrained_softmax ----

def _csoftmax_ref(z, u):
    free = np.ones(len(z), bool)
    p = np.zeros(len(z))
    mass = 0.0
    while True:
        q = np.exp(z - z.max())
        p[free] = q[free] * (1 - mass) / q[free].sum()
        over = free & (p > u)
        if not over.any():
            return p
        p[over] = u[over]
        mass += u[over].sum()
        free &= ~over


def _csoftmax_variant(name, x_values, u_values, bs_x=1, bs_u=1):
    n = len(x_values) // bs_x

    def full(values, bs):
        return np.array(values).reshape(bs, n).T.reshape(n, 1, 1, 1, bs)

    def fn(c):
        x = c.arg((n,), bs=bs_x, values=full(x_values, bs_x))
        u = c.arg((n,), bs=bs_u, values=full(u_values, bs_u))

        def ref():
            xv, uv = np.broadcast_arrays(x.value(), u.value())
            out = np.stack([_csoftmax_ref(xv[:, 0, 0, 0, e], uv[:, 0, 0, 0, e])
                            for e in range(xv.shape[MAX_DIMS])], axis=-1)
            return from_full(out[:, None, None, None, :], 1)
        return (lambda: dy.constrained_softmax(x.expr(), u.expr())), ref
    variant("constrained_softmax", name)(fn)


# bounds clearly above or below the probabilities (kinks stay > 0.05 away)
_csoftmax_variant("capped", [0.5, 1.2, -0.3, 1.0], [0.3, 0.3, 0.5, 0.5])
_csoftmax_variant("uncapped", [0.1, 0.4, -0.2], [0.9, 0.9, 0.9])
_csoftmax_variant("twice", [2.0, 1.9, 0.0, -1.0], [0.2, 0.3, 0.9, 0.9])
_csoftmax_variant("batched_x", [0.5, 1.2, -0.3, 0.2, 0.1, 0.3], [0.25, 0.5, 0.6], bs_x=2)


# ---------------------------------------------- composites: pick_range, sum_dim ----

def _pickrange_case(c):
    x = c.arg((5, 2))
    return (lambda: dy.pickrange(x.expr(), 1, 4)), (lambda: from_full(x.value()[1:4], 2))


variant("pick_range", "pickrange")(_pickrange_case)


def _fold_rows_variant(name, shape, bs, nrows):
    def fn(c):
        x = c.arg(shape, bs=bs)

        def ref():
            v = x.value()
            r = v.shape[0] // nrows
            out = v.reshape((r, nrows) + v.shape[1:]).sum(axis=1)
            return from_full(out, 2)
        build = (lambda: dy.fold_rows(x.expr())) if nrows == 2 else \
            (lambda: dy.fold_rows(x.expr(), nrows=nrows))
        return build, ref
    variant("sum_dim", "fold_rows_" + name)(fn)


_fold_rows_variant("mat", (4, 3), 1, 2)
_fold_rows_variant("vec_3", (6,), 1, 3)
_fold_rows_variant("batched", (4, 2), 2, 2)
_fold_rows_variant("all_rows", (3, 2), 1, 3)
_fold_rows_variant("one", (2, 3), 1, 1)
