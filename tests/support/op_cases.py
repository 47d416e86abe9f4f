"""Test cases for every op: one or more variants per op name, each building its inputs
(as parameters, so gradients flow) and applying the op, with a numpy reference.

A variant is a function `fn(ctx) -> (build, ref)`: `build()` applies the op in the
current graph and returns the Expression; `ref()` returns the expected value in
`npvalue()` layout (or None for ops that draw random numbers; those have dedicated
tests). Values may have 1 to 4 dimensions plus the batch. References compute in
float64 on *full* arrays (d0, d1, d2, d3, bs) (see `autobatch.testing.to_full`), so
numpy's broadcasting is DyNet's (per dimension equal or 1, the batch included), and
turn the result into `npvalue()` layout with `from_full(result, nd)`, which states the
rank the op must produce (trailing 1s included): `test_forward_matches_numpy` compares
shapes exactly.

The same variant builds one instance of a multi-instance graph in the batching tests:
`Ctx(instance=i, depth=k)` feeds every non-shared argument through k extra ops, and
arguments created with a `key` are the same parameter in every instance (the shared
weight of matmul, the bias and weights of affine_transform).
"""
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import autobatch as dy

from autobatch.testing import LEAF_OPS as LEAVES, MAX_DIMS, from_full, to_full


# ------------------------------------------------------------ arguments ----

def full_shape(shape, bs=1):
    return tuple(shape) + (1,) * (MAX_DIMS - len(shape)) + (bs,)


class Arg:
    """A differentiable op argument backed by parameters: a Parameters of its shape when
    bs == 1, a LookupParameters of one flat row per batch element read with
    lookup_batch (and reshaped) when bs > 1."""

    def __init__(self, ctx, value, shape, shared):
        """value: float32 full array (d0, d1, d2, d3, bs)."""
        self.shape, self.nd, self.bs = tuple(shape), len(shape), value.shape[MAX_DIMS]
        self.ctx, self.shared = ctx, shared
        self.size = int(np.prod(shape))
        self._cached = None
        if self.bs == 1:
            self.param = ctx.pc.add_parameters(self.shape)
            self.param.set_value(value[..., 0].reshape(self.shape))
        else:
            self.param = ctx.pc.add_lookup_parameters((self.bs, self.size))
            self.param.set_value(np.stack([value[..., k].ravel(order="F") for k in range(self.bs)]))

    def expr(self):
        if self.shared and self._cached is not None and not self._cached.is_stale():
            return self._cached       # one node per graph, as for a Parameters
        if self.bs == 1:
            e = self.param.expr(update=True)
        else:
            e = dy.lookup_batch(self.param, list(range(self.bs)))
            if self.shape != (self.size,):
                e = dy.reshape(e, self.shape)
        self._cached = e
        return self.ctx.chain(e, self)

    def value(self):
        """Current value as a float64 full array (d0, d1, d2, d3, bs)."""
        flat = self.param._flat.astype(np.float64)
        rows = flat.reshape(self.bs, self.size)
        return np.stack([r.reshape(full_shape(self.shape)[:MAX_DIMS], order="F") for r in rows],
                        axis=-1)


class Ctx:
    """Creates the parameters of one instance of a case."""

    def __init__(self, pc, seed=0, instance=0, depth=0, shared=None):
        self.pc = pc
        self.rng = np.random.default_rng(seed)
        self.instance, self.depth = instance, depth
        self.shared = {} if shared is None else shared
        self.params = []

    def _register(self, p):
        if not any(p is q for q in self.params):
            self.params.append(p)

    def arg(self, shape, lo=-1.0, hi=1.0, bs=1, key=None, away=0.0, values=None):
        """An argument of `shape` (1 to 4 dims, + batch bs) with values uniform in
        [lo, hi]; away > 0: magnitudes in [away, hi] with random signs (keeps off
        kinks); values: explicit values (any layout of the right size); key: shared by
        every instance."""
        if key is not None and key in self.shared:
            a = self.shared[key]
            self._register(a.param)
            return a
        full = full_shape(shape, bs)
        if values is not None:
            v = np.asarray(values, dtype=np.float64).reshape(full)
        elif away > 0:
            v = self.rng.uniform(away, hi, full) * self.rng.choice([-1.0, 1.0], full)
        else:
            v = self.rng.uniform(lo, hi, full)
        a = Arg(self, v.astype(np.float32), shape, key is not None)
        self._register(a.param)
        if key is not None:
            self.shared[key] = a
        return a

    def distinct(self, shape, bs=1):
        """Values at least 0.2 apart (a well-defined max, away from ties)."""
        n = int(np.prod(shape)) * bs
        v = self.rng.permutation(n) * 0.25 - n * 0.1 + self.rng.uniform(0, 0.05, n)
        return self.arg(shape, bs=bs, values=v)

    def lookup(self, rows, dim):
        lp = self.pc.add_lookup_parameters((rows, dim))
        lp.set_value(self.rng.uniform(-1, 1, (rows, dim)))
        self._register(lp)
        return lp

    def chain(self, e, arg):
        """Feed a non-shared argument through `depth` exact ops (x * 1.0)."""
        if arg.shared:
            return e
        for _ in range(self.depth):
            e = e * 1.0
        return e


# ----------------------------------------------------------------- table ----

@dataclass
class Variant:
    op: str
    name: str
    fn: Callable
    grad_scale: float = 1.0      # analytic gradient = grad_scale * numeric gradient
    random: bool = False         # draws random numbers: no numpy reference
    grad_check: bool = True      # False: the gradient is not the finite difference
                                 # (straight-through, -inf outputs); tested elsewhere
    grad_kw: dict = field(default_factory=dict)

    @property
    def id(self):
        return f"{self.op}-{self.name}"


CASES = {}


def variant(op, name, **kw):
    def deco(fn):
        CASES.setdefault(op, []).append(Variant(op, name, fn, **kw))
        return fn
    return deco


def all_variants():
    return [v for vs in CASES.values() for v in vs]


SHAPES = {"vec": ((4,), 1), "mat": ((3, 2), 1), "batched": ((3,), 3), "batched_mat": ((2, 2), 2),
          "3d": ((2, 3, 2), 1), "4d_batched": ((2, 1, 3, 2), 2), "col": ((3, 1), 1)}

# ------------------------------------------------------------- unary ----

SELU_L, SELU_A = 1.0507009873554805, 1.6732632423543772


def _elu(x, a):
    return np.where(x > 0, x, a * (np.exp(x) - 1))


# op -> [(variant suffix, expression fn, numpy fn, arg kwargs, Variant kwargs)]
UNARY = {
    "negate": [("", lambda x: -x, np.negative, {}, {})],
    "tanh": [("", dy.tanh, np.tanh, {}, {})],
    "logistic": [("", dy.logistic, lambda x: 1 / (1 + np.exp(-x)), {"lo": -3, "hi": 3}, {})],
    "rectify": [("", dy.rectify, lambda x: np.maximum(x, 0), {"away": 0.1}, {})],
    "elu": [("a1", dy.elu, lambda x: _elu(x, 1.0), {"away": 0.1}, {}),
            ("a0.5", lambda x: dy.elu(x, 0.5), lambda x: _elu(x, 0.5), {"away": 0.1}, {})],
    "selu": [("", dy.selu, lambda x: SELU_L * _elu(x, SELU_A), {"away": 0.1}, {})],
    "exp": [("", dy.exp, np.exp, {}, {})],
    "log": [("", dy.log, np.log, {"lo": 0.5, "hi": 2.0}, {})],
    "sqrt": [("", dy.sqrt, np.sqrt, {"lo": 0.5, "hi": 2.0}, {})],
    "square": [("", dy.square, np.square, {}, {})],
    "abs": [("", dy.abs, np.abs, {"away": 0.1}, {})],
    "cube": [("", dy.cube, lambda x: x ** 3, {}, {})],
    "softsign": [("", dy.softsign, lambda x: x / (1 + np.abs(x)), {"away": 0.1}, {})],
    "log_sigmoid": [("", dy.log_sigmoid, lambda x: -np.logaddexp(0, -x), {"lo": -4, "hi": 4}, {})],
    "sin": [("", dy.sin, np.sin, {}, {})],
    "cos": [("", dy.cos, np.cos, {}, {})],
    "erf": [("", dy.erf, lambda x: np.vectorize(__import__("math").erf)(x), {}, {})],
    "tan": [("", dy.tan, np.tan, {}, {})],
    "asin": [("", dy.asin, np.arcsin, {"lo": -0.8, "hi": 0.8}, {})],
    "acos": [("", dy.acos, np.arccos, {"lo": -0.8, "hi": 0.8}, {})],
    "atan": [("", dy.atan, np.arctan, {"lo": -2, "hi": 2}, {})],
    "sinh": [("", dy.sinh, np.sinh, {}, {})],
    "cosh": [("", dy.cosh, np.cosh, {"away": 0.2}, {})],
    "asinh": [("", dy.asinh, np.arcsinh, {"lo": -2, "hi": 2}, {})],
    "acosh": [("", dy.acosh, np.arccosh, {"lo": 1.2, "hi": 3.0}, {})],
    "atanh": [("", dy.atanh, np.arctanh, {"lo": -0.8, "hi": 0.8}, {})],
    "lgamma": [("", dy.lgamma, np.vectorize(__import__("math").lgamma), {"lo": 0.3, "hi": 4.0}, {}),
               ("negative", dy.lgamma, np.vectorize(__import__("math").lgamma), {"lo": -0.9, "hi": -0.1}, {})],
    "silu": [("b1", dy.silu, lambda x: x / (1 + np.exp(-x)), {"lo": -3, "hi": 3}, {}),
             ("b2", lambda x: dy.silu(x, 2.0), lambda x: x / (1 + np.exp(-2 * x)), {"lo": -3, "hi": 3}, {}),
             ("beta=0.5", lambda x: dy.silu(x, beta=0.5), lambda x: x / (1 + np.exp(-0.5 * x)),
              {"lo": -3, "hi": 3}, {})],
    "add_constant": [("x+c", lambda x: x + 1.5, lambda x: x + 1.5, {}, {}),
                     ("c+x", lambda x: 2 + x, lambda x: 2 + x, {}, {}),
                     ("x-c", lambda x: x - 0.5, lambda x: x - 0.5, {}, {})],
    "mul_constant": [("x*c", lambda x: x * 2.5, lambda x: x * 2.5, {}, {}),
                     ("c*x", lambda x: 3 * x, lambda x: 3 * x, {}, {}),
                     ("x/c", lambda x: x / 4, lambda x: x / 4, {}, {})],
    "constant_minus": [("", lambda x: 2 - x, lambda x: 2 - x, {}, {})],
    "constant_divide": [("", lambda x: 2 / x, lambda x: 2 / x, {"lo": 0.5, "hi": 2.0}, {})],
    "nobackprop": [("", dy.nobackprop, lambda x: x, {}, {"grad_scale": 0.0})],
    "scale_gradient": [("", lambda x: dy.scale_gradient(x, 0.5), lambda x: x, {}, {"grad_scale": 0.5})],
    "dropout": [("p0", lambda x: dy.dropout(x, 0.0), lambda x: x, {}, {}),
                ("p0.3", lambda x: dy.dropout(x, 0.3), None, {}, {"random": True})],
    "noise": [("sd0", lambda x: dy.noise(x, 0.0), lambda x: x, {}, {}),
              ("sd0.1", lambda x: dy.noise(x, 0.1), None, {}, {"random": True})],
}


def _unary_case(f, ref, shape, bs, akw, nd=None):
    """ref maps the full value of x to the full result, of rank nd (default: x's)."""
    def fn(c):
        x = c.arg(shape, bs=bs, **akw)
        out_nd = len(shape) if nd is None else nd
        return (lambda: f(x.expr())), \
            (None if ref is None else lambda: from_full(ref(x.value()), out_nd))
    return fn


for _op, _entries in UNARY.items():
    for _suffix, _f, _ref, _akw, _vkw in _entries:
        for _sname, (_shape, _bs) in SHAPES.items():
            variant(_op, "-".join(filter(None, [_suffix, _sname])), **_vkw)(
                _unary_case(_f, _ref, _shape, _bs, _akw))

# ------------------------------------------------------------ binary ----

BINARY = {
    "add": (lambda a, b: a + b, np.add, {}, {}),
    "subtract": (lambda a, b: a - b, np.subtract, {}, {}),
    "cmult": (dy.cmult, np.multiply, {}, {}),
    "cdiv": (dy.cdiv, np.divide, {}, {"lo": 0.5, "hi": 1.5}),
    "pow": (dy.pow, np.power, {"lo": 0.5, "hi": 1.5}, {"lo": 0.5, "hi": 2.0}),
}
# variant -> ((shape of x, bs of x), (shape of y, bs of y))
BINARY_SHAPES = {
    "vec": (((4,), 1), ((4,), 1)),
    "mat": (((3, 2), 1), ((3, 2), 1)),
    "batched": (((3,), 3), ((3,), 3)),
    "bcast_batch_x": (((3,), 1), ((3,), 3)),
    "bcast_batch_y": (((2, 2), 2), ((2, 2), 1)),
    "bcast_elem_y": (((4,), 1), ((1,), 1)),
    "bcast_elem_x": (((1,), 1), ((3, 2), 1)),
    "bcast_elem_batched": (((3,), 1), ((1,), 2)),
    "3d": (((2, 3, 2), 1), ((2, 3, 2), 1)),
    "4d_batched": (((2, 2, 1, 2), 2), ((2, 2, 1, 2), 2)),
    "bcast_elem_y_3d": (((2, 3, 2), 2), ((1,), 1)),
    # DyNet's broadcasting along any dimension: sizes equal or 1, ranks may differ
    "bcast_rows_y": (((3, 2), 1), ((1, 2), 1)),
    "bcast_cols_y": (((3, 2), 1), ((3,), 1)),
    "bcast_col_vector_y": (((3, 2), 1), ((3, 1), 1)),
    "bcast_cols_x": (((3,), 1), ((3, 2), 1)),
    "bcast_outer": (((3, 1), 1), ((1, 2), 1)),
    "bcast_3d_middle_y": (((2, 3, 2), 1), ((2, 1, 2), 1)),
    "bcast_3d_rank_y": (((2, 3, 2), 1), ((2, 3), 1)),
    "bcast_3d_first_last_y": (((2, 3, 2), 1), ((1, 3, 1), 1)),
    "bcast_batch_and_rows_y": (((3, 2), 2), ((1, 2), 1)),
    "bcast_4d_dims_y_batch_x": (((2, 3, 2, 2), 1), ((1, 3, 1, 2), 2)),
    "bcast_4d_both": (((2, 1, 2, 2), 2), ((1, 3, 1, 2), 2)),
    "bcast_4d_y_all_but_last": (((2, 2, 2, 3), 2), ((1, 1, 1, 3), 1)),
    # longer than a vector register: broadcast gradients must sum every lane
    "large_elem_y": (((37, 3), 1), ((1,), 1)),
    "large_rows_y": (((37, 3), 1), ((1, 3), 1)),
    "large_cols_y": (((37, 3), 2), ((37,), 1)),
}


def _left_repeats(xs, ys):
    """Whether x would be repeated (broadcast) to y's shape somewhere."""
    pad = MAX_DIMS - len(xs[0]), MAX_DIMS - len(ys[0])
    x, y = tuple(xs[0]) + (1,) * pad[0] + (xs[1],), tuple(ys[0]) + (1,) * pad[1] + (ys[1],)
    return any(a < b for a, b in zip(x, y))


def _binary_case(f, ref, xs, ys, xkw, ykw, nd=None):
    """ref maps the full values of x and y to the full result, of rank nd (default:
    the larger of the arguments' ranks)."""
    def fn(c):
        x = c.arg(xs[0], bs=xs[1], **xkw)
        y = c.arg(ys[0], bs=ys[1], **ykw)
        out_nd = max(len(xs[0]), len(ys[0])) if nd is None else nd
        return (lambda: f(x.expr(), y.expr())), (lambda: from_full(ref(x.value(), y.value()), out_nd))
    return fn


for _op, (_f, _ref, _xkw, _ykw) in BINARY.items():
    for _sname, (_xs, _ys) in BINARY_SHAPES.items():
        if _op == "pow" and _ys[0] != (1,):
            continue   # exponents broadcast from one element (as in DyNet)
        if _op == "cdiv" and _left_repeats(_xs, _ys):
            continue   # only the divisor broadcasts (as in DyNet)
        variant(_op, _sname)(_binary_case(_f, _ref, _xs, _ys, _xkw, _ykw))
for _sname, (_xs, _ys) in {"colwise_add": (((3, 2), 1), ((3,), 1)),
                            "colwise_add_batched_x": (((3, 4), 2), ((3, 1), 1)),
                            "colwise_add_batched_bias": (((2, 3), 1), ((2,), 3))}.items():
    variant("add", _sname)(_binary_case(dy.colwise_add, np.add, _xs, _ys, {}, {}, nd=2))
variant("pow", "same_shape")(_binary_case(dy.pow, np.power, ((3,), 1), ((3,), 1),
                                          {"lo": 0.5, "hi": 1.5}, {"lo": 0.5, "hi": 2.0}))

# ------------------------------------------------------------- n-ary ----


def _nary(op, f, ref, specs, nd=None, **akw):
    """specs: {name: [(shape, bs), ...]}; ref maps the full values to the full result,
    of rank nd(shapes) (default: the first argument's)."""
    for name, shapes in specs.items():
        def fn(c, shapes=shapes):
            xs = [c.arg(s, bs=bs, **akw) for s, bs in shapes]
            out_nd = len(shapes[0][0]) if nd is None else nd([s for s, _ in shapes])
            return (lambda: f([x.expr() for x in xs])), \
                (lambda: from_full(ref([x.value() for x in xs]), out_nd))
        variant(op, name)(fn)


_NARY_SHAPES = {"vec": [((4,), 1)] * 3, "mat": [((3, 2), 1)] * 2, "batched": [((3,), 2)] * 3,
                "bcast_batch": [((3,), 1), ((3,), 3), ((3,), 1)], "one": [((2,), 1)],
                "3d": [((2, 3, 2), 1)] * 2, "4d_bcast_batch": [((2, 1, 2, 2), 2), ((2, 1, 2, 2), 1)]}
_nary("esum", dy.esum, lambda vs: sum(np.broadcast_arrays(*vs)), _NARY_SHAPES)
_nary("average", dy.average, lambda vs: sum(np.broadcast_arrays(*vs)) / len(vs), _NARY_SHAPES)
_nary("logsumexp", dy.logsumexp, lambda vs: np.logaddexp.reduce(np.stack(vs), axis=0),
      {k: v for k, v in _NARY_SHAPES.items() if "bcast_batch" not in k})


def _concat_ref(d):
    def ref(vs):
        bs = max(v.shape[MAX_DIMS] for v in vs)
        return np.concatenate([np.broadcast_to(v, v.shape[:MAX_DIMS] + (bs,)) for v in vs], axis=d)
    return ref


def _concat_nd(d):
    return lambda shapes: max(len(shapes[0]), d + 1)      # DyNet: the first argument's rank


_nary("concatenate", lambda xs: dy.concatenate(xs, d=0), _concat_ref(0),
      {"d0_vec": [((2,), 1), ((3,), 1)], "d0_mat": [((2, 3), 1), ((1, 3), 1)],
       "d0_bcast_batch": [((2,), 2), ((3,), 1), ((1,), 2)], "one": [((3,), 1)]}, _concat_nd(0))
_nary("concatenate", lambda xs: dy.concatenate(xs, d=1), _concat_ref(1),
      {"d1_vecs": [((2,), 1), ((2,), 1)], "d1_mat": [((2, 1), 1), ((2, 3), 1)],
       "d1_batched": [((3, 2), 2), ((3,), 2)]}, _concat_nd(1))
_nary("concatenate", dy.concatenate_cols, _concat_ref(1), {"cols": [((2,), 1), ((2, 2), 1)]},
      _concat_nd(1))
_nary("concatenate", lambda xs: dy.concatenate(xs, d=1), _concat_ref(1),
      {"d1_3d": [((2, 3, 2), 1), ((2, 1, 2), 1)], "d1_col_first": [((2, 1), 1), ((2,), 2)]}, _concat_nd(1))
_nary("concatenate", lambda xs: dy.concatenate(xs, d=2), _concat_ref(2),
      {"d2_new_axis": [((2, 3), 1), ((2, 3), 1)], "d2_3d_bcast_batch": [((2, 1, 2), 2), ((2, 1, 1), 1), ((2,), 2)],
       "d2_rank_from_2d_first": [((2, 3), 1), ((2, 3, 2), 1)]}, _concat_nd(2))
_nary("concatenate", lambda xs: dy.concatenate(xs, d=3), _concat_ref(3),
      {"d3_4d": [((2, 1, 2, 2), 1), ((2, 1, 2, 1), 2)], "d3_vecs": [((3,), 1), ((3,), 1), ((3,), 1)]},
      _concat_nd(3))
_nary("concatenate", lambda xs: dy.concatenate(xs, d=0), _concat_ref(0),
      {"d0_4d_batched": [((1, 2, 1, 2), 2), ((2, 2, 1, 2), 2)], "d0_rank_from_first": [((2, 3, 1), 1), ((1, 3), 1)]},
      _concat_nd(0))


def _concat_batch_ref(vs):
    return np.concatenate(vs, axis=MAX_DIMS)


_nary("concatenate_to_batch", dy.concatenate_to_batch, _concat_batch_ref,
      {"vec": [((3,), 1), ((3,), 2)], "mat": [((2, 2), 1), ((2, 2), 1)],
       "3d": [((2, 1, 2), 2), ((2, 1, 2), 1)]})

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

ALL_DIMS = tuple(range(MAX_DIMS))
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

# ------------------------------------------------- softmax and losses ----


def _log_softmax(v, d=0):
    m = v.max(axis=d, keepdims=True)
    return v - m - np.log(np.exp(v - m).sum(axis=d, keepdims=True))


for _sname, (_shape, _bs) in {"vec": ((4,), 1), "matrix_columns": ((4, 3), 1),
                              "batched": ((3,), 3), "batched_mat": ((3, 2), 2),
                              "3d": ((3, 2, 2), 1), "4d_batched": ((2, 3, 1, 2), 2)}.items():
    variant("softmax", _sname)(_unary_case(dy.softmax, lambda v: np.exp(_log_softmax(v)),
                                           _shape, _bs, {"lo": -2, "hi": 2}))
    variant("log_softmax", _sname)(_unary_case(dy.log_softmax, _log_softmax, _shape, _bs,
                                               {"lo": -2, "hi": 2}))
for _sname, (_shape, _bs, _d) in {"d1_rows": ((3, 4), 1, 1), "d1_batched": ((2, 3), 2, 1),
                                  "d1_col": ((3, 1), 1, 1), "d2_3d": ((2, 3, 3), 1, 2),
                                  "d3_4d_batched": ((2, 1, 2, 3), 2, 3)}.items():
    variant("softmax", _sname)(_unary_case(lambda x, d=_d: dy.softmax(x, d),
                                           lambda v, d=_d: np.exp(_log_softmax(v, d)),
                                           _shape, _bs, {"lo": -2, "hi": 2}))


def _index_variant(op, name, f, ref, shape, bs, index, distinct=False, nd=1):
    """Ops with an index (or list of indices) attribute; `index(c)` picks it; ref
    maps the full value and the index to the full result, of rank nd."""
    def fn(c):
        x = c.distinct(shape, bs) if distinct else c.arg(shape, bs=bs)
        v = index(c)
        return (lambda: f(x.expr(), v)), (lambda: from_full(ref(x.value(), v), nd))
    variant(op, name)(fn)


def _per_batch(v, bs):
    return list(v) if isinstance(v, list) else [v] * bs


def _out_bs(x, v):
    """Batch size of an op taking an index or a list of indices: a list over an
    unbatched argument makes a batch."""
    return max(x.shape[MAX_DIMS], len(v) if isinstance(v, list) else 1)


def _column(x, k):
    """Batch element k of a full value (repeated when the value is not batched)."""
    return x[..., 0 if x.shape[MAX_DIMS] == 1 else k]


def _scalars(values):
    """A full (1, 1, 1, 1, bs) result from one number per batch element."""
    return np.array(values, dtype=np.float64).reshape(1, 1, 1, 1, -1)


def _pnls_ref(x, v):
    ls = _log_softmax(x)
    return _scalars([-_column(ls, k)[i, 0, 0, 0] for k, i in enumerate(_per_batch(v, _out_bs(x, v)))])


_index_variant("pickneglogsoftmax", "int", dy.pickneglogsoftmax, _pnls_ref, (4,), 1,
               lambda c: c.instance % 4)
_index_variant("pickneglogsoftmax", "batched_list", dy.pickneglogsoftmax_batch, _pnls_ref, (4,), 3,
               lambda c: [(c.instance + k) % 4 for k in range(3)])
_index_variant("pickneglogsoftmax", "batched_int", dy.pickneglogsoftmax, _pnls_ref, (3,), 2,
               lambda c: 2 - c.instance % 3)
_index_variant("pickneglogsoftmax", "list_over_unbatched", dy.pickneglogsoftmax, _pnls_ref, (4,), 1,
               lambda c: [3, c.instance % 4])


def _hinge_ref(m):
    def ref(x, v):
        out = []
        for k, g in enumerate(_per_batch(v, _out_bs(x, v))):
            col = _column(x, k)[:, 0, 0, 0]
            out.append(sum(max(0.0, m - col[g] + col[i]) for i in range(len(col)) if i != g))
        return _scalars(out)
    return ref


# distinct values 0.25 apart: margins m - x_g + x_i avoid 0 for m = 1.0 and 0.6
_index_variant("hinge", "int", dy.hinge, _hinge_ref(1.0), (5,), 1, lambda c: c.instance % 5,
               distinct=True)
_index_variant("hinge", "margin0.6", lambda x, v: dy.hinge(x, v, 0.6), _hinge_ref(0.6), (5,), 1,
               lambda c: (c.instance + 2) % 5, distinct=True)
_index_variant("hinge", "batched_list", dy.hinge_batch, _hinge_ref(1.0), (4,), 2,
               lambda c: [c.instance % 4, 3], distinct=True)


def _pick_ref(d):
    """Element v along dimension d, that dimension removed (the rest move up)."""
    def ref(x, v):
        cols = [np.take(_column(x, k), i, axis=d) for k, i in enumerate(_per_batch(v, _out_bs(x, v)))]
        return np.stack(cols, axis=-1)[:, :, :, None, :]     # the dimensions after d move up
    return ref


_index_variant("pick", "d0_vec", dy.pick, _pick_ref(0), (4,), 1, lambda c: c.instance % 4)
_index_variant("pick", "d0_mat_row", dy.pick, _pick_ref(0), (3, 2), 1, lambda c: c.instance % 3)
_index_variant("pick", "d1_mat_col", lambda x, v: dy.pick(x, v, 1), _pick_ref(1), (3, 2), 1,
               lambda c: c.instance % 2)
_index_variant("pick", "batched_list", dy.pick_batch, _pick_ref(0), (3,), 3,
               lambda c: [c.instance % 3, 0, 2])
_index_variant("pick", "list_over_unbatched", dy.pick, _pick_ref(0), (4,), 1,
               lambda c: [1, c.instance % 4])
_index_variant("pick", "index_operator", lambda x, v: x[v], _pick_ref(0), (4,), 1,
               lambda c: 3 - c.instance % 4)
_index_variant("pick", "keywords_dim2_3d", lambda x, v: dy.pick(x, index=v, dim=2), _pick_ref(2),
               (2, 3, 3), 1, lambda c: c.instance % 3, nd=2)
_index_variant("pick", "dim1_3d_batched", lambda x, v: dy.pick(x, v, dim=1), _pick_ref(1),
               (2, 3, 2), 2, lambda c: 2 - c.instance % 3, nd=2)
_index_variant("pick", "pick_batch_dim3_4d", lambda x, v: dy.pick_batch(x, v, dim=3), _pick_ref(3),
               (2, 1, 2, 3), 2, lambda c: [c.instance % 3, 1], nd=3)
_index_variant("pick", "dim0_col", dy.pick, _pick_ref(0), (3, 1), 1, lambda c: c.instance % 3)
_index_variant("pick", "pick_batch_over_unbatched_matrix", lambda x, v: dy.pick_batch(x, v, dim=1),
               _pick_ref(1), (2, 3), 1, lambda c: [0, c.instance % 3])


def _pick_range_variant(name, shape, bs, d, s, e, kw=False):
    def fn(c):
        x = c.arg(shape, bs=bs)
        return (lambda: dy.pick_range(x.expr(), s, e, d=d) if kw else dy.pick_range(x.expr(), s, e, d)), \
            (lambda: from_full(np.take(x.value(), range(s, e), axis=d), len(shape)))
    variant("pick_range", name)(fn)


_pick_range_variant("d0_vec", (5,), 1, 0, 1, 4)
_pick_range_variant("d0_mat", (4, 2), 1, 0, 0, 2)
_pick_range_variant("d1_mat", (2, 4), 1, 1, 1, 3)
_pick_range_variant("d0_batched", (4,), 2, 0, 2, 4)
_pick_range_variant("d1_batched_mat", (2, 3), 2, 1, 0, 1)
_pick_range_variant("d2_3d", (2, 3, 4), 1, 2, 1, 3, kw=True)
_pick_range_variant("d1_3d_batched", (2, 3, 2), 2, 1, 1, 2)
_pick_range_variant("d3_4d", (2, 1, 2, 3), 1, 3, 0, 2)
_pick_range_variant("d0_col", (4, 1), 1, 0, 0, 1)


def _slice_case(c):
    x = c.arg((5,))
    return (lambda: x.expr()[1:3]), (lambda: from_full(x.value()[1:3], 1))


variant("pick_range", "slice_operator")(_slice_case)


def _strided_variant(name, shape, bs, index):
    """x[index] with steps (a strided pick_range per sliced dimension)."""
    def fn(c):
        x = c.arg(shape, bs=bs)
        return (lambda: x.expr()[index]), (lambda: from_full(x.value()[index], len(shape)))
    variant("pick_range", name)(fn)


_strided_variant("step2_vec", (5,), 1, np.s_[::2])
_strided_variant("step3_from1_batched", (7,), 2, np.s_[1::3])
_strided_variant("step2_d1_mat", (2, 5), 1, np.s_[:, 0:5:2])
_strided_variant("steps_3d_batched", (4, 3, 2), 2, np.s_[1::2, ::2])
_strided_variant("step2_d3_4d", (2, 1, 2, 5), 1, np.s_[:, :, :, 1::2])
_strided_variant("negative_bounds_mat", (4, 3), 1, np.s_[-3:-1, -2:])


def _pbe_variant(name, shape, bs, idx):
    def fn(c):
        x = c.arg(shape, bs=bs)
        return (lambda: dy.pick_batch_elems(x.expr(), idx)), \
            (lambda: from_full(x.value()[..., idx], len(shape)))
    variant("pick_batch_elems", name)(fn)


_pbe_variant("vec", (3,), 4, [2, 0])
_pbe_variant("repeated", (2, 2), 3, [1, 1, 2])
_pbe_variant("one", (3,), 2, [1])
_pbe_variant("4d", (2, 1, 2, 2), 3, [2, 0])

def _transpose_variant(name, shape, bs, dims=None):
    perm = [1, 0] if dims is None else dims
    f = dy.transpose if dims is None else (lambda x: dy.transpose(x, dims))
    variant("transpose", name)(_unary_case(
        f, lambda v: v.transpose(perm + list(range(len(perm), MAX_DIMS + 1))), shape, bs, {},
        nd=len(perm)))


_transpose_variant("mat", (3, 2), 1)
_transpose_variant("vec", (3,), 1)
_transpose_variant("batched", (2, 3), 2)
_transpose_variant("row", (1, 3), 1)
_transpose_variant("3d_102", (2, 3, 2), 1, [1, 0, 2])
_transpose_variant("3d_201_batched", (2, 3, 4), 2, [2, 0, 1])
_transpose_variant("4d_3120", (2, 3, 1, 2), 1, [3, 1, 2, 0])
_transpose_variant("4d_0213_batched", (2, 1, 3, 2), 2, [0, 2, 1, 3])
_transpose_variant("vec_to_3d", (3,), 1, [2, 1, 0])
_transpose_variant("identity", (2, 3), 1, [0, 1])


def _reshape_variant(name, shape, bs, new):
    def fn(c):
        x = c.arg(shape, bs=bs)

        def ref():
            v = x.value()
            return from_full(np.stack([v[..., k].reshape(full_shape(new)[:MAX_DIMS], order="F")
                                       for k in range(bs)], axis=-1), len(new))
        return (lambda: dy.reshape(x.expr(), new)), ref
    variant("reshape", name)(fn)


_reshape_variant("vec_to_mat", (6,), 1, (2, 3))
_reshape_variant("mat_to_mat", (2, 3), 1, (3, 2))
_reshape_variant("mat_to_vec", (2, 2), 1, (4,))
_reshape_variant("batched", (6,), 2, (3, 2))
_reshape_variant("3d_to_4d", (2, 3, 2), 1, (3, 1, 2, 2))
_reshape_variant("4d_to_col_batched", (2, 1, 2, 2), 2, (8, 1))


def _rebatch_variant(name, shape, bs, new, new_bs):
    """reshape over the batch: all elements, column-major with the batch slowest."""
    def fn(c):
        x = c.arg(shape, bs=bs)

        def ref():
            flat = x.value().reshape(-1, order="F")
            return from_full(flat.reshape(full_shape(new, new_bs), order="F"), len(new))
        kw = {} if new_bs == 1 else {"batch_size": new_bs}
        return (lambda: dy.reshape(x.expr(), new, **kw)), ref
    variant("reshape", name)(fn)


_rebatch_variant("merge_batch_by_default", (2,), 3, (6,), 1)
_rebatch_variant("merge_batch_to_matrix", (2, 2), 2, (4, 2), 1)
_rebatch_variant("spread_over_batch", (6,), 1, (2,), 3)
_rebatch_variant("columns_to_batch", (2, 3), 1, (2,), 3)
_rebatch_variant("regroup_batch", (2, 2), 3, (1,), 12)


def _lookup_batch_variant(name, ids, f=dy.lookup_batch):
    def fn(c):
        lp = c.lookup(5, 3)
        v = ids(c)
        return (lambda: f(lp, v)), \
            (lambda: from_full(lp.as_array().astype(np.float64)[v].T[:, None, None, None, :], 1))
    variant("lookup_batch", name)(fn)


_lookup_batch_variant("distinct", lambda c: [1, 3, (c.instance + 2) % 5])
_lookup_batch_variant("repeated_rows", lambda c: [c.instance % 5, c.instance % 5, 0])
_lookup_batch_variant("one", lambda c: [4])
_lookup_batch_variant("batch_method", lambda c: [2, 0], lambda lp, v: lp.batch(v))

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
import op_cases_select  # noqa: E402,F401  (more cases, registered on import)
import op_cases_linalg  # noqa: E402,F401
import op_cases_dynet  # noqa: E402,F401  (DyNet's ops of issue 8, group A)
