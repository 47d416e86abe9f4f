"""Helpers for testing models and ops built with autobatch.

- `check_grad` / `gradients`: finite-difference gradient checks by random projection
  (HIPS autograd style): the output is reduced to ``loss = <w, output>`` with fixed
  random weights ``w``; the analytic gradient of that loss comes from `backward()`,
  the numeric one from central differences of the same projection.
- `check_batching_invariance`: the same multi-instance graph under several batching
  strategies must give the values and parameter gradients of the unbatched
  (``"none"``) strategy.
- `random_program` / `program_parameters` / `build_program`: random multi-instance
  graphs (plain data, so property-test frameworks can generate and print them).

Gradients only flow into trainable parameters, so every tensor whose gradient is
checked must be a `Parameters` or `LookupParameters` (make test inputs parameters)::

    import autobatch as dy
    from autobatch.testing import check_grad

    pc = dy.ParameterCollection(seed=0)
    W, x = pc.add_parameters((3, 4)), pc.add_parameters(4)
    check_grad(lambda: dy.tanh(W * x), [W, x])

Every graph is built by these helpers after ``set_random_seed(seed)`` and
``renew_cg()``, so ops that draw random numbers (dropout, noise) see the same draws in
every evaluation.
"""
import numpy as np

import autobatch as dy
from autobatch.engine.optable import op_info

__all__ = ["gradients", "check_grad", "check_batching_invariance", "check_schedule",
           "random_program", "program_parameters", "build_program", "to_full", "from_full",
           "MAX_DIMS"]

MAX_DIMS = 4    # dimensions of a value besides the batch (DyNet's Dim)


def to_full(value, shape, bs=1):
    """A value in `npvalue()` layout (`shape`, plus a last batch axis when bs > 1) as a
    float64 array of MAX_DIMS + 1 axes: (d0, d1, d2, d3, bs), the dimensions past
    len(shape) being 1. In this form numpy's broadcasting is DyNet's (per dimension
    equal or 1, the batch included) and references need not care about the rank."""
    shape = tuple(shape)
    if not 1 <= len(shape) <= MAX_DIMS:
        raise ValueError(f"to_full: a shape has 1 to {MAX_DIMS} dimensions, got {shape}")
    full = shape + (1,) * (MAX_DIMS - len(shape)) + (bs,)
    return np.asarray(value, dtype=np.float64).reshape(full)


def from_full(a, nd):
    """The inverse of `to_full`: a (d0, d1, d2, d3, bs) array in the `npvalue()` layout
    of a value of `nd` dimensions (the batch axis dropped when it is 1). The
    dimensions past nd must be 1."""
    a = np.asarray(a)
    if a.ndim != MAX_DIMS + 1 or any(k != 1 for k in a.shape[nd:MAX_DIMS]):
        raise ValueError(f"from_full: {a.shape} is not a full value of {nd} dimensions")
    bs = a.shape[MAX_DIMS]
    return a.reshape(a.shape[:nd] + ((bs,) if bs > 1 else ()))


def _renew(strategy, seed):
    dy.set_random_seed(seed)
    dy.renew_cg(strategy=strategy)


def _trainable(params):
    params = list(params)
    for p in params:
        if not isinstance(p, (dy.Parameters, dy.LookupParameters)):
            raise TypeError(f"gradients can only be checked for Parameters or LookupParameters, "
                            f"got {type(p).__name__}")
    return params


def _projection_weights(value, seed):
    """Fixed random weights shaped like a value (npvalue layout)."""
    return np.random.default_rng(seed).normal(size=np.shape(value)).astype(np.float32)


def _layout(e):
    """Shape of e.npvalue(): the shape, plus the batch as last axis when bs > 1."""
    shape, bs = e.dim()
    return shape + ((bs,) if bs > 1 else ())


def _projected_loss(out, weights):
    """Scalar expression <weights, out> (summed over the batch too)."""
    bs = out.dim()[1]
    w = dy.inputTensor(weights, batched=bs > 1)
    return dy.sum_batches(dy.sum_elems(dy.cmult(w, out)))


def _backward_grads(loss, params):
    """Parameter gradients of one backward pass; the gradients stored in the
    parameters before the call are restored afterwards."""
    saved = [p._grad_flat.copy() for p in params]
    for p in params:
        p._grad_flat[:] = 0
    loss.backward()
    grads = [p._grad_flat.astype(np.float64) for p in params]
    for p, g in zip(params, saved):
        p._grad_flat[:] = g
    return grads


def gradients(build_fn, params, eps=1e-3, seed=0, strategy=None):
    """Analytic and numeric gradients of ``<w, build_fn()>`` w.r.t. each parameter.

    build_fn() builds the graph (in a fresh computation graph) and returns the
    Expression to check. Returns one ``(analytic, numeric)`` pair of float64 arrays per
    parameter, in the parameter's flat storage order. Parameter values and gradients
    are left as they were.
    """
    params = _trainable(params)
    _renew(strategy, seed)
    out = build_fn()
    weights = _projection_weights(out.npvalue(), seed)
    analytic = _backward_grads(_projected_loss(out, weights), params)
    w64 = weights.astype(np.float64)

    def objective():
        _renew(strategy, seed)
        return float(np.sum(w64 * build_fn().npvalue().astype(np.float64)))

    numeric = []
    for p in params:
        flat = p._flat
        num = np.zeros(flat.size)
        for i in range(flat.size):
            orig = flat[i]
            flat[i] = orig + eps
            hi, f_hi = float(flat[i]), objective()
            flat[i] = orig - eps
            lo, f_lo = float(flat[i]), objective()
            flat[i] = orig
            num[i] = (f_hi - f_lo) / (hi - lo)   # the step actually taken in float32
        numeric.append(num)
    return list(zip(analytic, numeric))


def check_grad(build_fn, params, eps=1e-3, rtol=1e-2, atol=1e-3, seed=0, strategy=None):
    """Assert that backward() agrees with central finite differences.

    float32 arithmetic limits the precision: use inputs away from kinks (relu, abs,
    max, hinge) and singularities, eps around 1e-3..1e-2 and tolerances around 1e-2.
    Raises AssertionError naming the parameter and its worst element.
    """
    params = _trainable(params)
    for k, (ana, num) in enumerate(gradients(build_fn, params, eps, seed, strategy)):
        bad = ~np.isclose(ana, num, rtol=rtol, atol=atol)
        if bad.any():
            i = int(np.argmax(np.abs(ana - num) - atol - rtol * np.abs(num)))
            raise AssertionError(
                f"gradient mismatch for parameter {k} ({params[k]!r}) in {int(bad.sum())} of "
                f"{bad.size} elements; worst element {i}: analytic {ana[i]:.6g}, numeric "
                f"{num[i]:.6g}\nanalytic: {np.round(ana, 5)}\nnumeric:  {np.round(num, 5)}")


def _run(build_fn, params, strategy, seed, weights):
    """Build under a strategy; forward all outputs at once; values, grads, stats."""
    _renew(strategy, seed)
    outs = list(build_fn())
    if not outs:
        raise ValueError("build_fn returned no expressions")
    if weights is None:
        weights = [_projection_weights(np.empty(_layout(o)), seed + k) for k, o in enumerate(outs)]
    loss = dy.esum([_projected_loss(o, w) for o, w in zip(outs, weights)])
    loss.forward()
    values = [o.npvalue() for o in outs]
    grads = _backward_grads(loss, params)
    return values, grads, dy.cg().stats(), weights


def check_batching_invariance(build_fn, params=(), strategies=("depth", "agenda"),
                              rtol=1e-5, atol=1e-6, seed=0, reference="none"):
    """Assert that batching does not change the numbers.

    build_fn() builds a multi-instance graph and returns a list of output
    Expressions. It is built once per strategy; all outputs are computed in one
    forward pass (so instances can share batches), then a random projection of them
    is backpropagated. Values of every output and gradients of `params` must match
    the `reference` strategy within rtol/atol. Returns ``{strategy: cg().stats()}``
    so callers can also check how much was batched. Parameter gradients are left as
    they were.
    """
    params = _trainable(params)
    ref_values, ref_grads, ref_stats, weights = _run(build_fn, params, reference, seed, None)
    stats = {reference: ref_stats}
    for s in strategies:
        values, grads, stats[s], _ = _run(build_fn, params, s, seed, weights)
        for k, (v, r) in enumerate(zip(values, ref_values)):
            np.testing.assert_allclose(v, r, rtol=rtol, atol=atol,
                                       err_msg=f"strategy {s!r}: value of output {k}")
        for k, (g, r) in enumerate(zip(grads, ref_grads)):
            np.testing.assert_allclose(g, r, rtol=rtol, atol=atol,
                                       err_msg=f"strategy {s!r}: gradient of parameter {k}")
    return stats


# ops that are never scheduled (materialised when created), from the op table
LEAF_OPS = tuple(name for name, rec in op_info().items() if rec["leaf"])


def _ancestors(info, target):
    seen, stack = {target}, [target]
    while stack:
        for a in info[stack.pop()][4]:
            if a not in seen:
                seen.add(a)
                stack.append(a)
    return seen


def check_schedule(targets, one_node_per_batch=False):
    """Assert the scheduler invariants on what the current graph has run so far,
    where `targets` are the ids of the nodes that were forwarded: every needed
    non-leaf node ran exactly once and nothing else did, a batch holds one signature
    (and one op), in ascending node order unless the memory-layout pass is on (it may
    order a batch by the products that read it: autobatch.engine.layout), and every
    argument ran in an earlier batch (or is a leaf). Returns ``cg().batches()``."""
    from autobatch.engine.layout import layout_enabled
    any_order = layout_enabled()
    g = dy.cg()
    batches = g.batches()
    info = [g.node_info(i) for i in range(g.num_nodes)]
    batch_of = {}
    for b, (op, nodes) in enumerate(batches):
        assert nodes, "an empty batch"
        assert any_order or nodes == sorted(nodes), f"batch {b} is not in node order"
        assert len(set(nodes)) == len(nodes), f"batch {b} holds a node twice"
        assert {info[i][3] for i in nodes} == {info[nodes[0]][3]}, f"batch {b} mixes signatures"
        assert {info[i][0] for i in nodes} == {op}, f"batch {b} mixes ops"
        for i in nodes:
            assert i not in batch_of, f"node {i} ran twice"
            batch_of[i] = b
    needed = set().union(*(_ancestors(info, t) for t in targets))
    scheduled = {i for i in needed if info[i][0] not in LEAF_OPS}
    assert set(batch_of) == scheduled, "every needed non-leaf node runs exactly once, nothing else"
    for i in scheduled:
        for a in info[i][4]:
            assert info[a][0] in LEAF_OPS or batch_of[a] < batch_of[i], \
                f"node {i} ran in batch {batch_of[i]} before its argument {a}"
    if one_node_per_batch:
        assert all(len(nodes) == 1 for _, nodes in batches), "a batch of several nodes"
    return batches


# --------------------------------------------------------------- random graphs ----
# A program is plain data:
#   {"params": [shape, ...],            parameters it uses (see program_parameters)
#    "shared": [step, ...],             values computed once, usable by every instance
#    "instances": [[step, ...], ...]}   one list of steps per instance
# A step is a tuple (kind, ...) whose value references are ("s", k) for shared value k
# or ("i", k) for value k of the same instance. Every value is a vector.

_UNARY = (("tanh", None), ("logistic", None), ("negate", None), ("rectify", None),
          ("elu", 1.0), ("elu", 0.5), ("mul_constant", 2.0), ("mul_constant", 0.5),
          ("add_constant", 1.0), ("add_constant", 2.0))
_BINARY = ("add", "subtract", "cmult")


def _unary_expr(name, attr, x):
    if name == "elu":
        return dy.elu(x, attr)
    if name == "mul_constant":
        return x * attr
    if name == "add_constant":
        return x + attr
    if name == "negate":
        return -x
    return getattr(dy, name)(x)


_BINARY_EXPR = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "cmult": dy.cmult}

_APPLY = {
    "input": lambda step, get, ps: dy.inputVector(step[2]),
    "param": lambda step, get, ps: ps[step[1]].expr(True),
    "unary": lambda step, get, ps: _unary_expr(step[1], step[2], get(step[3])),
    "binary": lambda step, get, ps: _BINARY_EXPR[step[1]](get(step[2]), get(step[3])),
    "matmul": lambda step, get, ps: ps[step[1]] * get(step[2]),
    "affine": lambda step, get, ps: dy.affine_transform([ps[step[1]], ps[step[2]], get(step[3])]),
    "esum": lambda step, get, ps: dy.esum([get(r) for r in step[1]]),
    "concatenate": lambda step, get, ps: dy.concatenate([get(r) for r in step[1]]),
    "pick_range": lambda step, get, ps: dy.pick_range(get(step[1]), step[2], step[3]),
    "softmax": lambda step, get, ps: dy.softmax(get(step[1])),
    "dot_product": lambda step, get, ps: dy.dot_product(get(step[1]), get(step[2])),
}


def _random_step(rng, avail, param, dims):
    """One random step over the available (ref, dim) values; returns (step, dim)."""
    def pick():
        return avail[rng.integers(len(avail))]

    def same_dim(d):
        cands = [r for r, e in avail if e == d]
        return cands[rng.integers(len(cands))]

    kinds = ["input", "param"] if not avail else \
        ["input", "param", "unary", "unary", "binary", "binary", "matmul", "affine", "esum",
         "concatenate", "pick_range", "softmax", "dot_product"]
    kind = kinds[rng.integers(len(kinds))]
    if kind == "input":
        d = int(rng.choice(dims))
        return ("input", d, [float(v) for v in rng.uniform(-1, 1, d)]), d
    if kind == "param":
        d = int(rng.choice(dims))
        return ("param", param((d,))), d
    ref, d = pick()
    if kind == "unary":
        name, attr = _UNARY[rng.integers(len(_UNARY))]
        return ("unary", name, attr, ref), d
    if kind == "binary":
        return ("binary", _BINARY[rng.integers(len(_BINARY))], ref, same_dim(d)), d
    if kind in ("matmul", "affine"):
        out = int(rng.choice(dims))
        if kind == "matmul":
            return ("matmul", param((out, d)), ref), out
        return ("affine", param((out,)), param((out, d)), ref), out
    if kind == "esum":
        return ("esum", [ref] + [same_dim(d) for _ in range(rng.integers(1, 3))]), d
    if kind == "concatenate":
        ref2, d2 = pick()
        return ("concatenate", [ref, ref2]), d + d2
    if kind == "pick_range" and d > 1:
        s = int(rng.integers(0, d - 1))
        e = int(rng.integers(s + 1, d + 1))
        return ("pick_range", ref, s, e), e - s
    if kind == "dot_product":
        return ("dot_product", ref, same_dim(d)), 1
    return ("softmax", ref), d


def random_program(rng, n_instances=4, max_steps=6, n_shared=2, dims=(1, 2, 3, 4)):
    """A random program: `n_instances` instances of 1..max_steps random steps each
    (so lengths and depths differ), over `n_shared` values shared by all instances
    and parameters shared by shape. `rng` is a numpy Generator."""
    shapes, index = [], {}

    def param(shape):
        if shape not in index:
            index[shape] = len(shapes)
            shapes.append(shape)
        return index[shape]

    shared, shared_avail = [], []
    for k in range(n_shared):
        step, d = _random_step(rng, shared_avail, param, dims)
        shared.append(step)
        shared_avail.append((("s", k), d))
    instances = []
    for _ in range(n_instances):
        steps, avail = [], list(shared_avail)
        for k in range(int(rng.integers(1, max_steps + 1))):
            step, d = _random_step(rng, avail, param, dims)
            steps.append(step)
            avail.append((("i", k), d))
        instances.append(steps)
    return {"params": shapes, "shared": shared, "instances": instances}


def program_parameters(program, pc):
    """The parameters a program uses, created in ParameterCollection `pc`."""
    return [pc.add_parameters(shape) for shape in program["params"]]


def _refs(step):
    for x in step[1:]:
        if isinstance(x, tuple) and len(x) == 2 and x[0] in ("s", "i"):
            yield x
        elif isinstance(x, list):
            yield from (r for r in x if isinstance(r, tuple))


def build_program(program, params):
    """Build a program in the current graph; returns one scalar Expression per
    instance: the sum of the elements of every value no other step of the instance
    uses."""
    shared = []
    for step in program["shared"]:
        shared.append(_APPLY[step[0]](step, lambda r: shared[r[1]], params))
    outs = []
    for steps in program["instances"]:
        own, used = [], set()

        def get(r):
            return shared[r[1]] if r[0] == "s" else own[r[1]]
        for step in steps:
            own.append(_APPLY[step[0]](step, get, params))
            used.update(k for kind, k in _refs(step) if kind == "i")
        outs.append(dy.esum([dy.sum_elems(v) for k, v in enumerate(own) if k not in used]))
    return outs
