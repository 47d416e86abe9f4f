"""The compiled update rules (autobatch/model/update_rules.pyx) against the numpy `rule` of each
trainer, which they replace: same numbers on random data, dense and sparse, with
clipping and weight decay; a Python subclass that overrides `rule` still runs it."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.model import update_rules as _update

TRAINERS = {
    "sgd": (dy.SimpleSGDTrainer, dict(learning_rate=0.05)),
    "cyclical": (dy.CyclicalSGDTrainer, dict(learning_rate_min=0.01, learning_rate_max=0.2,
                                             step_size=2)),
    "momentum": (dy.MomentumSGDTrainer, dict(learning_rate=0.03, mom=0.8)),
    "adagrad": (dy.AdagradTrainer, dict(learning_rate=0.2, eps=1e-6)),
    "adadelta": (dy.AdadeltaTrainer, dict(eps=1e-4, rho=0.9)),
    "rmsprop": (dy.RMSPropTrainer, dict(learning_rate=0.01, eps=1e-6, rho=0.8)),
    "adam": (dy.AdamTrainer, dict(alpha=0.01, beta_1=0.8, beta_2=0.99, eps=1e-6)),
    "amsgrad": (dy.AmsgradTrainer, dict(alpha=0.01, beta_1=0.8, beta_2=0.99, eps=1e-6)),
}


def numpy_twin(cls):
    """A Python subclass whose `rule` is the numpy one: update() must take its path."""
    calls = []

    class Twin(cls):
        def rule(self, theta, g, t, *state):
            calls.append(t)
            super().rule(theta, g, t, *state)
    return Twin, calls


def model(seed):
    pc = dy.ParameterCollection(seed=seed)
    return pc, [pc.add_parameters((5, 7)), pc.add_parameters(9), pc.add_parameters((3, 2, 2))], \
        [pc.add_lookup_parameters((30, 6)), pc.add_lookup_parameters((12, 2, 3))]


def fill_gradients(params, lookups, rng, big):
    """Random gradients; lookup rows marked used through a graph, then overwritten."""
    dy.renew_cg()
    terms = []
    for lp in lookups:
        rows = rng.choice(lp.shape()[0], size=4, replace=False).tolist()
        terms += [dy.sum_elems(dy.lookup(lp, r)) for r in rows]
    dy.esum(terms).backward()
    for p in params:
        p.grad[...] = rng.normal(size=p.shape()) * (30 if big else 0.05)
    for lp in lookups:
        used = lp.used_rows()
        lp.grad[used] = rng.normal(size=(used.size, lp.row_size)) * (30 if big else 0.05)


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("decay", [0.0, 0.05], ids=["nodecay", "decay"])
@pytest.mark.parametrize("name", list(TRAINERS))
def test_compiled_rule_equals_numpy_rule(name, decay, sparse):
    cls, kw = TRAINERS[name]
    twin, calls = numpy_twin(cls)
    runs = []
    for kind in (cls, twin):
        pc, params, lookups = model(seed=4)
        pc.set_weight_decay(decay)
        tr = kind(pc, **kw)
        tr.set_clip_threshold(3.0)
        tr.set_sparse_updates(sparse)
        rng = np.random.default_rng(11)
        for step in range(6):        # even steps clip (large gradients), odd ones do not
            fill_gradients(params, lookups, rng, big=step % 2 == 0)
            tr.update()
            assert not any(p.grad.any() for p in params + lookups)
            assert all(lp.used_rows().size == 0 for lp in lookups)
        runs.append((tr, [p.as_array() for p in params + lookups],
                     [[s.copy() for s in tr._states(p)] for p in params + lookups]))
    (tr0, values0, states0), (tr1, values1, states1) = runs
    assert calls and tr0.clips == tr1.clips == 3
    for a, b in zip(values0, values1):
        np.testing.assert_array_equal(a, b)
    for sa, sb in zip(states0, states1):
        for a, b in zip(sa, sb):
            np.testing.assert_array_equal(a, b)


def test_builtin_trainers_take_the_compiled_path(monkeypatch):
    calls = []
    step = _update.step
    monkeypatch.setattr(_update, "step", lambda *a, **k: calls.append(a[1]) or step(*a, **k))
    pc, params, lookups = model(seed=0)
    for cls, kw in TRAINERS.values():
        calls.clear()
        cls(pc, **kw).update()
        assert len(calls) == 1
        calls.clear()
        numpy_twin(cls)[0](pc, **kw).update()
        assert calls == []


def test_python_subclass_rule_runs():
    """A subclass with its own rule and state (not one of DyNet's) trains with it."""
    class SignSGD(dy.SimpleSGDTrainer):
        state_names = ("seen", "a", "b", "c")      # more than any compiled rule keeps

        def rule(self, theta, g, t, seen, *more):
            seen += 1
            theta -= np.float32(self.learning_rate) * np.sign(g)

    pc, params, lookups = model(seed=1)
    before = [p.as_array() for p in params]
    tr = SignSGD(pc, learning_rate=0.5)
    fill_gradients(params, lookups, np.random.default_rng(0), big=False)
    signs = [np.sign(p.grad_as_array()) for p in params]
    tr.update()
    for p, b, s in zip(params, before, signs):
        np.testing.assert_allclose(p.as_array(), b - 0.5 * s, rtol=1e-6)
        assert (tr._states(p)[0] == 1).all()


def test_squared_norm_is_double_and_reads_used_rows_only():
    pc, params, lookups = model(seed=2)
    fill_gradients(params, lookups, np.random.default_rng(3), big=True)
    lp = lookups[0]
    lp.grad[np.setdiff1d(np.arange(30), lp.used_rows())] = 1e3     # unused rows: ignored
    tr = dy.SimpleSGDTrainer(pc)
    dense = [tr._slot(p) for p in params + lookups[1:]]
    got = _update.squared_norm(dense, [tr._slot(lp)])
    want = sum((p.grad.astype(np.float64) ** 2).sum() for p in params + lookups[1:])
    want += (lp.grad[lp.used_rows()].astype(np.float64) ** 2).sum()
    assert got == pytest.approx(want, rel=1e-13)


def test_slot_rejects_what_the_loops_cannot_read():
    a = np.zeros(6, np.float32)
    with pytest.raises(ValueError):
        _update.Slot(a, np.zeros(5, np.float32), [])                    # sizes differ
    with pytest.raises(ValueError):
        _update.Slot(a, np.zeros(12, np.float32)[::2], [])              # not contiguous
    with pytest.raises(ValueError):
        _update.Slot(a, a.copy(), [np.zeros(6)])                        # float64 state
    with pytest.raises(ValueError):
        _update.Slot(a, a.copy(), [], np.zeros(4, np.uint8), 2)         # 4 rows of 2 != 6
    sl = _update.Slot(a, a.copy(), [a.copy()])
    with pytest.raises(ValueError, match="state"):
        _update.apply(_update.RULES["adam"], [sl], [])                  # Adam needs 2
    with pytest.raises(ValueError, match="table"):
        _update.apply(_update.RULES["sgd"], [], [sl])                   # not a table


def test_a_wrapped_builtin_rule_runs(monkeypatch):
    """Replacing a built-in trainer's rule (here by a functools.wraps wrapper, which
    copies the function's attributes) takes the Python path."""
    import functools
    seen = []
    original = dy.AdamTrainer.rule

    @functools.wraps(original)
    def logged(self, theta, g, t, *state):
        seen.append(theta.shape)
        original(self, theta, g, t, *state)
    monkeypatch.setattr(dy.AdamTrainer, "rule", logged)
    pc, params, lookups = model(seed=5)
    fill_gradients(params, lookups, np.random.default_rng(0), big=False)
    dy.AdamTrainer(pc).update()
    assert len(seen) == len(params) + len(lookups)


def test_gradient_l2_norm_sums_in_double():
    pc, params, lookups = model(seed=6)
    fill_gradients(params, lookups, np.random.default_rng(1), big=True)
    params[0].grad[0, 0] = 1e4          # float32 sums of the rest would lose digits here
    want = np.sqrt(sum((p.grad.astype(np.float64) ** 2).sum() for p in params + lookups))
    assert pc.gradient_l2_norm() == pytest.approx(want, rel=1e-13)
    assert _update.sum_of_squares(np.zeros(0, np.float32)) == 0.0


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
def test_update_subset_with_decay_equals_numpy_rule(sparse):
    """The parameters left out of a subset step decay (only), as the numpy path does."""
    twin, calls = numpy_twin(dy.AdamTrainer)
    runs = []
    for kind in (dy.AdamTrainer, twin):
        pc, params, lookups = model(seed=8)
        pc.set_weight_decay(0.1)
        tr = kind(pc, alpha=0.05)
        tr.set_sparse_updates(sparse)
        rng = np.random.default_rng(2)
        for step in range(3):
            fill_gradients(params, lookups, rng, big=False)
            tr.update_subset([0, 2], [1])
        runs.append([p.as_array() for p in params + lookups] +
                    [p.grad_as_array() for p in params + lookups])
    assert calls
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
