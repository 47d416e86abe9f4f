"""Every op: forward value against numpy and a finite-difference gradient check with
respect to every argument (all arguments are parameters), for every variant in
op_cases (batched, broadcasting and matrix variants included)."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.engine.optable import op_names
from autobatch.testing import check_grad, gradients

from op_cases import CASES, LEAVES, Ctx, all_variants

VARIANTS = all_variants()


def make(v, seed=0):
    c = Ctx(dy.ParameterCollection(seed=seed), seed=seed)
    build, ref = v.fn(c)
    return c, build, ref


def test_every_op_has_cases():
    missing = [name for name in op_names() if name not in LEAVES and name not in CASES]
    assert not missing, f"ops without test cases in tests/support/op_cases.py: {missing}"


def test_case_table_names_real_ops():
    assert set(CASES) <= set(op_names()) - set(LEAVES)


@pytest.mark.parametrize("v", [v for v in VARIANTS if not v.random], ids=lambda v: v.id)
def test_forward_matches_numpy(v):
    c, build, ref = make(v)
    dy.renew_cg()
    out = build()
    info = dy.cg().node_info(out.vindex)
    assert info[0] == v.op, f"the case for {v.op} built a {info[0]} node"
    expected = ref()
    got = out.npvalue()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("v", [v for v in VARIANTS if v.grad_scale == 1.0 and v.grad_check], ids=lambda v: v.id)
def test_gradient(v):
    c, build, _ = make(v)
    check_grad(build, c.params, eps=1e-3, rtol=1e-2, atol=2e-3)


@pytest.mark.parametrize("v", [v for v in VARIANTS if v.grad_scale != 1.0 and v.grad_check], ids=lambda v: v.id)
def test_gradient_scaled(v):
    """nobackprop (scale 0) and scale_gradient (scale lambda): the value is the
    identity, the gradient that flows back is scaled."""
    c, build, _ = make(v)
    for analytic, numeric in gradients(build, c.params):
        assert np.abs(numeric).max() > 0.01
        np.testing.assert_allclose(analytic, v.grad_scale * numeric, rtol=1e-2, atol=2e-3)


def test_dropout_values():
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((200,), init=1.0)
    for p in (0.25, 0.5):
        dy.renew_cg()
        y = np.asarray(dy.dropout(x.expr(), p).npvalue())
        kept = y != 0
        np.testing.assert_allclose(y[kept], 1.0 / (1.0 - p), rtol=1e-6)
        assert abs((~kept).mean() - p) < 0.15


def test_dropout_gradient_uses_forward_mask():
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((30,), init=1.0)
    dy.renew_cg()
    y = dy.dropout(x.expr(True), 0.5)
    mask = np.asarray(y.npvalue())
    dy.sum_elems(y).backward()
    np.testing.assert_allclose(x.grad_as_array(), mask, rtol=1e-6)
    check_grad(lambda: dy.dropout(x.expr(True), 0.5), [x])


def test_noise_values_and_gradient():
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((400,), init=0.0)
    dy.renew_cg()
    y = np.asarray(dy.noise(x.expr(True), 0.5).npvalue())
    assert abs(y.mean()) < 0.1 and abs(y.std() - 0.5) < 0.1
    check_grad(lambda: dy.noise(x.expr(True), 0.1), [x])


def test_lookup_rows_and_gradient():
    pc = dy.ParameterCollection(seed=0)
    lp = pc.add_lookup_parameters((4, 3))
    np.testing.assert_allclose(_value(lambda: dy.lookup(lp, 2)), lp.as_array()[2])
    np.testing.assert_allclose(_value(lambda: lp[3]), lp.as_array()[3])
    # row 1 used twice: gradients accumulate
    check_grad(lambda: dy.concatenate([dy.lookup(lp, 1), dy.tanh(lp[1]), lp[0]]), [lp])


def _value(build):
    dy.renew_cg()
    return build().npvalue()


def test_check_grad_detects_a_wrong_gradient():
    """The checker itself: nobackprop's (zero) gradient is not the numeric one."""
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((3,))
    with pytest.raises(AssertionError, match="gradient mismatch"):
        check_grad(lambda: dy.tanh(dy.nobackprop(x.expr())), [x])


def test_check_grad_leaves_parameters_unchanged():
    pc = dy.ParameterCollection(seed=0)
    W, x = pc.add_parameters((2, 3)), pc.add_parameters((3,))
    W.grad[...] = 7.0
    before = W.as_array(), x.as_array()
    check_grad(lambda: dy.tanh(W * x), [W, x])
    np.testing.assert_array_equal(W.as_array(), before[0])
    np.testing.assert_array_equal(x.as_array(), before[1])
    assert (W.grad_as_array() == 7.0).all() and (x.grad_as_array() == 0).all()
