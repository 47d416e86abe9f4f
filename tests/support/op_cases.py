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
    gemm: bool = False           # a composite with a product inside (batched values equal
                                 # the unbatched ones to rounding, as GEMM ops')

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
ALL_DIMS = tuple(range(MAX_DIMS))

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

# ------------------------------------------------------ other families ----
# Each module registers its variants on import; the order (here, then these) is the
# order of CASES and of the generated tests.

import op_cases_products  # noqa: E402,F401  (matmul, affine_transform, reductions)
import op_cases_index  # noqa: E402,F401  (softmax, losses, picks, reshapes, lookup_batch)
import op_cases_nn  # noqa: E402,F401  (fused LSTM ops, conv2d, maxpooling2d)
import op_cases_select  # noqa: E402,F401  (more cases, registered on import)
import op_cases_linalg  # noqa: E402,F401
import op_cases_dynet  # noqa: E402,F401  (DyNet's statistics, losses, distances, rounding)
