"""sparsemax on the inputs where a plain implementation breaks: values far from 0
(above about 2^24 the 1 of the support test is lost in float32 unless the input is
shifted by its maximum), NaN and infinities, in one node, in a batch of nodes and in
the batch dimension, forward and backward.

DyNet 2.2 (measured with dynet38): [1e10, 0, 0] gives [inf, inf, inf] there, and
[3e7, 3e7 + 4, 0] too; a NaN gives an all-NaN output, as here, but a zero gradient,
where this gives NaN (docs/dynet.md)."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.testing import check_batching_invariance, check_grad


def exact(x):
    """sparsemax in float64, shifted by the maximum (the float32 input, exactly)."""
    z = np.asarray(x, dtype=np.float64)
    z = z - z.max()
    s = np.sort(z)[::-1]
    k = np.arange(1, len(z) + 1)
    support = 1 + k * s > np.cumsum(s)
    kz = k[support][-1]
    tau = (np.cumsum(s)[kz - 1] - 1) / kz
    return np.maximum(z - tau, 0)


def param(pc, values):
    p = pc.add_parameters(len(values))
    p.set_value(np.asarray(values, dtype=np.float32))
    return p


PATTERNS = [[0.5, 1.2, -0.3, 1.0], [0.0, 4.0, -8.0, 4.0], [3.0, 0.0, 0.0], [0.3, 0.1, 0.2, 0.25, -2.0],
            [0.0, 0.75, -1.0, 0.75], [-1.0, 0.0, 1.0, 1.0]]
OFFSETS = [0.0, 2.0 ** 20, 2.0 ** 24, 2.0 ** 25, 3e7, 1e10, 1e20, 1e38, -2.0 ** 25, -1e10, -1e38]


@pytest.mark.parametrize("offset", OFFSETS, ids=repr)
@pytest.mark.parametrize("pattern", PATTERNS, ids=str)
def test_far_from_zero_the_mass_stays_one(pattern, offset):
    x = np.float32(np.asarray(pattern) + offset)        # what the input holds, rounded
    dy.renew_cg()
    y = dy.sparsemax(dy.inputVector(x)).npvalue()
    np.testing.assert_allclose(y, exact(x), rtol=1e-6, atol=1e-6)
    assert abs(float(np.sum(y, dtype=np.float64)) - 1) < 1e-6 and (y >= 0).all()


def test_the_examples_of_the_report():
    dy.renew_cg()
    np.testing.assert_array_equal(dy.sparsemax(dy.inputVector([1e10, 0, 0])).npvalue(), [1, 0, 0])
    np.testing.assert_array_equal(dy.sparsemax(dy.inputVector([3e7, 3e7 + 4, 0])).npvalue(), [0, 1, 0])


@pytest.mark.parametrize("offset", [0.0, 2.0 ** 25, 1e10, -1e10], ids=repr)
def test_batched_nodes_and_batch_elements_equal_one_node_each(offset):
    """Several nodes of one shape (one batch under every batching strategy), one of
    them with batch size 2, against strategy none, values and gradients."""
    pc = dy.ParameterCollection()
    ps = [param(pc, np.asarray(p[:3]) * 0.5 + offset) for p in PATTERNS[:3]]
    E = pc.add_lookup_parameters((2, 3))
    E.init_row(0, np.float32(np.asarray([0.1, 0.9, 0.2]) + offset))
    E.init_row(1, np.float32(np.asarray([-1.0, 0.3, 0.35]) + offset))

    def build():
        return [dy.sparsemax(p) for p in ps] + [dy.sparsemax(dy.lookup_batch(E, [0, 1]))]

    check_batching_invariance(build, ps + [E], strategies=("depth", "agenda", "critical", "lookahead"))
    dy.renew_cg()
    out = build()
    for p, o in zip(ps, out):
        np.testing.assert_allclose(o.npvalue(), exact(p.as_array()), atol=1e-6)
    for e in range(2):
        np.testing.assert_allclose(out[-1].npvalue()[:, e], exact(E.as_array()[e]), atol=1e-6)


@pytest.mark.parametrize("offset", [0.0, 1000.0, -1000.0], ids=repr)
@pytest.mark.parametrize("pattern", PATTERNS, ids=str)
def test_gradient_against_finite_differences(pattern, offset):
    pc = dy.ParameterCollection()
    p = param(pc, np.asarray(pattern) + offset)
    check_grad(lambda: dy.sparsemax(p), [p], eps=1e-2, rtol=1e-2, atol=2e-3)


@pytest.mark.parametrize("far, near, grad", [
    (2.0 ** 25 + np.array([0.0, 4.0, -8.0, 4.0]), [0.0, 0.75, -1.0, 0.75], [0, -1, 0, 1]),
    ([0.0, 1e10, -2e10, 1e10], [0.0, 0.75, -1.0, 0.75], [0, -1, 0, 1]),
    ([0.0, 1e30, -2e30, 1e30], [0.0, 0.75, -1.0, 0.75], [0, -1, 0, 1]),
    ([-3e38, 0.0, 3e38, 3e38], [-1.0, 0.0, 1.0, 1.0], [0, 0, -0.5, 0.5]),     # x - max overflows to -inf
], ids=["2^25", "1e10", "1e30", "3e38"])
def test_gradient_far_from_zero_is_the_one_near_zero(far, near, grad):
    """The same support far from 0 (where finite differences cannot go) and near it
    (where they check it): the same gradient, w_i - mean of w over the support."""
    grads = []
    for x in (near, far):
        pc = dy.ParameterCollection()
        p = param(pc, x)
        dy.renew_cg()
        dy.dot_product(dy.sparsemax(p), dy.inputVector([1.0, 2.0, 3.0, 4.0])).backward()
        grads.append(p.grad_as_array())
    np.testing.assert_allclose(grads[0], grad, atol=1e-6)
    np.testing.assert_array_equal(grads[1], grads[0])


def nan_and_inf_inputs(pc):
    """x = p + q for a parameter p and a constant q holding NaN, +inf or -inf (made
    by sqrt(-1), exp(100) and log(0): inputs refuse them)."""
    p = param(pc, [0.1, 0.5, 0.2])
    made = {"nan": dy.sqrt(dy.inputVector([-1.0, 1.0, 1.0])),
            "+inf": dy.exp(dy.inputVector([100.0, 0.0, 0.0])),
            "-inf": dy.log(dy.inputVector([0.0, 1.0, 1.0])),
            "all -inf": dy.log(dy.inputVector([0.0, 0.0, 0.0]))}
    return p, made


@pytest.mark.parametrize("case", ["nan", "+inf", "all -inf"])
def test_no_projection_gives_nan_forward_and_backward(case):
    pc = dy.ParameterCollection()
    dy.renew_cg()
    p, made = nan_and_inf_inputs(pc)
    y = dy.sparsemax(p + made[case])
    assert np.isnan(y.npvalue()).all()
    dy.sum_elems(dy.cmult(y, dy.inputVector([1.0, 2.0, 3.0]))).backward()
    assert np.isnan(p.grad_as_array()).all()


def test_minus_infinity_gets_nothing_and_the_rest_is_the_projection():
    pc = dy.ParameterCollection()
    dy.renew_cg()
    p, made = nan_and_inf_inputs(pc)
    y = dy.sparsemax(p + made["-inf"])
    np.testing.assert_allclose(y.npvalue(), [0, *exact([0.5, 0.2])], atol=1e-6)
    dy.dot_product(y, dy.inputVector([1.0, 2.0, 3.0])).backward()
    np.testing.assert_allclose(p.grad_as_array(), [0, -0.5, 0.5], atol=1e-6)


@pytest.mark.parametrize("strategy", ["none", "depth", "agenda"])
def test_a_nan_in_one_batch_element_leaves_the_other_alone(strategy):
    pc = dy.ParameterCollection()
    E = pc.add_lookup_parameters((2, 3))
    E.init_row(0, [0.1, 0.5, 0.2])
    E.init_row(1, [0.1, 0.5, 0.2])
    dy.renew_cg(strategy=strategy)
    odd = dy.sqrt(dy.inputTensor(np.array([[-1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]), batched=True))
    ys = [dy.sparsemax(dy.cmult(dy.lookup_batch(E, [0, 1]), odd)) for _ in range(2)]
    loss = dy.sum_batches(dy.esum([dy.sum_elems(dy.cmult(y, dy.inputVector([1.0, 2.0, 3.0]))) for y in ys]))
    loss.value()
    for y in ys:
        v = y.npvalue()
        assert np.isnan(v[:, 0]).all()
        np.testing.assert_allclose(v[:, 1], exact([0.1, 0.5, 0.2]), atol=1e-6)
    loss.backward()
    g = E.grad_as_array()
    assert np.isnan(g[0]).all()
    np.testing.assert_allclose(g[1], 2 * (np.array([1.0, 2.0, 3.0]) - 2), atol=1e-6)   # two nodes, support all
