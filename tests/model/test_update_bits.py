"""The compiled update rules (autobatch/model/update_rules.pyx and update_rules.h) bit for
bit against the numpy `rule` of each trainer (autobatch/model/trainers.py), on sizes around
the vector widths (a vector of 4, 8 or 16 floats and its tails), on arrays that start
off a vector boundary (each array its own way), dense and sparse (used rows), with and
without clipping and weight decay, in place and into another buffer (the step of a
parameter a live graph reads), at every SIMD level this processor runs."""
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import autobatch as dy
from autobatch.model import update_rules as _update
from autobatch.runtime import param_buffers

TRAINERS = {
    "sgd": (dy.SimpleSGDTrainer, {"learning_rate": 0.05}),
    "momentum": (dy.MomentumSGDTrainer, {"learning_rate": 0.03, "mom": 0.8}),
    "adagrad": (dy.AdagradTrainer, {"learning_rate": 0.2, "eps": 1e-6}),
    "adadelta": (dy.AdadeltaTrainer, {"eps": 1e-4, "rho": 0.9}),
    "rmsprop": (dy.RMSPropTrainer, {"learning_rate": 0.01, "eps": 1e-6, "rho": 0.8}),
    "adam": (dy.AdamTrainer, {"alpha": 0.01, "beta_1": 0.8, "beta_2": 0.99, "eps": 1e-6}),
    "amsgrad": (dy.AmsgradTrainer, {"alpha": 0.01, "beta_1": 0.8, "beta_2": 0.99, "eps": 1e-6}),
}
# the large size is above the size from which the engine splits a dense update over its
# threads (the tests force the split at every size)
SIZES = [0, 1, 15, 16, 17, 31, 33, 1000, 70001]
T = 3                      # the step number (Adam's bias correction)
SCALE = 0.37               # a clipping factor
KEEP = np.float32(1 - 0.05)


@pytest.fixture(params=_update.simd_levels())
def level(request):
    """Each SIMD level this processor runs, forced for the test."""
    old = _update.set_simd_level(request.param)
    yield request.param
    _update.set_simd_level(old)


def trainer(name):
    cls, kw = TRAINERS[name]
    tr = cls(dy.ParameterCollection(), **kw)
    tr.updates = T - 1
    return tr


def placed(rng, n, shift, scale=1.0, positive=False):
    """n random float32 (a few zeros) in a C-contiguous view starting `shift` floats
    past a 64-byte boundary of a larger array."""
    base = np.zeros(n + 32, dtype=np.float32)
    start = (-base.ctypes.data // 4) % 16 + shift
    a = base[start:start + n]
    a[...] = rng.normal(size=n) * scale
    if positive:
        a[...] = np.abs(a)
    a[rng.random(n) < 0.05] = 0
    return a


def arrays(name, n, seed, shifts=(0, 0, 0, 0, 0)):
    """values, gradient and the rule's state arrays: random, state as a rule leaves it
    (second moments and accumulators >= 0)."""
    rng = np.random.default_rng(seed)
    theta = placed(rng, n, shifts[0])
    grad = placed(rng, n, shifts[1], scale=2.0)
    states = [placed(rng, n, shifts[2 + k], scale=0.1, positive=k > 0 or name in
                     ("adagrad", "adadelta", "rmsprop")) for k in range(len(trainer(name).state_names))]
    if name == "amsgrad":      # vhat at least v here, below it there
        states[2][...] = np.where(rng.random(n) < 0.5, states[1] * 1.5, states[1] * 0.5)
    return theta, grad, states


def reference(name, theta, grad, states, scale, keep, rows=None):
    """The numpy rule on copies: (values, states) after one step."""
    tr = trainer(name)
    theta, grad, states = theta.copy(), grad.copy(), [s.copy() for s in states]
    if rows is None:
        tr.rule(theta, grad * np.float32(scale), T, *states)
    else:
        th, st = theta[rows], [s[rows] for s in states]
        tr.rule(th, grad[rows] * np.float32(scale), T, *st)
        theta[rows] = th
        for s, g in zip(states, st):
            s[rows] = g
    if keep != 1:
        theta *= keep
    return theta, states


def assert_same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)       # (a NaN's payload: numpy's own)
    assert np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def hyper(name, scale, keep):
    return dict(trainer(name)._hyper(), scale=scale, keep=keep)


SHIFTS = [(0, 0, 0, 0, 0), (1, 3, 5, 7, 2), (3, 0, 1, 2, 15)]
# (clipping factor, weight-decay factor): none, clipping, decay, both
CLIP_DECAY = [(1.0, 1.0), (SCALE, 1.0), (1.0, KEEP), (SCALE, KEEP)]


@pytest.mark.parametrize("in_place", [True, False], ids=["in_place", "out_of_place"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", list(TRAINERS))
def test_dense_rule_bits(name, n, threads, in_place, level):
    """With 2 threads every size is split over them (parts that start on 64-byte lines
    of the values: 16 floats, shifted by where the values start)."""
    old_threads, old_split = dy.get_num_threads(), _update.set_split_min(1)
    dy.set_num_threads(threads)
    try:
        for (scale, keep), (k, shifts) in itertools.product(CLIP_DECAY, enumerate(SHIFTS)):
            theta, grad, states = arrays(name, n, seed=n + 7 * k, shifts=shifts)
            want, want_states = reference(name, theta, grad, states, scale, keep)
            out = theta if in_place else placed(np.random.default_rng(k), n, shifts[-1])
            _update.rule_on_arrays(_update.RULES[name], out, theta, grad, states,
                                   **hyper(name, scale, keep))
            assert_same_bits(out, want)
            for s, w in zip(states, want_states):
                assert_same_bits(s, w)
            assert not grad.any()
    finally:
        dy.set_num_threads(old_threads)
        _update.set_split_min(old_split)


@pytest.mark.parametrize("scale,keep", CLIP_DECAY, ids=["plain", "clip", "decay", "clip+decay"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", list(TRAINERS))
def test_dense_slot_bits(name, n, scale, keep, level):
    """The trainer's path: a parameter's Slot stepped by `step`, its values in a
    ValueBuffers (in place: no graph reads them)."""
    buf = param_buffers.ValueBuffers(n)
    theta, grad, states = arrays(name, n, seed=n)
    buf.current[...] = theta
    want, want_states = reference(name, theta, grad, states, scale, keep)
    sl = _update.Slot(buf, grad, states)
    _update.step(None, _update.RULES[name], [sl], [], [], [], 0, None, **hyper(name, scale, keep))
    assert_same_bits(buf.current, want)
    for s, w in zip(states, want_states):
        assert_same_bits(s, w)
    assert not grad.any()


@pytest.mark.parametrize("scale,keep", CLIP_DECAY, ids=["plain", "clip", "decay", "clip+decay"])
@pytest.mark.parametrize("row_size", SIZES[:-1] + [4099])
@pytest.mark.parametrize("name", list(TRAINERS))
def test_sparse_rule_bits(name, row_size, scale, keep, level):
    """A lookup table's used rows (in place), the whole table then decayed by the
    step's `decayed` list as the trainer does; rows not used keep their values and
    state."""
    n_rows = 7
    mask = np.array([1, 0, 1, 1, 0, 0, 1], dtype=np.uint8)
    rows = np.flatnonzero(mask)
    buf = param_buffers.ValueBuffers(n_rows * row_size)
    theta, grad, states = arrays(name, n_rows * row_size, seed=row_size, shifts=SHIFTS[1])
    buf.current[...] = theta
    shaped = [a.reshape(n_rows, row_size) for a in [theta, grad] + states]
    unused = mask == 0
    unused_grad = shaped[1][unused].copy()
    want, want_states = reference(name, shaped[0], shaped[1], shaped[2:], scale, keep, rows)
    sl = _update.Slot(buf, shaped[1], shaped[2:], mask, row_size)
    _update.step(None, _update.RULES[name], [], [sl], [buf] if keep != 1 else [], [], 0, None,
                 **hyper(name, scale, keep))
    assert_same_bits(buf.current.reshape(n_rows, row_size), want)
    for s, w in zip(shaped[2:], want_states):
        assert_same_bits(s, w)
    assert not shaped[1][rows].any() and not mask.any()
    assert_same_bits(shaped[1][unused], unused_grad)     # (kept for a later step)


@pytest.mark.parametrize("name", list(TRAINERS))
def test_non_finite_values_bits(name, level):
    """NaN and infinities in values, gradients and state: the numpy rule's results (a
    NaN where it has one; AMSGrad's max lets a NaN on either side win)."""
    theta, grad, states = arrays(name, 67, seed=5, shifts=SHIFTS[2])
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], dtype=np.float32)
    rng = np.random.default_rng(9)
    for a in [theta, grad] + states:
        picks = rng.choice(a.size, size=10, replace=False)
        a[picks] = special[rng.integers(0, special.size, picks.size)]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        want, want_states = reference(name, theta, grad, states, SCALE, KEEP)
    _update.rule_on_arrays(_update.RULES[name], theta, theta, grad, states,
                           **hyper(name, SCALE, KEEP))
    assert_same_bits(theta, want)
    for s, w in zip(states, want_states):
        assert_same_bits(s, w)


@pytest.mark.parametrize("n", SIZES)
def test_squared_norm_and_decay_bits(n, level):
    """The clipping norm's double sum (eight accumulators, as before the SIMD loops:
    the same sum at every level) and the decay of a parameter no rule stepped."""
    rng = np.random.default_rng(n)
    g = placed(rng, n, 5, scale=3.0)
    acc = np.zeros(8)
    n8 = n - n % 8
    for k in range(8):
        for x in g[k:n8:8].astype(np.float64):
            acc[k] += x * x
    total = 0.0
    for x in g[n8:].astype(np.float64):
        total += x * x
    for k in range(8):
        total += acc[k]
    assert _update.sum_of_squares(g) == total
    buf = param_buffers.ValueBuffers(n)
    buf.current[...] = rng.normal(size=n)
    want = buf.current * KEEP
    _update.step(None, _update.RULES["sgd"], [], [], [buf], [], 0, None, keep=KEEP)
    assert_same_bits(buf.current, want)


def test_simd_level_choice():
    levels = _update.simd_levels()
    assert levels[-1] == "default" and _update.simd_level() == levels[0]
    with pytest.raises(ValueError, match="SIMD level"):
        _update.set_simd_level("sse9")
    old = _update.set_simd_level(levels[-1])
    try:
        assert _update.simd_level() == "default"
        assert _update.set_simd_level("auto") == "default"
        assert _update.simd_level() == levels[0]
    finally:
        _update.set_simd_level(old)
    with pytest.raises(ValueError, match="at least 1"):
        _update.set_split_min(0)


@pytest.mark.parametrize("value", ["default", "avx2", "bogus"])
def test_simd_level_from_the_environment(value):
    """AUTOBATCH_UPDATE_SIMD at import: a level this processor runs, else an error."""
    code = "from autobatch.model import update_rules as u; print(u.simd_level())"
    env = dict(os.environ, AUTOBATCH_UPDATE_SIMD=value)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=False, cwd=os.path.dirname(os.path.dirname(dy.__file__)))
    if value in _update.simd_levels():
        assert done.returncode == 0 and done.stdout.strip() == value
    else:
        assert done.returncode != 0 and "SIMD level" in done.stderr


def test_rule_on_arrays_rejects_what_the_loops_cannot_read():
    a, b, c = (np.zeros(8, dtype=np.float32) for _ in range(3))
    sgd, adam = _update.RULES["sgd"], _update.RULES["adam"]
    with pytest.raises(ValueError, match="overlap"):
        _update.rule_on_arrays(sgd, a[1:], a[:-1], b[1:], [])
    with pytest.raises(ValueError, match="overlap"):
        _update.rule_on_arrays(sgd, a, a, a, [])
    with pytest.raises(ValueError, match="one size"):
        _update.rule_on_arrays(sgd, a, a, b[1:], [])
    with pytest.raises(ValueError, match="state arrays"):
        _update.rule_on_arrays(adam, a, a, b, [c])
    with pytest.raises(ValueError, match="unknown rule"):
        _update.rule_on_arrays(99, a, a, b, [])
