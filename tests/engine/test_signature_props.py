"""Signatures on generated shapes and attributes (hypothesis).

Two nodes may share a batched kernel only if everything that changes the math is
equal: the op, the output shape, every attribute, the shapes of the stacked arguments
(and so which of them broadcast). Nodes are built from specs whose key is computed
here in Python, independently of the engine; the signature ids the graph reports
(`node_info(i)[3]`) must be equal exactly when the keys are. Shapes go up to the
limits (4 dims + batch, fewer than 2^31 elements; dims around 2^16 and 2^21, where
packed fields used to wrap, and products close to 2^31); shapes past the limits raise
DimensionError.

Large values are made by broadcasting small leaves, (n,) + (1, m) ..., so no node's
memory is allocated before a forward pass.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import autobatch as dy

MAX_DIMS, LIMIT = 4, 2**31 - 1

small = st.integers(1, 4)
large = st.sampled_from([32767, 46340, 2**16 - 1, 2**16 + 1, 2**21 - 1, 2**21, 2**21 + 10])
sizes = st.one_of(small, small, small, large)
f32 = st.floats(-3, 3, allow_nan=False, width=32)


@st.composite
def shapes(draw):
    nd = draw(st.integers(1, MAX_DIMS))
    dims = tuple(draw(sizes) for _ in range(nd))
    bs = draw(st.sampled_from([1, 2, 3]))
    if math.prod(dims) * bs > LIMIT:
        dims = tuple(min(s, 4) for s in dims)
    return dims, bs


def bits(x):
    return np.float32(x).tobytes()       # what the kernel computes with


OPS = ["tanh", "elu", "add_constant", "mul_constant", "scale_gradient", "dropout", "softmax",
       "sum_dim", "mean_dim", "max_dim", "min_dim", "transpose", "pick", "pick_range", "concatenate",
       "cmult", "dropout_dim", "cumsum", "logsumexp_dim", "round", "floor", "std_dim"]
MODES = ("zero_gradient", "straight_through_gradient")
# dropout_dim, dropout_batch, block_dropout: one op; the dimensions sharing a mask
SHARED = {"dim": lambda d: 1 << d, "batch": lambda d: 0b1111, "block": lambda d: 0b11111}


def draw_attrs(draw, name, nd):
    """Attribute values of op `name` for a value of rank nd."""
    dims = st.integers(0, nd - 1)
    if name in ("elu", "add_constant", "mul_constant", "scale_gradient"):
        return (draw(f32),)
    if name == "dropout":
        return (draw(st.floats(0, 0.875, width=32)),)
    if name in ("softmax", "max_dim", "min_dim", "concatenate", "pick", "pick_range", "cumsum",
                "logsumexp_dim"):
        return (draw(dims),)
    if name == "dropout_dim":
        return draw(st.sampled_from(sorted(SHARED))), draw(dims), draw(st.floats(0, 0.875, width=32))
    if name in ("round", "floor"):
        return (draw(st.sampled_from(MODES)),)
    if name in ("sum_dim", "mean_dim", "std_dim"):
        ds = tuple(draw(st.sets(dims, max_size=nd)))
        b = draw(st.booleans()) or not ds
        return ds, b, draw(st.sampled_from([0, 1, 3, 7])) if name != "sum_dim" else 0
    if name == "transpose":
        return (tuple(draw(st.permutations(range(nd)))),)
    if name == "cmult":          # the other argument repeats along the drawn dimensions
        return tuple(draw(st.sets(dims, max_size=nd))), draw(st.booleans())
    return ()


@st.composite
def specs(draw):
    """A spec (dims, bs, op, attributes) and near misses of it: the same but for the
    attributes, one dimension, the batch or the op."""
    dims, bs = draw(shapes())
    name = draw(st.sampled_from(OPS))
    out = [(dims, bs, name, draw_attrs(draw, name, len(dims)))]
    for _ in range(draw(st.integers(0, 6))):
        dims, bs, name, attrs = out[0]
        change = draw(st.sampled_from(["attrs", "attrs", "attrs", "dim", "batch", "op"]))
        if change == "attrs":
            attrs = draw_attrs(draw, name, len(dims))
        elif change == "dim":
            k = draw(st.integers(0, len(dims) - 1))
            dims = dims[:k] + (draw(sizes),) + dims[k + 1:]
            if math.prod(dims) * bs > LIMIT:
                continue
        elif change == "batch":
            bs = draw(st.sampled_from([1, 2, 3]))
            if math.prod(dims) * bs > LIMIT:
                continue
        else:
            name = draw(st.sampled_from(OPS))
            attrs = draw_attrs(draw, name, len(dims))
        out.append((dims, bs, name, attrs))
    return out


class Builder:
    """Values of any shape from leaves of one non-1 dimension each, cached per graph."""

    def __init__(self):
        self.leaves = {}

    def leaf(self, nd, axis, size, bs):
        key = (nd, axis, size, bs)
        if key not in self.leaves:
            dims = tuple(size if k == axis else 1 for k in range(nd))
            self.leaves[key] = dy.zeros(dims, batch_size=bs)
        return self.leaves[key]

    def value(self, dims, bs, keys):
        """A node of shape dims x batch bs (the add nodes on the way get keys too)."""
        nd = len(dims)
        e = self.leaf(nd, 0, dims[0], bs)
        shape = (dims[0],) + (1,) * (nd - 1)
        for k in range(1, nd):
            if dims[k] == 1:
                continue
            arg = tuple(dims[a] if a == k else 1 for a in range(nd))
            out = tuple(max(p, q) for p, q in zip(shape, arg))
            e = e + self.leaf(nd, k, dims[k], 1)
            keys.append((e, ("add", out, bs, (), ((shape, bs), (arg, 1)))))
            shape = out
        return e


def removed(dims, ds):
    kept = tuple(s for k, s in enumerate(dims) if k not in ds)
    return kept or (1,)


def apply(b, x, dims, bs, name, attrs, keys):
    """Apply the op; the key: op, output shape and batch, attributes, stacked arguments."""
    nd, arg = len(dims), ((dims, bs),)
    if name == "tanh":
        out, key_attrs, e = (dims, bs), (), dy.tanh(x)
    elif name == "elu":
        out, key_attrs, e = (dims, bs), (bits(attrs[0]),), dy.elu(x, attrs[0])
    elif name == "add_constant":
        out, key_attrs, e = (dims, bs), (bits(attrs[0]),), x + float(attrs[0])
    elif name == "mul_constant":
        out, key_attrs, e = (dims, bs), (bits(attrs[0]),), x * float(attrs[0])
    elif name == "scale_gradient":
        out, key_attrs, e = (dims, bs), (bits(attrs[0]),), dy.scale_gradient(x, attrs[0])
    elif name == "dropout":
        out, key_attrs, e = (dims, bs), (bits(attrs[0]),), dy.dropout(x, attrs[0])
    elif name == "softmax":
        out, key_attrs, e = (dims, bs), attrs, dy.softmax(x, attrs[0])
    elif name in ("max_dim", "min_dim"):
        out, key_attrs = (removed(dims, attrs), bs), attrs
        e = getattr(dy, name)(x, attrs[0])
    elif name in ("sum_dim", "mean_dim", "std_dim"):
        ds, red_b, n = attrs
        count = math.prod(dims[k] for k in ds) * (bs if red_b else 1)
        scale = 1.0 if name == "sum_dim" else 1.0 / (n or count)
        out = (removed(dims, ds), 1 if red_b else bs)
        key_attrs = (frozenset(ds), red_b, bits(scale))
        e = getattr(dy, name)(x, list(ds), red_b, n)
    elif name == "dropout_dim":
        kind, d, p = attrs
        out, key_attrs = (dims, bs), (bits(p), SHARED[kind](d))
        e = {"dim": lambda: dy.dropout_dim(x, d, p), "batch": lambda: dy.dropout_batch(x, p),
             "block": lambda: dy.block_dropout(x, p)}[kind]()
    elif name == "cumsum":
        out, key_attrs, e = (dims, bs), attrs, dy.cumsum(x, attrs[0])
    elif name == "logsumexp_dim":
        out, key_attrs, e = (removed(dims, attrs), bs), attrs, dy.logsumexp_dim(x, attrs[0])
    elif name in ("round", "floor"):
        out, key_attrs, e = (dims, bs), attrs, getattr(dy, name)(x, attrs[0])
    elif name == "transpose":
        out = (tuple(dims[p] for p in attrs[0]), bs)
        key_attrs, e = attrs, dy.transpose(x, list(attrs[0]))
    elif name == "pick":                 # the index is per-node data, not an attribute
        out, key_attrs = (removed(dims, attrs), bs), attrs
        e = dy.pick(x, dims[attrs[0]] - 1, attrs[0])
    elif name == "pick_range":           # so is the start of the range
        d = attrs[0]
        w = max(1, dims[d] // 2)
        out, key_attrs = (tuple(w if k == d else s for k, s in enumerate(dims)), bs), attrs
        e = dy.pick_range(x, dims[d] - w, dims[d], d)
    elif name == "concatenate":
        d = attrs[0]
        out = (tuple(2 * s if k == d else s for k, s in enumerate(dims)), bs)
        if math.prod(out[0]) * bs > LIMIT:
            return
        key_attrs, arg, e = attrs, ((dims, bs), (dims, bs)), dy.concatenate([x, x], d)
    elif name == "cmult":
        rep, batch_rep = attrs
        other = tuple(1 if k in rep else s for k, s in enumerate(dims))
        obs = 1 if batch_rep else bs
        y = b.value(other, obs, keys)
        out, key_attrs, arg, e = (dims, bs), (), ((dims, bs), (other, obs)), dy.cmult(x, y)
    keys.append((e, (name, out[0], out[1], key_attrs, arg)))


def check_signatures(todo):
    """Build every spec twice (equal keys occur) and compare signatures and keys."""
    dy.renew_cg()
    b, keys = Builder(), []
    for dims, bs, name, attrs in todo + todo:
        apply(b, b.value(dims, bs, keys), dims, bs, name, attrs, keys)
    g = dy.cg()
    info = [(g.node_info(e.vindex), key) for e, key in keys]
    for (op, shape, bs, _, _), key in info:
        assert (op, shape, bs) == key[:3], f"{op} built with shape {shape} x {bs}, expected {key}"
    for i, (a, ka) in enumerate(info):
        for bb, kb in info[i + 1:]:
            assert (a[3] == bb[3]) == (ka == kb), \
                f"signatures {a[3]}, {bb[3]} for {ka} and {kb}"


@settings(max_examples=200, deadline=None)
@given(st.lists(specs(), min_size=1, max_size=3))
def test_signatures_are_equal_exactly_when_the_math_is(groups):
    check_signatures([spec for group in groups for spec in group])


ATTR_VALUES = {   # every value of each attribute (floats: a few, -0.0 included)
    "softmax": [(d,) for d in range(3)], "max_dim": [(d,) for d in range(3)],
    "min_dim": [(d,) for d in range(3)], "concatenate": [(d,) for d in range(3)],
    "pick": [(d,) for d in range(3)], "pick_range": [(d,) for d in range(3)],
    "transpose": [(p,) for p in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]],
    "sum_dim": [(ds, b, 0) for ds in [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
                for b in (False, True) if ds or b],
    "mean_dim": [(ds, b, n) for ds in [(0,), (1,), (0, 2)] for b in (False, True) for n in (0, 1, 4)],
    "std_dim": [(ds, b, n) for ds in [(), (0,), (1,), (0, 2)] for b in (False, True) for n in (0, 1, 4)
                if ds or b],
    "cmult": [(rep, b) for rep in [(), (0,), (1,), (0, 2), (0, 1, 2)] for b in (False, True)],
    **{name: [(v,) for v in (0.0, -0.0, 0.5, 1.0, 1.5, np.nextafter(np.float32(1.0), np.float32(2)))]
       for name in ("elu", "add_constant", "mul_constant", "scale_gradient")},
    "dropout": [(v,) for v in (0.0, -0.0, 0.25, 0.5, np.nextafter(np.float32(0.5), np.float32(1)))],
    "tanh": [()],
    "cumsum": [(d,) for d in range(3)], "logsumexp_dim": [(d,) for d in range(3)],
    "round": [(m,) for m in MODES], "floor": [(m,) for m in MODES],
    "dropout_dim": [(kind, d, p) for kind in ("dim", "batch", "block") for d in range(3)
                    for p in (0.0, 0.25, 0.5, np.nextafter(np.float32(0.5), np.float32(1)))],
}


def test_every_attribute_value_has_its_own_signature():
    """Deterministic complement of the above: every op over each of its attribute values,
    on a few shapes of one rank (and so the same attribute ranges)."""
    todo = [(dims, bs, name, attrs) for dims, bs in [((3, 2, 4), 2), ((3, 2, 4), 1), ((4, 2, 3), 2)]
            for name, values in ATTR_VALUES.items() for attrs in values]
    check_signatures(todo)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 2**33), min_size=1, max_size=MAX_DIMS), st.integers(1, 2**20))
def test_shapes_past_the_limits_raise(dims, bs):
    dims = tuple(dims)
    total = math.prod(dims) * bs
    dy.renew_cg()
    if total > LIMIT:
        with pytest.raises(dy.DimensionError):
            dy.zeros(dims, batch_size=bs)          # checked before any memory is taken
        # ... also when only broadcasting makes them: (d0, 1, ..) + (1, d1, ..) ...
        if len(dims) > 1 and max(dims) <= 2**20 and bs == 1:
            b, keys = Builder(), []
            with pytest.raises(dy.DimensionError):
                b.value(dims, 1, keys)
    elif total <= 2**16:
        assert dy.zeros(dims, batch_size=bs).dim() == (dims, bs)


@pytest.mark.parametrize("make", [
    lambda: dy.zeros((2, 2, 2, 2, 2)),
    lambda: dy.zeros((2**31,)),
    lambda: dy.zeros((2**32 + 1,)),                       # would wrap to 1 in 32 bits
    lambda: dy.zeros((2**16, 2**16 + 1)),
    lambda: dy.zeros((46341,)) + dy.zeros((1, 46341)),    # 2^31 + 4925 elements, by broadcasting
    lambda: dy.zeros((2**16,)) + dy.zeros((1,), batch_size=2**15),
    lambda: dy.concatenate([dy.zeros((2**20,)) + dy.zeros((1, 2**10))] * 2, d=1),
    lambda: dy.reshape(dy.zeros((4,)), (2**32 + 4,)),
    lambda: dy.ParameterCollection().add_parameters((2**31 + 1,)),
    lambda: dy.ParameterCollection().add_lookup_parameters((2**16, 2**15 + 1)),
    lambda: dy.ParameterCollection().add_lookup_parameters((2, 2, 2, 2, 2, 2)),
])
def test_past_the_limits_is_a_dimension_error(make):
    dy.renew_cg()
    with pytest.raises(dy.DimensionError):
        make()
