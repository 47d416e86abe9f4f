"""Gradient buffers are not zeroed before backward: the first write of a node's
gradient assigns (gemm beta = 0, the elementwise loops' `set`, a copy instead of a
scatter-add) and kernels that only add get a zeroed buffer just before they run. These
cases put each path under the finite-difference check and the batched == unbatched
check: a gradient written by one consumer or by several (first write then adds, in
either order, the same node twice in one kernel), broadcast arguments (never assigned),
a node that no consumer writes (nobackprop), a computed weight, stacked operands that
are not contiguous (scatter), and memory left full of NaN by an earlier graph."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.testing import check_batching_invariance, check_grad

from strategy_names import BATCHING_STRATEGIES


def params(seed=0):
    pc = dy.ParameterCollection(seed=seed)
    return pc, pc.add_parameters((3, 4)), pc.add_parameters((3, 3)), pc.add_parameters(4)


def vec(i, n=4):
    return dy.inputVector(np.linspace(-0.5, 0.7, n).astype(np.float32) * (1 + 0.3 * i))


# each case: (p -> one output expression of instance i); p = (W, V, u)
CASES = {
    # x = W v: its gradient from one consumer (unary: first write assigns)
    "one-unary": lambda p, i: dy.tanh(p[0] * (vec(i) + p[2])),
    # ... from one binary consumer, both arguments fresh
    "one-binary": lambda p, i: dy.cmult(p[0] * vec(i), p[1] * dy.tanh(p[0] * p[2])),
    # the same node as both arguments of a binary op: assign, then add
    "same-node-twice": lambda p, i: dy.cmult(p[0] * (vec(i) + p[2]), p[0] * (vec(i) + p[2]))
    if False else (lambda x: dy.cmult(x, x))(p[0] * (vec(i) + p[2])),
    # several consumers of different kinds: product (gemm), unary, binary, reduction
    "several": lambda p, i: (lambda x: dy.concatenate([
        dy.tanh(x), p[1] * x, dy.cmult(x, dy.logistic(x)), dy.sum_elems(x) * dy.ones(1)]))(
        p[0] * (vec(i) + p[2])),
    # first write by a kernel that only adds (sum_elems, pick), then first_write kernels
    "adder-first": lambda p, i: (lambda x: dy.tanh(x) + dy.pick(x, 1) + dy.sum_elems(x))(
        p[0] * (vec(i) + p[2])),
    # a broadcast argument (one column against a matrix): its gradient sums, never assigned
    "broadcast": lambda p, i: dy.cmult(dy.tanh(p[0] * p[2]),
                                       dy.reshape(dy.inputVector(np.arange(6, dtype=np.float32)
                                                                 * 0.1 * (i + 1)), (3, 2))),
    # a node that needs a gradient but whose only consumer writes none
    "nobackprop": lambda p, i: dy.tanh(p[0] * p[2]) + dy.nobackprop(p[1] * dy.tanh(p[0] * p[2])),
    # a computed weight: the product's dW is written first with beta = 0
    "computed-weight": lambda p, i: (p[1] * 2.0 + dy.ones((3, 3))) * dy.tanh(p[0] * (vec(i) + p[2])),
    # stacked operands of different chain lengths: not contiguous, scattered back
    "scatter": lambda p, i: p[1] * (lambda x: [x := dy.tanh(x) for _ in range(i + 1)][-1])(
        p[0] * (vec(i) + p[2])),
    # concatenation first: each argument's gradient assigned from its slice
    "concat-first": lambda p, i: dy.tanh(dy.concatenate([p[0] * (vec(i) + p[2]),
                                                         p[1] * dy.tanh(p[0] * p[2])])),
    # ... the same node twice in one concatenation: assign, then add
    "concat-same-twice": lambda p, i: (lambda x: dy.tanh(dy.concatenate([x, x])))(
        p[0] * (vec(i) + p[2])),
    # ... along rows of matrices: several slices per argument
    "concat-rows": lambda p, i: (lambda x, y: dy.tanh(dy.concatenate(
        [dy.concatenate_cols([x, y]), dy.concatenate_cols([y, x])], d=0)))(
        p[0] * (vec(i) + p[2]), p[1] * dy.tanh(p[0] * p[2])),
    # ... an unbatched argument beside a batched one: batch element 0 assigns, 1 adds
    "concat-broadcast": lambda p, i: dy.sum_batches(dy.tanh(dy.concatenate(
        [p[0] * (vec(i) + p[2]), dy.inputTensor(np.ones((3, 2)) * (i + 1), batched=True)]))),
    # affine_transform: bias and two products
    "affine": lambda p, i: dy.affine_transform([dy.tanh(p[0] * p[2]), p[1], dy.tanh(p[0] * vec(i)),
                                                p[1], dy.logistic(p[0] * vec(i))]),
}


@pytest.mark.parametrize("case", sorted(set(CASES) - {"nobackprop"}))
def test_gradient_check(case):
    pc, W, V, u = params()
    check_grad(lambda: dy.esum([CASES[case]((W, V, u), i) for i in range(3)]), [W, V, u],
               rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("case", sorted(CASES))
def test_batched_equals_unbatched(case):
    pc, W, V, u = params(1)
    check_batching_invariance(lambda: [CASES[case]((W, V, u), i) for i in range(4)], [W, V, u],
                              strategies=BATCHING_STRATEGIES, rtol=2e-5, atol=2e-6)


def test_nobackprop_part_adds_nothing(strategy):
    """Finite differences see through nobackprop, so compare with the graph without
    that branch: the node under nobackprop needs a gradient that nothing writes."""
    pc, W, V, u = params(3)

    def grads(build):
        dy.renew_cg(strategy=strategy)
        loss = dy.esum([dy.sum_elems(build(i)) for i in range(3)])
        loss.value()
        for p in (W, V, u):
            p.grad[...] = 0
        loss.backward()
        return [p.grad_as_array().copy() for p in (W, V, u)]

    with_branch = grads(lambda i: CASES["nobackprop"]((W, V, u), i))
    without = grads(lambda i: dy.tanh(W * u))
    for a, b in zip(with_branch, without):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_stale_nan_memory_is_never_read(strategy):
    """A graph whose backward fills the gradient arena with NaN and infinities, then
    graphs that reuse that memory (renew_cg keeps the arenas): their gradients are
    those of a fresh process's, bit for bit, and a second backward of the same graph
    gives the same gradients as the first."""
    pc, W, V, u = params(2)

    def grads_of_step():
        dy.renew_cg(strategy=strategy)
        loss = dy.esum([dy.sum_elems(CASES["several"]((W, V, u), i)) for i in range(4)])
        loss.value()
        for p in (W, V, u):
            p.grad[...] = 0
        loss.backward()
        first = [p.grad_as_array().copy() for p in (W, V, u)]
        for p in (W, V, u):
            p.grad[...] = 0
        loss.backward()
        second = [p.grad_as_array().copy() for p in (W, V, u)]
        for a, b in zip(first, second):
            np.testing.assert_array_equal(a, b)
        return first

    clean = grads_of_step()
    dy.renew_cg(strategy=strategy)
    bad = dy.esum([dy.sum_elems(dy.log(dy.cmult(W * u, dy.zeros(3))) * 0.0
                                + dy.sqrt(V * dy.tanh(W * u) - 10.0)) for _ in range(8)])
    bad.value()
    bad.backward()
    assert not np.isfinite(W.grad_as_array()).all()
    for p in (W, V, u):
        p.grad[...] = 0
    again = grads_of_step()
    for a, b in zip(clean, again):
        np.testing.assert_array_equal(a, b)
