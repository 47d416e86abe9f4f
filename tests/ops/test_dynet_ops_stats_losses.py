"""DyNet's moments, cumsum, losses, distances, rounding, argmax, dropout and
normalisation ops against DyNet itself, and what the generated op
cases (op_cases_dynet.py) cannot check: straight-through gradients, the restricted log
softmax's gradient, the structure of the shared dropout masks, the random leaves,
digamma's accuracy, and the errors of bad arguments.

dynet_ops_stats_losses.npz holds DyNet's dims, values and input gradients of the cases of
tests/data/dynet_ops_stats_losses.py (made by tests/data/make_dynet_ops_stats_losses_fixture.py)."""
import math
import os
import sys

import numpy as np
import pytest
import scipy.special

import autobatch as dy
from autobatch.testing import check_grad, gradients

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
sys.path.insert(0, DATA)
from dynet_ops_stats_losses import CASES, run  # noqa: E402

FIXTURE = np.load(os.path.join(DATA, "dynet_ops_stats_losses.npz"))
# dynet38's round/ceil/floor gradient does not follow gradient_mode (it changes from run
# to run: an uninitialised flag); the documented modes are tested below instead
ERRATIC_GRADIENT = {"round_zero", "round_straight", "ceil_straight", "floor_zero"}


@pytest.mark.parametrize("k", range(len(CASES)), ids=[c[0] for c in CASES])
def test_matches_dynet(k):
    name, f, inputs = CASES[k]
    inputs = [(FIXTURE[f"{name}/input{i}"], b) for i, (_, b) in enumerate(inputs)]
    (dims, bs), value, grads = run(dy, f, inputs, k)
    expected = FIXTURE[f"{name}/dims"]
    assert list(dims) + [bs] == list(expected), f"{name}: dims"
    np.testing.assert_allclose(value, FIXTURE[f"{name}/value"], rtol=2e-5, atol=2e-5,
                               err_msg=f"{name}: value")
    for i, g in enumerate(grads):
        want = FIXTURE[f"{name}/grad{i}"]
        if name in ERRATIC_GRADIENT:
            continue
        if name.startswith("poisson_loss"):     # DyNet ignores the incoming gradient
            want = want * np.random.RandomState(k).randn(1)
        np.testing.assert_allclose(g, want, rtol=2e-5, atol=2e-5,
                                   err_msg=f"{name}: gradient of input {i}")


# --------------------------------------------------------------- gradients ----

@pytest.mark.parametrize("fn", ["round", "ceil", "floor"])
def test_straight_through_gradient_is_the_identity(fn):
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((2, 3), init=dy.NumpyInitializer(np.array([[0.2, 1.7, -2.5], [3.5, -0.6, 0.0]])))
    for mode, scale in (("straight_through_gradient", 1.0), ("zero_gradient", 0.0)):
        (analytic, numeric), = gradients(lambda: getattr(dy, fn)(x, mode), [x])
        weights = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
        np.testing.assert_allclose(analytic, scale * weights.ravel(order="F"), rtol=1e-6)


def test_restricted_log_softmax_gradient():
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((6, 2))
    # the restricted rows 1..4 are finite: their finite differences are defined
    check_grad(lambda: dy.pick_range(dy.log_softmax(x, restrict=[4, 1, 3, 2]), 1, 5), [x])
    check_grad(lambda: dy.pick_range(dy.log_softmax(x, restrict=[2]), 2, 3), [x])


def test_restricted_log_softmax_rows_outside_get_no_gradient():
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((5,))
    dy.renew_cg()
    y = dy.log_softmax(x, restrict=[0, 3])
    dy.sum_elems(dy.pick_range(y, 0, 1)).backward()
    g = x.grad_as_array()
    assert g[1] == g[2] == g[4] == 0 and g[0] != 0 and g[3] != 0


@pytest.mark.parametrize("x", [0.37, 1.0, 2.5, 6.0, 13.0, 170.0, 1e5, 1e-3, -0.5, -1.3, -2.7, -7.25])
def test_lgamma_derivative_is_digamma(x):
    pc = dy.ParameterCollection(seed=0)
    p = pc.add_parameters((1,), init=x)
    dy.renew_cg()
    y = dy.lgamma(p)
    assert y.value() == pytest.approx(math.lgamma(x), rel=2e-6, abs=2e-6)
    y.backward()
    xf = float(np.float32(x))       # the float32 argument the kernel sees
    assert p.grad_as_array()[0] == pytest.approx(scipy.special.digamma(xf), rel=2e-6, abs=1e-6)


def test_lgamma_pole_is_not_silently_finite():
    dy.renew_cg()
    x = dy.inputTensor([0.0, -2.0])
    y = dy.lgamma(x)
    assert np.all(np.isinf(y.npvalue()))


def test_std_of_constant_values_has_zero_gradient():
    """std is not differentiable where every deviation is 0: the gradient is taken as 0
    (DyNet's is NaN), so one constant slice does not spoil a whole model."""
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((2, 3), init=dy.NumpyInitializer(np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]])))
    dy.renew_cg()
    s = dy.std_dim(x, [1])
    np.testing.assert_allclose(s.npvalue(), [0.0, np.sqrt(2.0 / 3.0)], rtol=1e-6)
    dy.sum_elems(s).backward()
    g = x.grad_as_array()
    assert np.all(np.isfinite(g)) and np.all(g[0] == 0)
    np.testing.assert_allclose(g[1], np.array([-1.0, 0.0, 1.0]) / 3 / np.sqrt(2.0 / 3.0), rtol=1e-5)
    dy.renew_cg()
    dy.sum_elems(dy.std_batches(x)).backward()       # one batch element: std 0
    assert np.all(np.isfinite(x.grad_as_array()))


# ----------------------------------------------------------------- dropout ----

def _dropped(f, shape, bs=1, seed=0):
    dy.set_random_seed(seed)
    dy.renew_cg()
    x = dy.inputTensor(np.ones(shape + ((bs,) if bs > 1 else ())), batched=bs > 1)
    return np.asarray(f(x).npvalue())


@pytest.mark.parametrize("d", [0, 1, 2])
def test_dropout_dim_shares_the_mask_along_d(d):
    v = _dropped(lambda x: dy.dropout_dim(x, d, 0.5), (4, 5, 6), bs=3)
    assert set(np.unique(v)) <= {0.0, 2.0}
    assert np.all(v == np.take(v, [0], axis=d))                  # constant along d
    other = np.moveaxis(v, d, 0)[0]
    assert 0.2 < (other == 0).mean() < 0.8                       # the rest is random


def test_dropout_batch_drops_whole_batch_elements():
    v = _dropped(lambda x: dy.dropout_batch(x, 0.5), (3, 2), bs=40)
    per_elem = v.reshape(6, 40)
    assert np.all(per_elem == per_elem[:1])
    assert 5 < (per_elem[0] == 0).sum() < 35 and set(np.unique(v)) <= {0.0, 2.0}


def test_block_dropout_drops_all_or_nothing():
    seen = set()
    for seed in range(40):
        v = _dropped(lambda x: dy.block_dropout(x, 0.25), (3, 2), bs=2, seed=seed)
        assert len(np.unique(v)) == 1
        seen.add(float(v.flat[0]))
    assert seen == {0.0, 4.0 / 3.0} or seen == {0.0, np.float32(4.0 / 3.0)}
    assert np.all(_dropped(lambda x: dy.block_dropout(x, 1.0), (3,)) == 0)


def test_dropout_dim_gradient_is_the_mask():
    pc = dy.ParameterCollection(seed=0)
    x = pc.add_parameters((4, 6), init=1.0)
    dy.renew_cg()
    y = dy.dropout_dim(x, 1, 0.5)
    mask = np.asarray(y.npvalue())
    dy.sum_elems(y).backward()
    np.testing.assert_array_equal(x.grad_as_array(), mask)


def test_dropouts_are_reproducible_and_differ_between_graphs():
    a = _dropped(lambda x: dy.dropout_dim(x, 0, 0.5), (5, 8), seed=3)
    b = _dropped(lambda x: dy.dropout_dim(x, 0, 0.5), (5, 8), seed=3)
    np.testing.assert_array_equal(a, b)
    dy.set_random_seed(3)
    dy.renew_cg()
    c = [dy.dropout_dim(dy.ones((5, 8)), 0, 0.5).npvalue() for _ in range(2)]
    assert not np.array_equal(c[0], c[1])                        # each node its own draw


# ----------------------------------------------------------- random leaves ----

def test_random_bernoulli():
    dy.set_random_seed(1)
    dy.renew_cg()
    e = dy.random_bernoulli((50, 40), 0.3, scale=2.0, batch_size=2)
    assert e.dim() == ((50, 40), 2)
    v = e.npvalue()
    assert set(np.unique(v)) == {0.0, 2.0}
    assert abs((v == 2.0).mean() - 0.3) < 0.03
    assert np.all(dy.random_bernoulli(7, 1.0).npvalue() == 1.0)
    assert np.all(dy.random_bernoulli((2, 2), 0.0).npvalue() == 0.0)


def test_random_gumbel():
    dy.set_random_seed(2)
    dy.renew_cg()
    v = dy.random_gumbel((100, 50)).npvalue()
    assert np.all(np.isfinite(v))
    assert abs(v.mean() - np.euler_gamma) < 0.05 and abs(v.std() - np.pi / np.sqrt(6)) < 0.05
    w = dy.random_gumbel(4000, mu=1.0, beta=0.5, batch_size=2).npvalue()
    assert w.shape == (4000, 2) and abs(w.mean() - (1.0 + 0.5 * np.euler_gamma)) < 0.05


def test_random_leaves_reproducible_with_the_seed():
    def draw():
        dy.set_random_seed(9)
        dy.renew_cg()
        return dy.random_gumbel(5).npvalue(), dy.random_bernoulli(5, 0.5).npvalue()
    a, b = draw(), draw()
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


# ------------------------------------------------------------------ errors ----

def _x(shape=(3, 2)):
    dy.renew_cg()
    return dy.inputTensor(np.arange(np.prod(shape), dtype=float).reshape(shape) + 1)


@pytest.mark.parametrize("call,error,match", [
    (lambda x: dy.round(x, "nearest"), ValueError, "Unknown gradient mode for round"),
    (lambda x: dy.floor(x, None), ValueError, "Unknown gradient mode for floor"),
    (lambda x: dy.cumsum(x, 2), dy.DimensionError, "cumsum"),
    (lambda x: dy.logsumexp_dim(x, -1), dy.DimensionError, "logsumexp_dim"),
    (lambda x: dy.logsumexp_dim(x, 1.5), TypeError, "logsumexp_dim"),
    (lambda x: dy.moment_elems(x, 0), ValueError, "order r"),
    (lambda x: dy.moment_dim(x, [0], 2.5, False), TypeError, "moment_dim"),
    (lambda x: dy.moment_dim(x, [], 2, False), dy.DimensionError, "moment_dim: nothing to reduce"),
    (lambda x: dy.std_dim(x, [0, 0], False), dy.DimensionError, "std_dim: a dimension is listed twice"),
    (lambda x: dy.std_dim(x, [5], False), dy.DimensionError, "std_dim: d=5"),
    (lambda x: dy.std_dim(x, [0], 1.5, -1), ValueError, "n: sizes must be 0 or more"),
    (lambda x: dy.moment_dim(x, [2], 2), dy.DimensionError, "moment_dim: d=2"),
    (lambda x: dy.log_softmax(x, restrict=[]), ValueError, "at least one"),
    (lambda x: dy.log_softmax(x, restrict=[0, 0]), ValueError, "twice"),
    (lambda x: dy.log_softmax(x, restrict=[3]), IndexError, "out of range"),
    (lambda x: dy.hinge_dim(x, [0, 1, 2]), ValueError, "3 indices for 2 columns"),
    (lambda x: dy.hinge_dim(x, [[0, 1], [1, 0]]), ValueError, "2 index lists for a batch of 1"),
    (lambda x: dy.hinge_dim(x, [0, 5]), IndexError, "out of range"),
    (lambda x: dy.hinge_dim(x, [0, 1, 2], d=2), dy.DimensionError, "d = 0 or 1"),
    (lambda x: dy.hinge_dim(x, [0, 1], m=-0.5), ValueError, "m must be >= 0"),
    (lambda x: dy.hinge_dim(dy.reshape(x, (6,)), [0]), dy.DimensionError, "matrix"),
    (lambda x: dy.poisson_loss(x, 2), dy.DimensionError, "one element"),
    (lambda x: dy.poisson_loss(dy.pick(dy.pick(x, 0), 0), -1), ValueError, "count"),
    (lambda x: dy.poisson_loss(dy.pick(dy.pick(x, 0), 0), 1.5), TypeError, "poisson_loss"),
    (lambda x: dy.huber_distance(x, x, c=0.0), ValueError, "c must be > 0"),
    (lambda x: dy.huber_distance(x, x, c=float("nan")), ValueError, "finite"),
    (lambda x: dy.l1_distance(x, dy.transpose(x)), dy.DimensionError, "do not match"),
    (lambda x: dy.pairwise_rank_loss(x, dy.reshape(x, (6,))), dy.DimensionError, "do not match"),
    (lambda x: dy.dropout_dim(x, 0, 1.0), ValueError, "p must be in"),
    (lambda x: dy.dropout_dim(x, 3, 0.5), dy.DimensionError, "dropout_dim"),
    (lambda x: dy.dropout_batch(x, -0.1), ValueError, "p must be in"),
    (lambda x: dy.block_dropout(x, 1.5), ValueError, "p must be in"),
    (lambda x: dy.weight_norm(x, x), dy.DimensionError, "one element"),
    (lambda x: dy.layer_norm(x, dy.transpose(x), x), dy.DimensionError, "layer_norm: g"),
    (lambda x: dy.layer_norm(dy.concatenate_to_batch([x, x]), dy.concatenate_to_batch([x, x, x]), x),
     dy.DimensionError, "layer_norm: batch sizes 2 and 3"),
    (lambda x: dy.emax([]), ValueError, "at least one"),
    (lambda x: dy.bmax(x, dy.transpose(x)), dy.DimensionError, "bmax"),
    (lambda x: dy.random_bernoulli((2,), 1.5), ValueError, "p must be in"),
    (lambda x: dy.random_gumbel((2,), beta=0.0), ValueError, "beta"),
    (lambda x: dy.random_gumbel((2, -1)), dy.DimensionError, "random_gumbel"),
])
def test_bad_arguments_raise_clear_errors(call, error, match):
    x = _x()
    with pytest.raises(error, match=match):
        call(x)
    assert dy.sum_elems(x).value() == 21.0          # the graph is still usable


def test_stale_expressions_are_refused():
    x = _x()
    dy.renew_cg()
    for f in (lambda: dy.cumsum(x), lambda: dy.std_elems(x), lambda: dy.hinge_dim(x, [0, 1]),
              lambda: dy.dropout_batch(x, 0.5), lambda: dy.emax([x]), lambda: dy.l1_distance(x, x)):
        with pytest.raises(dy.StaleExpressionError):
            f()
