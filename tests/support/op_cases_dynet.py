"""Test cases (see op_cases.py) of DyNet's ops of statistics and losses: moments and
standard deviations, cumsum, logsumexp_dim, restricted log_softmax, hinge_dim, the
losses and distances, bmax/bmin/emax, rounding, argmax, dropout along dimensions, the
normalisations. Composites are registered under the op of their last node; op_cases
imports this module, so these variants run in every generated test."""
import math

import numpy as np

import autobatch as dy
from autobatch.testing import MAX_DIMS, from_full

from op_cases import ALL_DIMS, BINARY_SHAPES, _binary_case, _unary_case, variant

LGAMMA = np.vectorize(math.lgamma)


def _removed_last(r, d):
    """A full result reduced over the dimensions d (kept as 1s): those go last."""
    kept = [a for a in range(MAX_DIMS) if a not in d]
    return r.transpose(kept + sorted(d) + [MAX_DIMS])


def _axes(d, b):
    return tuple(d) + ((MAX_DIMS,) if b else ())


# ------------------------------------------------------- bmax, bmin, emax ----

for _op, _f, _np_f in (("bmax", dy.bmax, np.maximum), ("bmin", dy.bmin, np.minimum)):
    for _sname, (_xs, _ys) in BINARY_SHAPES.items():
        if not _sname.startswith("large"):     # fewer near-ties for the finite differences
            variant(_op, _sname)(_binary_case(_f, _np_f, _xs, _ys, {}, {}))


def _emax_case(shape, bs, k):
    def fn(c):
        xs = [c.arg(shape, bs=bs) for _ in range(k)]
        return (lambda: dy.emax([x.expr() for x in xs])), \
            (lambda: from_full(np.max(np.stack([x.value() for x in xs]), axis=0), len(shape)))
    return fn


variant("bmax", "emax_vec3")(_emax_case((4,), 1, 3))
variant("bmax", "emax_batched_mat2")(_emax_case((2, 3), 2, 2))


def _emax_ties_case(c):
    """Ties: the gradient goes to the earliest argument (as DyNet's chain of bmax)."""
    a = c.arg((3,), values=[0.5, -0.2, 0.1])
    b = c.arg((3,), values=[0.5, 0.3, 0.1])
    return (lambda: dy.emax([a.expr(), b.expr()])), \
        (lambda: from_full(np.maximum(a.value(), b.value()), 1))


variant("bmax", "emax_ties", grad_check=False)(_emax_ties_case)

# ----------------------------------------------------------- rounding ----

for _op, _np_f, _akw in (("round", np.round, {"away": 0.6, "hi": 1.4}),
                         ("ceil", np.ceil, {"away": 0.1, "hi": 0.9}),
                         ("floor", np.floor, {"away": 0.1, "hi": 0.9})):
    for _sname, (_shape, _bs) in {"vec": ((4,), 1), "batched_mat": ((2, 2), 2),
                                   "4d": ((2, 1, 2, 2), 1)}.items():
        variant(_op, f"zero_gradient-{_sname}")(_unary_case(
            lambda x, f=getattr(dy, _op): f(x, "zero_gradient"), _np_f, _shape, _bs, _akw))
        # the straight-through gradient is not the finite difference: test_dynet_ops_stats_losses
        variant(_op, f"straight_through-{_sname}", grad_check=False)(_unary_case(
            lambda x, f=getattr(dy, _op): f(x, gradient_mode="straight_through_gradient"),
            _np_f, _shape, _bs, _akw))

# ------------------------------------------------------------ argmax ----

def _one_hot_max(v):
    """The full value of x (dims..., batch) -> the one-hot of its first maximum along
    dimension 0, for each batch element."""
    r = np.zeros_like(v)
    np.put_along_axis(r, np.argmax(v, axis=0)[None], 1.0, axis=0)
    return r


def _argmax_case(shape, bs, mode):
    def fn(c):
        x = c.distinct(shape, bs)        # no ties: the finite difference of y is 0
        return (lambda: dy.argmax(x.expr(), mode)), (lambda: from_full(_one_hot_max(x.value()), 1))
    return fn


for _sname, (_shape, _bs) in {"vec": ((5,), 1), "batched": ((4,), 3), "one": ((1,), 2)}.items():
    variant("argmax", f"zero_gradient-{_sname}")(_argmax_case(_shape, _bs, "zero_gradient"))
    # the straight-through gradient is not the finite difference: test_argmax
    variant("argmax", f"straight_through-{_sname}", grad_check=False)(
        _argmax_case(_shape, _bs, "straight_through_gradient"))


def _argmax_ties_case(c):
    """Ties: the first largest position wins (as DyNet, Eigen's argmax)."""
    x = c.arg((5,), bs=2, values=np.array([[0.5, 2.0, -1.0, 2.0, 2.0], [3.0, 3.0, 0.0, 3.0, 1.0]]).T)
    return (lambda: dy.argmax(x.expr(), "straight_through_gradient")), \
        (lambda: from_full(_one_hot_max(x.value()), 1))


variant("argmax", "ties", grad_check=False)(_argmax_ties_case)

# ------------------------------------------------------------ cumsum, lse ----

_ALONG = {"d0_vec": ((4,), 1, 0), "d1_mat": ((3, 2), 1, 1), "d0_batched_mat": ((2, 3), 2, 0),
          "d2_3d_batched": ((2, 2, 3), 2, 2), "d3_4d": ((2, 1, 2, 3), 1, 3), "d1_col": ((3, 1), 1, 1)}
for _sname, (_shape, _bs, _d) in _ALONG.items():
    variant("cumsum", _sname)(_unary_case(lambda x, d=_d: dy.cumsum(x, d), lambda v, d=_d: np.cumsum(v, axis=d),
                                          _shape, _bs, {}))
    variant("logsumexp_dim", _sname)(_unary_case(
        lambda x, d=_d: dy.logsumexp_dim(x, d),
        lambda v, d=_d: _removed_last(np.logaddexp.reduce(v, axis=d, keepdims=True), [d]),
        _shape, _bs, {"lo": -3, "hi": 3}, nd=max(1, len(_shape) - 1)))
variant("cumsum", "default_d")(_unary_case(dy.cumsum, lambda v: np.cumsum(v, axis=0), (3, 2), 1, {}))
variant("logsumexp_dim", "large_values")(_unary_case(
    lambda x: dy.logsumexp_dim(x, 1), lambda v: _removed_last(np.logaddexp.reduce(v, axis=1, keepdims=True), [1]),
    (2, 3), 1, {"lo": 50, "hi": 60}, nd=1))

# ------------------------------------------------------ moments, std ----
# (the moments are composites ending in mean_elems / mean_dim; std_* are std_dim nodes)


def _power(x, r):
    return x if r == 1 else x ** r


for _r, _shape, _bs, _name in ((1, (4,), 1, "r1_vec"), (2, (3, 2), 2, "r2_batched_mat"),
                               (3, (2, 3, 2), 1, "r3_3d"), (4, (2, 1, 2, 2), 2, "r4_4d_batched")):
    variant("mean_elems", f"moment_elems_{_name}")(_unary_case(
        lambda x, r=_r: dy.moment_elems(x, r),
        lambda v, r=_r: _power(v, r).mean(axis=ALL_DIMS, keepdims=True), _shape, _bs, {}, nd=1))
    variant("mean_dim", f"moment_batches_{_name}")(_unary_case(
        lambda x, r=_r: dy.moment_batches(x, r),
        lambda v, r=_r: _power(v, r).mean(axis=MAX_DIMS, keepdims=True), _shape, max(_bs, 2), {}))


def _moment_dim_variant(name, shape, bs, d, r, b=False, n=0):
    def ref(v):
        axes = _axes(d, b)
        s = _power(v, r).sum(axis=axes, keepdims=True)
        return _removed_last(s / (n if n else np.prod([v.shape[a] for a in axes])), d)
    variant("mean_dim", f"moment_dim_{name}")(_unary_case(
        lambda x: dy.moment_dim(x, d, r, b, n), ref, shape, bs, {}, nd=max(1, len(shape) - len(d))))


_moment_dim_variant("r2_d1", (2, 3), 1, [1], 2)
_moment_dim_variant("r3_d0_batched", (3, 2), 2, [0], 3)
_moment_dim_variant("r2_d02_b", (2, 2, 3), 2, [0, 2], 2, b=True)
_moment_dim_variant("r5_n", (3, 2), 1, [0], 5, n=4)
variant("mean_dim", "mean_batches")(_unary_case(
    dy.mean_batches, lambda v: v.mean(axis=MAX_DIMS, keepdims=True), (2, 3), 3, {}))
variant("mean_dim", "mean_batches_4d")(_unary_case(
    dy.mean_batches, lambda v: v.mean(axis=MAX_DIMS, keepdims=True), (2, 1, 2, 2), 2, {}))


def _std_ref(v, axes, n=0):
    count = n if n else np.prod([v.shape[a] for a in axes])
    mu = v.sum(axis=axes, keepdims=True) / count
    return np.sqrt(((v - mu) ** 2).sum(axis=axes, keepdims=True) / count)


def _std_dim_variant(name, shape, bs, d, b=False, n=0):
    variant("std_dim", name)(_unary_case(
        lambda x: dy.std_dim(x, d, b, n), lambda v: _removed_last(_std_ref(v, _axes(d, b), n), d),
        shape, bs, {}, nd=max(1, len(shape) - len(d))))


_std_dim_variant("d1", (2, 3), 1, [1])
_std_dim_variant("d0_batched", (3, 2), 2, [0])
_std_dim_variant("d01_b", (2, 3, 2), 2, [0, 1], b=True)
_std_dim_variant("d2_4d", (2, 1, 3, 2), 1, [2])
_std_dim_variant("n", (4, 2), 1, [0], n=3)
_std_dim_variant("n_b", (2, 3), 2, [1], b=True, n=9)
_std_dim_variant("d3_4d_batched_many", (2, 2, 1, 7), 3, [3])
_std_dim_variant("all_4d_b", (2, 1, 2, 2), 2, [0, 1, 2, 3], b=True)
for _sname, (_shape, _bs) in {"vec": ((5,), 1), "batched_mat": ((3, 2), 2), "4d": ((2, 1, 2, 2), 1)}.items():
    variant("std_dim", f"std_elems_{_sname}")(_unary_case(
        dy.std_elems, lambda v: _std_ref(v, ALL_DIMS), _shape, _bs, {}, nd=1))
    variant("std_dim", f"std_batches_{_sname}")(_unary_case(
        dy.std_batches, lambda v: _std_ref(v, (MAX_DIMS,)), _shape, max(_bs, 3), {}))

# ------------------------------------------------------- normalisations ----


def _layer_norm_variant(name, shape, bs, gbs=1, bbs=1, xkw=None):
    def fn(c):
        x = c.arg(shape, bs=bs, **(xkw or {}))
        g = c.arg(shape, bs=gbs, lo=0.5, hi=1.5)
        b = c.arg(shape, bs=bbs)

        def ref():
            v = x.value()
            mu = v.mean(axis=ALL_DIMS, keepdims=True)
            sd = np.sqrt(((v - mu) ** 2).mean(axis=ALL_DIMS, keepdims=True))
            return from_full(g.value() * (v - mu) / (sd + 1e-8) + b.value(), len(shape))
        return (lambda: dy.layer_norm(x.expr(), g.expr(), b.expr())), ref
    variant("layer_norm", name)(fn)


_layer_norm_variant("vec", (5,), 1)
_layer_norm_variant("batched_x", (4,), 3)
_layer_norm_variant("mat", (2, 3), 1)
_layer_norm_variant("4d_batched", (2, 1, 2, 2), 2)
_layer_norm_variant("batched_gain_and_bias", (3,), 2, gbs=2, bbs=2)
_layer_norm_variant("unbatched_x_batched_gain", (4,), 1, gbs=3)
_layer_norm_variant("one_element", (1,), 2)
_layer_norm_variant("large_offset", (6,), 1, xkw={"lo": 99.0, "hi": 101.0})


def _weight_norm_variant(name, shape, bs):
    def fn(c):
        w = c.arg(shape, bs=bs)
        g = c.arg((1,), lo=0.5, hi=2.0)

        def ref():
            v = w.value()
            return from_full(g.value() * v / np.sqrt((v * v).sum(axis=ALL_DIMS, keepdims=True)), len(shape))
        return (lambda: dy.weight_norm(w.expr(), g.expr())), ref
    variant("cmult", f"weight_norm_{name}")(fn)


_weight_norm_variant("mat", (3, 2), 1)
_weight_norm_variant("vec_batched", (4,), 2)
_weight_norm_variant("3d", (2, 2, 2), 1)

# ------------------------------------------------------------- losses ----


def _prl_variant(name, shape, bs_x, bs_y, m=None):
    f = dy.pairwise_rank_loss if m is None else (lambda x, y: dy.pairwise_rank_loss(x, y, m=m))
    mm = 1.0 if m is None else m
    variant("rectify", f"pairwise_rank_loss_{name}")(_binary_case(
        f, lambda x, y: np.maximum(0.0, mm - x + y), (shape, bs_x), (shape, bs_y),
        {"lo": -0.3, "hi": 0.3}, {"lo": -0.3, "hi": 0.3}))


_prl_variant("row", (1, 3), 1, 1)
_prl_variant("scalar_batched", (1,), 3, 3, m=0.2)
_prl_variant("bcast_batch", (1, 2), 2, 1, m=0.5)


def _poisson_variant(name, bs, k):
    def fn(c):
        x = c.arg((1,), bs=bs)
        return (lambda: dy.poisson_loss(x.expr(), k)), \
            (lambda: from_full(np.exp(x.value()) - k * x.value() + math.lgamma(k + 1), 1))
    variant("poisson_loss", name)(fn)


_poisson_variant("k0", 1, 0)
_poisson_variant("k3", 1, 3)
_poisson_variant("batched_k7", 3, 7)


def _huber(r, c):
    a = np.abs(r)
    return np.where(a <= c, 0.5 * r * r, c * (a - 0.5 * c))


_DIST_SHAPES = {"vec": (((4,), 1), ((4,), 1)), "mat": (((2, 3), 1), ((2, 3), 1)),
                "batched": (((3,), 2), ((3,), 2)), "bcast_batch": (((3,), 1), ((3,), 3)),
                "4d": (((2, 1, 2, 2), 1), ((2, 1, 2, 2), 2))}
for _sname, (_xs, _ys) in _DIST_SHAPES.items():
    variant("l1_distance", _sname)(_binary_case(
        dy.l1_distance, lambda x, y: np.abs(x - y).sum(axis=ALL_DIMS, keepdims=True), _xs, _ys, {}, {}, nd=1))
    variant("huber_distance", _sname)(_binary_case(
        lambda x, y: dy.huber_distance(x, y, c=0.5),
        lambda x, y: _huber(x - y, 0.5).sum(axis=ALL_DIMS, keepdims=True), _xs, _ys, {}, {}, nd=1))
variant("huber_distance", "default_c")(_binary_case(
    dy.huber_distance, lambda x, y: _huber(x - y, 1.345).sum(axis=ALL_DIMS, keepdims=True),
    ((5,), 1), ((5,), 1), {"lo": -2, "hi": 2}, {"lo": -2, "hi": 2}, nd=1))


def _hinge_dim_ref(x, v, d, m):
    """Per line i (column for d=0, row for d=1) of each batch element k:
    sum over j != v[k][i] of max(0, x[j] + m - x[v[k][i]])."""
    bs = x.shape[MAX_DIMS]
    out = []
    for k in range(bs):
        mat = x[:, :, 0, 0, k] if d == 0 else x[:, :, 0, 0, k].T
        ids = v[k]
        out.append([sum(max(0.0, mat[j, i] + m - mat[ids[i], i]) for j in range(mat.shape[0]) if j != ids[i])
                    for i in range(mat.shape[1])])
    return np.array(out).T.reshape(-1, 1, 1, 1, bs)


def _hinge_dim_variant(name, shape, bs, d, per_batch, m=None):
    def fn(c):
        x = c.distinct(shape, bs)
        lines, length = shape[1 - d], shape[d]
        ids = [[(c.instance + 2 * k + i) % length for i in range(lines)] for k in range(bs)]
        v = ids if per_batch else ids[0]
        kw = {} if m is None else {"m": m}
        return (lambda: dy.hinge_dim(x.expr(), v, d=d, **kw)), \
            (lambda: from_full(_hinge_dim_ref(x.value(), ids if per_batch else [ids[0]] * bs, d,
                                              1.0 if m is None else m), 1))
    variant("reshape", f"hinge_dim_{name}")(fn)


_hinge_dim_variant("d0", (3, 4), 1, 0, False)
_hinge_dim_variant("d1", (3, 4), 1, 1, False, m=0.6)
_hinge_dim_variant("d0_batched_shared_ids", (3, 2), 2, 0, False)
_hinge_dim_variant("d1_batched_ids_per_batch", (2, 3), 3, 1, True)


def _rls_variant(name, shape, bs, restrict, grad_check=True):
    def fn(c):
        x = c.arg(shape, bs=bs, lo=-2, hi=2)

        def ref():
            v = x.value()
            out = np.full(v.shape, -np.inf)
            sub = v[restrict]
            out[restrict] = 0.0 if len(restrict) == 1 else sub - np.logaddexp.reduce(sub, axis=0)
            return from_full(out, len(shape))
        return (lambda: dy.log_softmax(x.expr(), restrict=restrict)), ref
    # -inf outside the restriction: the finite differences are in test_dynet_ops_stats_losses
    variant("restricted_log_softmax", name, grad_check=False)(fn)


_rls_variant("vec", (5,), 1, [0, 2, 3])
_rls_variant("one_row", (4,), 1, [1])
_rls_variant("batched", (4,), 3, [3, 1])
_rls_variant("matrix_columns", (4, 2), 1, [0, 1, 3])

# ------------------------------------------- dropout along dimensions ----


def _dropout_variant(name, f, shape, bs, random):
    variant("dropout_dim", name, random=random)(_unary_case(
        f, None if random else (lambda v: v), shape, bs, {}))


for _sname, (_shape, _bs) in {"mat": ((3, 2), 1), "batched_3d": ((2, 3, 2), 2), "4d": ((2, 1, 2, 2), 2)}.items():
    _dropout_variant(f"d0_p0-{_sname}", lambda x: dy.dropout_dim(x, 0, 0.0), _shape, _bs, False)
    _dropout_variant(f"batch_p0-{_sname}", lambda x: dy.dropout_batch(x, 0.0), _shape, _bs, False)
    _dropout_variant(f"block_p0-{_sname}", lambda x: dy.block_dropout(x, 0.0), _shape, _bs, False)
    _dropout_variant(f"d1_p0.5-{_sname}", lambda x: dy.dropout_dim(x, 1, 0.5), _shape, _bs, True)
    _dropout_variant(f"batch_p0.5-{_sname}", lambda x: dy.dropout_batch(x, 0.5), _shape, _bs, True)
    _dropout_variant(f"block_p0.5-{_sname}", lambda x: dy.block_dropout(x, 0.5), _shape, _bs, True)
variant("scale_gradient", "flip_gradient", grad_scale=-1.0)(_unary_case(
    dy.flip_gradient, lambda v: v, (3, 2), 2, {}))
