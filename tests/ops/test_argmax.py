"""dy.argmax against DyNet itself (dynet_argmax.npz, made by
tests/data/make_dynet_argmax_fixture.py from the cases of tests/data/dynet_argmax.py),
its straight-through and zero gradients (not finite differences, so the generated op
cases of op_cases_dynet.py skip them) and its errors. Values and batching are in the
generated cases."""
import os
import sys

import numpy as np
import pytest

import autobatch as dy
from autobatch.errors import DimensionError
from autobatch.testing import gradients

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
sys.path.insert(0, DATA)
from dynet_argmax import CASES  # noqa: E402
from dynet_ops_stats_losses import run  # noqa: E402

FIXTURE = np.load(os.path.join(DATA, "dynet_argmax.npz"))


@pytest.mark.parametrize("k", range(len(CASES)), ids=[c[0] for c in CASES])
def test_matches_dynet(k):
    name, f, inputs = CASES[k]
    inputs = [(FIXTURE[f"{name}/input{i}"], b) for i, (_, b) in enumerate(inputs)]
    (dims, bs), value, grads = run(dy, f, inputs, k)
    assert list(dims) + [bs] == list(FIXTURE[f"{name}/dims"])
    np.testing.assert_array_equal(value, FIXTURE[f"{name}/value"])
    np.testing.assert_allclose(grads[0], FIXTURE[f"{name}/grad0"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode, scale", [("straight_through_gradient", 1.0), ("zero_gradient", 0.0)])
def test_gradient_modes(mode, scale):
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((6,), init=dy.NumpyInitializer(np.array([0.2, 1.7, -2.5, 3.5, -0.6, 0.0])))
    (analytic, _), = gradients(lambda: dy.argmax(x, mode), [x])
    weights = np.random.default_rng(0).normal(size=(6,)).astype(np.float32)
    np.testing.assert_allclose(analytic, scale * weights, rtol=1e-6)


def test_straight_through_trains_what_comes_before():
    """The gradient passes through to a parameter before the argmax, also batched."""
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((3, 2), init=dy.NumpyInitializer(np.arange(6.0).reshape(3, 2)))
    dy.renew_cg()
    x = dy.inputTensor(np.array([[1.0, -1.0], [0.5, 2.0]]).T, batched=True)
    y = dy.argmax(W * x, "straight_through_gradient")
    r = dy.inputTensor(np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 4.0]]).T, batched=True)
    dy.sum_batches(dy.dot_product(y, r)).backward()
    # d/dW of sum_b r_b . (W x_b) = sum_b r_b x_b^T
    want = np.array([[1, 2, 3], [-1, 0, 4.0]]).T @ np.array([[1.0, -1.0], [0.5, 2.0]])
    np.testing.assert_allclose(W.grad_as_array(), want, rtol=1e-6)


@pytest.mark.parametrize("make, exc, match", [
    (lambda: dy.argmax(dy.inputTensor(np.ones((2, 3))), "zero_gradient"), DimensionError, "only vectors"),
    (lambda: dy.argmax(dy.inputTensor(np.ones((3, 1))), "zero_gradient"), DimensionError, "only vectors"),
    (lambda: dy.argmax(dy.inputTensor(np.ones(3)), "nearest"), ValueError, "Unknown gradient mode for argmax"),
    (lambda: dy.argmax(dy.inputTensor(np.ones(3)), None), ValueError, "Unknown gradient mode for argmax"),
    (lambda: dy.argmax(dy.inputTensor(np.ones(3))), TypeError, "exactly 2 positional"),
    (lambda: dy.argmax("x", "zero_gradient"), TypeError, "expected an Expression"),
])
def test_bad_arguments(make, exc, match):
    dy.renew_cg()
    with pytest.raises(exc, match=match):
        make()
