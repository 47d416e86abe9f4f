"""Op cases (see op_cases.py) of the matrix products and reductions: matmul,
affine_transform, sum_elems, mean_elems, the norms, dot_product, squared_distance,
binary_log_loss, max_dim/min_dim, sum_dim/mean_dim, sum_batches. Imported by
op_cases.py, so the generated tests cover them."""
import numpy as np

import autobatch as dy
from autobatch.testing import MAX_DIMS, from_full

from op_cases import ALL_DIMS, _binary_case, _unary_case, variant

# ------------------------------------------------- matrix products ----


def mm(w, x):
    """Batched matrix product of full (r, k, 1, 1, bs) and (k, c, 1, 1, bs) arrays (bs
    broadcasts)."""
    w2, x2 = np.moveaxis(w[:, :, 0, 0], 2, 0), np.moveaxis(x[:, :, 0, 0], 2, 0)
    return np.matmul(w2, x2).transpose(1, 2, 0)[:, :, None, None, :]


_MATMUL = {"vec": (((3, 4), 1), ((4,), 1)), "mat": (((3, 4), 1), ((4, 2), 1)),
           "batched_x": (((3, 4), 1), ((4,), 3)), "batched_mat_x": (((2, 3), 1), ((3, 2), 2)),
           "batched_w": (((3, 4), 3), ((4,), 1)), "batched_both": (((2, 3), 2), ((3, 2), 2)),
           "row_times_col": (((1, 3), 1), ((3,), 1)), "col_x": (((3, 4), 1), ((4, 1), 1)),
           "col_times_row": (((3, 1), 1), ((1, 2), 2))}
for _name, (_ws, _xs) in _MATMUL.items():
    def _mm_case(c, ws=_ws, xs=_xs):
        w = c.arg(ws[0], bs=ws[1], key="W")
        x = c.arg(xs[0], bs=xs[1])
        return (lambda: w.expr() * x.expr()), \
            (lambda: from_full(mm(w.value(), x.value()), 1 if len(xs[0]) == 1 else 2))
    variant("matmul", _name)(_mm_case)


def _affine_variant(name, bias, terms):
    """bias: (shape, bs); terms: [((W shape, bs), (x shape, bs)), ...]."""
    def fn(c):
        b = c.arg(bias[0], bs=bias[1], key="b")
        ts = [(c.arg(ws[0], bs=ws[1], key=f"W{k}"), c.arg(xs[0], bs=xs[1]))
              for k, (ws, xs) in enumerate(terms)]

        def build():
            return dy.affine_transform([b.expr()] + [e.expr() for t in ts for e in t])

        def ref():
            out = b.value() + sum(mm(w.value(), x.value()) for w, x in ts)
            return from_full(out, 1 if len(terms[0][1][0]) == 1 else 2)     # W1 x1's rank
        return build, ref
    variant("affine_transform", name)(fn)


_affine_variant("vec", ((3,), 1), [(((3, 4), 1), ((4,), 1))])
_affine_variant("two_terms", ((3,), 1), [(((3, 4), 1), ((4,), 1)), (((3, 2), 1), ((2,), 1))])
_affine_variant("three_terms", ((2,), 1), [(((2, 3), 1), ((3,), 1)), (((2, 2), 1), ((2,), 1)),
                                          (((2, 1), 1), ((1,), 1))])
_affine_variant("matrix_x_bias_bcast", ((3,), 1), [(((3, 4), 1), ((4, 2), 1))])
_affine_variant("matrix_bias", ((3, 2), 1), [(((3, 4), 1), ((4, 2), 1))])
_affine_variant("batched_x", ((3,), 1), [(((3, 4), 1), ((4,), 3))])
_affine_variant("batched_bias", ((3,), 2), [(((3, 4), 1), ((4,), 1))])
_affine_variant("mixed_batch_terms", ((2,), 1), [(((2, 3), 1), ((3,), 2)), (((2, 2), 1), ((2,), 1))])
_affine_variant("batched_w", ((2,), 1), [(((2, 3), 2), ((3,), 2))])
_affine_variant("col_x", ((2, 1), 1), [(((2, 3), 1), ((3, 1), 1))])

# -------------------------------------------------------- reductions ----

_RED_SHAPES = {"vec": ((4,), 1), "mat": ((3, 2), 1), "batched": ((3,), 3), "batched_mat": ((2, 2), 2),
               "3d": ((2, 3, 2), 1), "4d_batched": ((2, 2, 1, 2), 2)}
_REDUCE = {
    "sum_elems": (dy.sum_elems, lambda v: v.sum(axis=ALL_DIMS, keepdims=True), {}),
    "mean_elems": (dy.mean_elems, lambda v: v.mean(axis=ALL_DIMS, keepdims=True), {}),
    "squared_norm": (dy.squared_norm, lambda v: (v * v).sum(axis=ALL_DIMS, keepdims=True), {}),
    "l2_norm": (dy.l2_norm, lambda v: np.sqrt((v * v).sum(axis=ALL_DIMS, keepdims=True)), {"away": 0.2}),
}
for _op, (_f, _ref, _akw) in _REDUCE.items():
    for _sname, (_shape, _bs) in _RED_SHAPES.items():
        variant(_op, _sname)(_unary_case(_f, _ref, _shape, _bs, _akw, nd=1))


def _bll(x, y):
    return -(y * np.log(x) + (1 - y) * np.log(1 - x))


_PAIR = {
    "dot_product": (dy.dot_product, lambda x, y: x * y, {}, {}),
    "squared_distance": (dy.squared_distance, lambda x, y: (x - y) ** 2, {}, {}),
    "binary_log_loss": (dy.binary_log_loss, _bll, {"lo": 0.2, "hi": 0.8}, {"lo": 0.1, "hi": 0.9}),
}
_PAIR_SHAPES = {"vec": (((4,), 1), ((4,), 1)), "mat": (((2, 3), 1), ((2, 3), 1)),
                "batched": (((3,), 2), ((3,), 2)), "bcast_batch": (((3,), 1), ((3,), 3)),
                "3d": (((2, 3, 2), 1), ((2, 3, 2), 1))}
for _op, (_f, _ew, _xkw, _ykw) in _PAIR.items():
    for _sname, (_xs, _ys) in _PAIR_SHAPES.items():
        variant(_op, _sname)(_binary_case(
            _f, lambda x, y, ew=_ew: ew(x, y).sum(axis=ALL_DIMS, keepdims=True), _xs, _ys, _xkw, _ykw,
            nd=1))


def _extreme_dim_variant(op, name, shape, bs, d):
    f, np_f = (dy.max_dim, np.max) if op == "max_dim" else (dy.min_dim, np.min)

    def fn(c):
        x = c.distinct(shape, bs)
        return (lambda: f(x.expr(), d)), \
            (lambda: from_full(np.moveaxis(np_f(x.value(), axis=d, keepdims=True), d, MAX_DIMS - 1),
                               max(1, len(shape) - 1)))
    variant(op, name)(fn)


for _op in ("max_dim", "min_dim"):
    _extreme_dim_variant(_op, "d0_vec", (5,), 1, 0)
    _extreme_dim_variant(_op, "d0_mat", (4, 3), 1, 0)
    _extreme_dim_variant(_op, "d1_mat", (4, 3), 1, 1)
    _extreme_dim_variant(_op, "d0_batched_mat", (3, 2), 2, 0)
    _extreme_dim_variant(_op, "d1_batched_mat", (3, 2), 2, 1)
    _extreme_dim_variant(_op, "d1_3d", (3, 4, 2), 1, 1)
    _extreme_dim_variant(_op, "d2_3d_batched", (2, 3, 3), 2, 2)
    _extreme_dim_variant(_op, "d0_4d", (3, 2, 1, 2), 1, 0)
    _extreme_dim_variant(_op, "d3_4d_batched", (2, 1, 2, 3), 2, 3)
    _extreme_dim_variant(_op, "d1_col", (3, 1), 1, 1)


def _sum_dim_variant(op, name, shape, bs, d, b=False, n=0):
    f = dy.sum_dim if op == "sum_dim" else dy.mean_dim

    def ref(v):
        axes = tuple(d) + ((MAX_DIMS,) if b else ())
        r = v.sum(axis=axes, keepdims=True)
        if op == "mean_dim":
            r = r / (n if n else np.prod([v.shape[a] for a in axes]))
        kept = [a for a in range(MAX_DIMS) if a not in d]
        return r.transpose(kept + sorted(d) + [MAX_DIMS])     # removed dimensions go last

    variant(op, name)(_unary_case(lambda x: f(x, d, b, n), ref, shape, bs, {},
                                  nd=max(1, len(shape) - len(d))))


for _op in ("sum_dim", "mean_dim"):
    _sum_dim_variant(_op, "d0_vec", (4,), 1, [0])
    _sum_dim_variant(_op, "d0_mat", (3, 2), 1, [0])
    _sum_dim_variant(_op, "d1_mat", (3, 2), 1, [1])
    _sum_dim_variant(_op, "d01_mat", (3, 2), 1, [0, 1])
    _sum_dim_variant(_op, "d1_batched", (3, 2), 2, [1])
    _sum_dim_variant(_op, "d1_and_batch", (3, 2), 2, [1], b=True)
    _sum_dim_variant(_op, "batch_only", (3, 2), 3, [], b=True)
    _sum_dim_variant(_op, "d1_3d", (2, 3, 2), 1, [1])
    _sum_dim_variant(_op, "d20_3d", (2, 3, 2), 2, [2, 0])
    _sum_dim_variant(_op, "d0_3d_unit", (2, 1, 1), 1, [0])
    _sum_dim_variant(_op, "d13_4d_batched", (2, 3, 1, 2), 2, [1, 3])
    _sum_dim_variant(_op, "d012_4d_and_batch", (2, 2, 2, 2), 2, [0, 1, 2], b=True)
_sum_dim_variant("mean_dim", "d1_n5", (3, 2), 1, [1], n=5)
_sum_dim_variant("mean_dim", "d1_batch_n3", (3, 2), 2, [1], b=True, n=3)
_sum_dim_variant("sum_dim", "n_unused", (3, 2), 1, [1], n=5)


for _sname, (_shape, _bs) in {"vec": ((3,), 4), "mat": ((2, 2), 3), "3d": ((2, 1, 2), 2)}.items():
    variant("sum_batches", _sname)(_unary_case(
        dy.sum_batches, lambda v: v.sum(axis=MAX_DIMS, keepdims=True), _shape, _bs, {}))
