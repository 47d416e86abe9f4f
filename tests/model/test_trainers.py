"""Every trainer against a float64 numpy reference of its published (DyNet) rule."""
import math

import numpy as np
import pytest

import autobatch as dy

# ------------------------------------------------------------ references ----
# Each reference: rule(theta, g, t, state, h) -> new theta (state: dict of arrays).


def ref_sgd(th, g, t, s, h):
    return th - h["learning_rate"] * g


def ref_momentum(th, g, t, s, h):
    s["v"] = h["mom"] * s["v"] - h["learning_rate"] * g
    return th + s["v"]


def ref_adagrad(th, g, t, s, h):
    s["G"] = s["G"] + g ** 2
    return th - h["learning_rate"] * g / np.sqrt(s["G"] + h["eps"])


def ref_adadelta(th, g, t, s, h):
    s["Eg"] = h["rho"] * s["Eg"] + (1 - h["rho"]) * g ** 2
    d = -g * np.sqrt(s["Ed"] + h["eps"]) / np.sqrt(s["Eg"] + h["eps"])
    s["Ed"] = h["rho"] * s["Ed"] + (1 - h["rho"]) * d ** 2
    return th + d


def ref_rmsprop(th, g, t, s, h):
    s["Eg"] = h["rho"] * s["Eg"] + (1 - h["rho"]) * g ** 2
    return th - h["learning_rate"] * g / np.sqrt(s["Eg"] + h["eps"])


def _adam_moments(g, t, s, h):
    """Moment updates; returns the bias-corrected step size."""
    s["m"] = h["beta_1"] * s["m"] + (1 - h["beta_1"]) * g
    s["v"] = h["beta_2"] * s["v"] + (1 - h["beta_2"]) * g ** 2
    return h["alpha"] * math.sqrt(1 - h["beta_2"] ** t) / (1 - h["beta_1"] ** t)


def ref_adam(th, g, t, s, h):
    lr_t = _adam_moments(g, t, s, h)
    return th - lr_t * s["m"] / (np.sqrt(s["v"]) + h["eps"])


def ref_amsgrad(th, g, t, s, h):
    lr_t = _adam_moments(g, t, s, h)
    s["vhat"] = np.maximum(s["vhat"], s["v"])
    return th - lr_t * s["m"] / (np.sqrt(s["vhat"]) + h["eps"])


# trainer class, constructor kwargs (non-default, to check they are used), reference, state
CASES = {
    "sgd": (dy.SimpleSGDTrainer, dict(learning_rate=0.05), ref_sgd, []),
    "momentum": (dy.MomentumSGDTrainer, dict(learning_rate=0.03, mom=0.8), ref_momentum, ["v"]),
    "adagrad": (dy.AdagradTrainer, dict(learning_rate=0.2, eps=1e-6), ref_adagrad, ["G"]),
    "adadelta": (dy.AdadeltaTrainer, dict(eps=1e-4, rho=0.9), ref_adadelta, ["Eg", "Ed"]),
    "rmsprop": (dy.RMSPropTrainer, dict(learning_rate=0.01, eps=1e-6, rho=0.8), ref_rmsprop, ["Eg"]),
    "adam": (dy.AdamTrainer, dict(alpha=0.01, beta_1=0.8, beta_2=0.99, eps=1e-6), ref_adam, ["m", "v"]),
    "amsgrad": (dy.AmsgradTrainer, dict(alpha=0.01, beta_1=0.8, beta_2=0.99, eps=1e-6),
                ref_amsgrad, ["m", "v", "vhat"]),
}
STATEFUL = [k for k, c in CASES.items() if c[3]]


def make_model(seed=0, rows=20):
    pc = dy.ParameterCollection(seed=seed)
    W = pc.add_parameters((3, 4))
    b = pc.add_parameters(3)
    E = pc.add_lookup_parameters((rows, 4))
    return pc, W, b, E


def make_grads(W, b, E, rows, rng):
    """Gradients: W and b written directly, E through a graph that looks rows up."""
    dy.renew_cg()
    loss = dy.esum([dy.dot_product(dy.lookup(E, r), dy.inputVector(rng.normal(size=4).tolist()))
                    for r in rows])
    loss.backward()
    W.grad[...] = rng.normal(size=(3, 4))
    b.grad[...] = rng.normal(size=3)
    return W.grad.astype(np.float64), b.grad.astype(np.float64), E.grad.astype(np.float64)


def row_schedule(step):
    return [1, 4, 4, 9] if step % 2 == 0 else [4, 7]


@pytest.mark.parametrize("name", list(CASES))
def test_rule_matches_reference_over_steps(name):
    cls, kw, ref, state_names = CASES[name]
    pc, W, b, E = make_model()
    trainer = cls(pc, **kw)
    trainer.set_clip_threshold(0)
    h = dict(kw)
    h.setdefault("learning_rate", 1.0)
    ref_params = {"W": W.as_array().astype(np.float64), "b": b.as_array().astype(np.float64),
                  "E": E.as_array().astype(np.float64)}
    ref_state = {k: {s: np.zeros_like(v) for s in state_names} for k, v in ref_params.items()}
    rng = np.random.default_rng(1)
    for step in range(5):
        rows = row_schedule(step)
        gW, gb, gE = make_grads(W, b, E, rows, rng)
        trainer.update()
        t = step + 1
        ref_params["W"] = ref(ref_params["W"], gW, t, ref_state["W"], h)
        ref_params["b"] = ref(ref_params["b"], gb, t, ref_state["b"], h)
        used = sorted(set(rows))  # sparse: only used rows and their state move
        sub = {s: v[used] for s, v in ref_state["E"].items()}
        ref_params["E"][used] = ref(ref_params["E"][used], gE[used], t, sub, h)
        for s in state_names:
            ref_state["E"][s][used] = sub[s]
        np.testing.assert_allclose(W.as_array(), ref_params["W"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.as_array(), ref_params["b"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(E.as_array(), ref_params["E"], rtol=1e-5, atol=1e-6)
        assert not W.grad.any() and not b.grad.any() and not E.grad.any()
        assert E.used_rows().size == 0


@pytest.mark.parametrize("name", STATEFUL)
def test_sparse_and_dense_agree_on_used_rows(name):
    cls, kw, _, _ = CASES[name]
    models = [make_model(seed=3) for _ in range(2)]
    trainers = [cls(m[0], **kw) for m in models]
    trainers[1].set_sparse_updates(False)
    init = models[0][3].as_array()
    for step in range(4):
        for (pc, W, b, E), tr in zip(models, trainers):
            make_grads(W, b, E, [2, 5, 5], np.random.default_rng(step))
            tr.update()
    (_, W0, _, E0), (_, W1, _, E1) = models
    np.testing.assert_array_equal(W0.as_array(), W1.as_array())
    np.testing.assert_allclose(E0.as_array()[[2, 5]], E1.as_array()[[2, 5]], rtol=1e-6)
    unused = np.setdiff1d(np.arange(20), [2, 5])
    np.testing.assert_array_equal(E0.as_array()[unused], init[unused])
    for s in trainers[0]._states(E0):
        assert not s[unused].any() and s[[2, 5]].any()


def test_sparse_update_touches_only_used_rows_of_a_big_table():
    pc = dy.ParameterCollection(seed=0)
    E = pc.add_lookup_parameters((100_000, 16))
    before = E.as_array()
    trainer = dy.AdamTrainer(pc)
    for step in range(3):
        dy.renew_cg()
        dy.squared_norm(dy.lookup(E, 7) + dy.lookup(E, 99_999)).backward()
        trainer.update()
    after = E.as_array()
    changed = np.flatnonzero((after != before).any(axis=1))
    assert changed.tolist() == [7, 99_999]
    m, v = trainer._states(E)
    assert np.flatnonzero(m.any(axis=1)).tolist() == [7, 99_999]
    assert np.flatnonzero(v.any(axis=1)).tolist() == [7, 99_999]


def test_dense_lookup_update_moves_momentum_rows_after_use():
    pc, W, b, E = make_model()
    tr = dy.MomentumSGDTrainer(pc)
    tr.set_sparse_updates(False)
    make_grads(W, b, E, [3], np.random.default_rng(0))
    tr.update()
    mid = E.as_array()
    tr.update()   # no gradient: dense momentum still moves row 3, not the others
    assert (E.as_array()[3] != mid[3]).all()
    np.testing.assert_array_equal(np.delete(E.as_array(), 3, 0), np.delete(mid, 3, 0))


def test_clipping_scales_global_norm_to_threshold():
    pc, W, b, E = make_model()
    tr = dy.SimpleSGDTrainer(pc, learning_rate=1.0)
    assert tr.get_clip_threshold() == 5.0          # DyNet's default
    gW, gb, gE = make_grads(W, b, E, [0, 2], np.random.default_rng(0))
    W.grad[...] *= 10
    gW = W.grad.astype(np.float64)
    norm = np.sqrt((gW ** 2).sum() + (gb ** 2).sum() + (gE ** 2).sum())
    assert norm > 5
    W0, b0, E0 = W.as_array(), b.as_array(), E.as_array()
    tr.set_clip_threshold(2.0)
    assert tr.get_clip_threshold() == 2.0
    tr.update()
    k = 2.0 / norm
    np.testing.assert_allclose(W.as_array(), W0 - k * gW, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.as_array(), b0 - k * gb, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(E.as_array(), E0 - k * gE, rtol=1e-5, atol=1e-6)
    assert tr.clips == 1


def test_clipping_disabled_and_small_gradient_untouched():
    pc, W, b, E = make_model()
    tr = dy.SimpleSGDTrainer(pc, learning_rate=1.0)
    tr.set_clip_threshold(-1)
    assert tr.get_clip_threshold() == 0.0
    W.grad[...] = 100.0
    W0 = W.as_array()
    tr.update()
    np.testing.assert_allclose(W.as_array(), W0 - 100.0)
    assert tr.clips == 0


def test_bad_gradient_raises():
    pc, W, b, E = make_model()
    W.grad[0, 0] = np.nan
    with pytest.raises(RuntimeError, match="gradient"):
        dy.SimpleSGDTrainer(pc).update()


def test_weight_decay_rule():
    pc, W, b, E = make_model()
    pc.set_weight_decay(0.1)
    assert pc.get_weight_decay() == pytest.approx(0.1)
    tr = dy.SimpleSGDTrainer(pc, learning_rate=0.5)
    W0, E0 = W.as_array().astype(np.float64), E.as_array().astype(np.float64)
    gW, _, gE = make_grads(W, b, E, [6], np.random.default_rng(0))
    tr.set_clip_threshold(0)
    tr.update()
    np.testing.assert_allclose(W.as_array(), 0.9 * (W0 - 0.5 * gW), rtol=1e-6)
    np.testing.assert_allclose(E.as_array()[6], 0.9 * (E0[6] - 0.5 * gE[6]), rtol=1e-6)
    # as DyNet: the rows the step did not use decay too (tests/model/test_weight_decay.py)
    np.testing.assert_allclose(np.delete(E.as_array(), 6, 0), 0.9 * np.delete(E0, 6, 0), rtol=1e-6)


def test_learning_rate_get_set_and_restart():
    pc, W, b, E = make_model()
    tr = dy.MomentumSGDTrainer(pc)
    assert tr.learning_rate == pytest.approx(0.01)
    tr.learning_rate = 0.2
    assert tr.learning_rate == pytest.approx(0.2)
    W.grad[...] = 1.0
    tr.update()
    assert tr._states(W)[0].any()
    tr.restart()
    assert not tr._states(W)[0].any()
    W0 = W.as_array()
    W.grad[...] = 1.0
    tr.update()                        # fresh momentum: one plain step
    np.testing.assert_allclose(W.as_array(), W0 - 0.2, rtol=1e-6)
    tr.restart(learning_rate=0.5)
    assert tr.learning_rate == pytest.approx(0.5)
    tr.set_learning_rate(0.25)
    assert tr.learning_rate == 0.25


def test_defaults_are_dynet_python_defaults():
    pc = dy.ParameterCollection()
    assert dy.SimpleSGDTrainer(pc).learning_rate == pytest.approx(0.1)
    assert dy.MomentumSGDTrainer(pc).momentum == pytest.approx(0.9)
    a = dy.AdagradTrainer(pc)
    assert (a.learning_rate, a.epsilon) == (pytest.approx(0.1), pytest.approx(1e-20))
    d = dy.AdadeltaTrainer(pc)
    assert (d.epsilon, d.rho, d.learning_rate) == (pytest.approx(1e-6), pytest.approx(0.95), 1.0)
    r = dy.RMSPropTrainer(pc)
    assert (r.learning_rate, r.epsilon, r.rho) == (pytest.approx(0.001), pytest.approx(1e-8), pytest.approx(0.9))
    for cls in (dy.AdamTrainer, dy.AmsgradTrainer):
        t = cls(pc)
        assert (t.learning_rate, t.beta_1, t.beta_2, t.epsilon) == (
            pytest.approx(0.001), pytest.approx(0.9), pytest.approx(0.999), pytest.approx(1e-8))
    c = dy.CyclicalSGDTrainer(pc)
    assert (c.e_min, c.e_max, c.step_size, c.gamma) == (0.01, pytest.approx(0.1), 2000, 1.0)
    assert c.learning_rate == pytest.approx(0.01)


def test_cyclical_learning_rate_schedule():
    pc, W, b, E = make_model()
    tr = dy.CyclicalSGDTrainer(pc, learning_rate_min=0.1, learning_rate_max=0.5, step_size=4, gamma=0.9)
    seen = []
    for it in range(12):
        seen.append(tr.learning_rate)
        tr.update()
    expected = [0.1]
    for it in range(11):   # lr after update number `it`, from Smith's triangular formula
        cycle = math.floor(1 + it / 8)
        x = abs(it / 4 - 2 * cycle + 1)
        expected.append(0.1 + 0.4 * max(0.0, 1 - x) * 0.9 ** it)
    np.testing.assert_allclose(seen, expected, rtol=1e-6)


def test_cyclical_update_uses_current_rate():
    pc, W, b, E = make_model()
    tr = dy.CyclicalSGDTrainer(pc, learning_rate_min=0.1, learning_rate_max=0.5, step_size=2)
    tr.set_clip_threshold(0)
    tr.update()
    W0 = W.as_array()
    lr = tr.learning_rate
    W.grad[...] = 1.0
    tr.update()
    np.testing.assert_allclose(W.as_array(), W0 - lr, rtol=1e-6)


def test_not_updated_parameters_are_skipped():
    pc, W, b, E = make_model()
    W.set_updated(False)
    E.set_updated(False)
    W0, E0 = W.as_array(), E.as_array()
    dy.renew_cg()
    loss = dy.squared_norm(W * dy.inputVector([1, 2, 3, 4]) + b) + dy.squared_norm(dy.lookup(E, 2))
    loss.backward()
    b0 = b.as_array()
    tr = dy.AdamTrainer(pc)
    tr.update()
    np.testing.assert_array_equal(W.as_array(), W0)
    np.testing.assert_array_equal(E.as_array(), E0)
    assert (b.as_array() != b0).all()


def test_trainer_on_subcollection_updates_only_it():
    pc = dy.ParameterCollection(seed=0)
    A = pc.add_parameters(3)
    sub = pc.add_subcollection("part")
    B = sub.add_parameters(3)
    A.grad[...] = B.grad[...] = 1.0
    A0, B0 = A.as_array(), B.as_array()
    dy.SimpleSGDTrainer(sub).update()
    np.testing.assert_array_equal(A.as_array(), A0)
    np.testing.assert_allclose(B.as_array(), B0 - 0.1, rtol=1e-6)


def test_status_prints_and_resets(capsys):
    pc, W, b, E = make_model()
    tr = dy.SimpleSGDTrainer(pc)
    tr.update()
    tr.update()
    tr.status()
    assert "updates=2" in capsys.readouterr().err
    tr.status()
    assert "updates=0" in capsys.readouterr().err


def test_training_reduces_loss():
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((2, 3))
    x = [0.5, -1.0, 2.0]
    for cls in (dy.SimpleSGDTrainer, dy.MomentumSGDTrainer, dy.AdamTrainer):
        W.set_value(np.ones((2, 3)))
        tr = cls(pc)
        losses = []
        for _ in range(20):
            dy.renew_cg()
            loss = dy.squared_norm(W * dy.inputVector(x))
            losses.append(loss.value())
            loss.backward()
            tr.update()
        assert losses[-1] < losses[0]
