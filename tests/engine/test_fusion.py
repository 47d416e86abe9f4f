"""Fused elementwise chains (autobatch/engine/fusion.pyx, docs/fusion.md): every fused path
gives the values and gradients of the unfused one under every strategy, on random
graphs whose chains do and do not qualify (several consumers, values read in the
middle of the graph, nodes the user holds, consumers added after a forward), is
gradient-checked, and stats() reports what was fused."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import autobatch as dy
from autobatch.engine import fusion as engine_fusion
from autobatch.testing import check_grad

from python_strategies import PYTHON_STRATEGIES
from strategy_names import BATCHING_STRATEGIES

# the strategies that batch (built in and in Python); not "none": it fuses nothing (its
# batches hold one node each), and it is the unfused reference the tests compare with
STRATEGIES = BATCHING_STRATEGIES + PYTHON_STRATEGIES
UNARY = ["tanh", "logistic", "rectify", "softsign", "square", "negate"]
BINARY = ["add", "sub", "cmult"]


def make_params(seed, H=5, n_w=2):
    pc = dy.ParameterCollection(seed=seed)
    rng = np.random.default_rng(seed)
    Ws = [pc.add_parameters((H, H)) for _ in range(n_w)]
    bs = [pc.add_parameters(H) for _ in range(n_w)]
    for p in Ws + bs:
        p.set_value(rng.uniform(-0.8, 0.8, p.shape()))
    return pc, Ws, bs


def apply_unary(name, x):
    return -x if name == "negate" else getattr(dy, name)(x)


def apply_binary(name, x, y, swap):
    if swap:
        x, y = y, x
    return {"add": lambda: x + y, "sub": lambda: x - y, "cmult": lambda: dy.cmult(x, y)}[name]()


def random_plan(rng, n_inst, length):
    """Per chain step: (kind, op, arg: which earlier value, swap, extra use?, read?)."""
    steps = []
    for _ in range(length):
        if rng.random() < 0.5:
            steps.append(("u", UNARY[rng.integers(len(UNARY))], 0, False))
        else:
            steps.append(("b", BINARY[rng.integers(len(BINARY))], int(rng.integers(3)),
                          bool(rng.integers(2))))
    breaks = {"extra": rng.random() < 0.3, "read": rng.random() < 0.3,
              "late": rng.random() < 0.3, "at": int(rng.integers(max(1, length)))}
    return steps, breaks


def build(plan, Ws, bs, n_inst, reads):
    """One chain per instance: W x (+ b), then the plan's elementwise steps; returns
    the per-instance outputs and the intermediates a break holds on to."""
    steps, breaks = plan
    outs, held = [], []
    for k in range(n_inst):
        x = dy.inputVector([0.1 * (k + 1) * (i - 2) for i in range(Ws[0].shape()[1])])
        h = Ws[0] * x
        others = [bs[0], Ws[1] * x, dy.tanh(bs[1])]
        for s, (kind, op, arg, swap) in enumerate(steps):
            h = apply_unary(op, h) if kind == "u" else apply_binary(op, h, others[arg], swap)
            if s == breaks["at"]:
                held.append(h)
                if breaks["read"] and k == 0:
                    reads.append(h.npvalue())       # forward now, in the middle
        out = dy.sum_elems(h)
        if breaks["extra"] and held:
            out = out + dy.sum_elems(dy.cmult(held[-1], held[-1]))   # a second consumer
        outs.append(out)
    return outs, held


def run(plan, seed, strategy, fusion, n_inst=4, defer=False):
    pc, Ws, bs = make_params(seed)
    dy.renew_cg(strategy=strategy, fusion=fusion)
    old = engine_fusion.set_deferral(defer)
    try:
        reads = []
        outs, held = build(plan, Ws, bs, n_inst, reads)
        loss = dy.esum(outs)
        value = loss.value()
        if plan[1]["late"] and held:            # a consumer built after the forward ran
            loss = loss + dy.sum_elems(dy.logistic(held[0]))
            value = loss.value()
        loss.backward()
    finally:
        engine_fusion.set_deferral(old)
    grads = [p.grad_as_array() for p in Ws + bs]
    return value, grads, [h.npvalue() for h in held], reads, dy.cg().stats()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 6), st.sampled_from(STRATEGIES))
def test_fused_equals_unfused(seed, length, strategy):
    plan = random_plan(np.random.default_rng(seed), 4, length)
    ref = run(plan, seed % 1000, "none", False)
    # unfused, fused, and fused with deferral (a stage waits for the nodes of its
    # signature that could still join it)
    for fusion, defer in ((False, False), (True, False), (True, True)):
        got = run(plan, seed % 1000, strategy, fusion, defer=defer)
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)
        for g, r in zip(got[1], ref[1]):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
        for g, r in zip(got[2] + got[3], ref[2] + ref[3]):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
        if not fusion:
            assert got[4]["fused"]["chains"] == 0
        assert got[4]["passes"] == got[4]["batches"] - got[4]["fused"]["batches"]


def test_logistic_affine_chain_is_fused_forward_and_backward():
    pc, Ws, bs = make_params(0)
    for strategy in STRATEGIES:
        dy.renew_cg(strategy=strategy)
        hs = [dy.logistic(Ws[0] * dy.inputVector([k, 1, 2, 3, 4]) + bs[0]) for k in range(6)]
        dy.esum([dy.sum_elems(h) for h in hs]).backward()
        fused = dy.cg().stats()["fused"]
        assert set(fused["patterns"]) == {"matmul>add>logistic"}, (strategy, fused)
        assert fused["nodes"] == 12 and fused["backward_chains"] >= 1


def test_cell_update_is_one_chain():
    # cmult(i, u) + cmult(f, c): the sum runs in the pass of a cmult
    pc, Ws, bs = make_params(1)
    dy.renew_cg()
    outs = []
    for k in range(4):
        x = dy.inputVector([k, 1, -1, 0.5, 2])
        i, f = dy.logistic(Ws[0] * x), dy.logistic(Ws[1] * x)
        u, c = dy.tanh(bs[0] + x), dy.tanh(bs[1] - x)
        outs.append(dy.sum_elems(dy.cmult(i, u) + dy.cmult(f, c)))
    dy.esum(outs).backward()
    patterns = dy.cg().stats()["fused"]["patterns"]
    assert any(p.endswith("cmult>add") for p in patterns), patterns


def test_second_consumer_stops_the_chain():
    pc, Ws, bs = make_params(2)
    dy.renew_cg()
    outs = []
    for k in range(4):
        z = Ws[0] * dy.inputVector([k, 1, 2, 3, 4])
        outs.append(dy.sum_elems(dy.tanh(z)) + dy.sum_elems(z))   # z: two consumers
    dy.esum(outs).value()
    assert not any(p.startswith("matmul") for p in dy.cg().stats()["fused"]["patterns"])


def test_value_read_mid_chain_is_not_fused_past_it():
    pc, Ws, bs = make_params(3)
    dy.renew_cg()
    zs = [Ws[0] * dy.inputVector([k, 1, 2, 3, 4]) + bs[0] for k in range(3)]
    hs = [dy.tanh(z) for z in zs]
    zs[0].value()                   # the adds run; their consumers are not needed yet
    assert dy.cg().stats()["fused"]["patterns"] == {"matmul>add": 1}
    loss = dy.esum([dy.sum_elems(h) for h in hs])
    loss.backward()
    g = Ws[0].grad_as_array().copy()
    pc, Ws, bs = make_params(3)     # the same values, gradients zero
    dy.renew_cg(fusion=False)
    zs = [Ws[0] * dy.inputVector([k, 1, 2, 3, 4]) + bs[0] for k in range(3)]
    hs = [dy.tanh(z) for z in zs]
    zs[0].value()   # the same read, so the same batches: dW sums in the same order
    dy.esum([dy.sum_elems(h) for h in hs]).backward()
    np.testing.assert_array_equal(Ws[0].grad_as_array(), g)


@pytest.mark.parametrize("strategy", ["agenda", "depth"])
def test_fused_chains_gradient_checked(strategy):
    pc = dy.ParameterCollection(seed=4)
    W, U, b = pc.add_parameters((4, 3)), pc.add_parameters((4, 3)), pc.add_parameters(4)
    xs = [pc.add_parameters(3) for _ in range(3)]

    def cells():
        out = []
        for x in xs:
            i = dy.logistic(W * x + b)
            u = dy.tanh(U * x - b)
            out.append(dy.cmult(i, u) + dy.cmult(dy.logistic(U * x), dy.square(W * x - b)))
        return out
    check_grad(lambda: dy.esum(cells()), [W, U, b] + xs, strategy=strategy)
    dy.renew_cg(strategy=strategy)
    dy.esum([dy.sum_elems(c) for c in cells()]).backward()
    assert dy.cg().stats()["fused"]["chains"] > 0


def test_check_validity_names_a_fused_node():
    pc, Ws, bs = make_params(5)
    dy.renew_cg(check_validity=True)
    hs = [dy.log(-dy.square(Ws[0] * dy.inputVector([k, 1, 2, 3, 4]))) for k in range(3)]
    with pytest.raises(FloatingPointError, match="log"):
        dy.esum([dy.sum_elems(h) for h in hs]).value()


def test_fusion_off_runs_every_batch_alone():
    pc, Ws, bs = make_params(6)
    dy.renew_cg(fusion=False)
    assert not dy.cg().fusion
    hs = [dy.logistic(Ws[0] * dy.inputVector([k, 1, 2, 3, 4]) + bs[0]) for k in range(3)]
    dy.esum([dy.sum_elems(h) for h in hs]).backward()
    assert dy.cg().stats()["fused"] == {"chains": 0, "batches": 0, "nodes": 0, "patterns": {},
                                        "backward_chains": 0, "shared_weight_grads": 0}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_backward_from_one_instance_of_a_fused_chain(strategy):
    # the chain's batches hold nodes of the other instances too: backward from one
    # output runs the stages unfused over its ancestors only
    grads = {}
    for fusion in (False, True):
        pc, Ws, bs = make_params(7)
        dy.renew_cg(strategy=strategy, fusion=fusion)
        outs = [dy.sum_elems(dy.tanh(dy.logistic(Ws[0] * dy.inputVector([k, 1, 2, 3, 4]) + bs[0])))
                for k in range(4)]
        dy.esum(outs).value()
        if fusion:
            assert dy.cg().stats()["fused"]["chains"] > 0
        outs[1].backward()
        assert dy.cg().stats()["fused"]["backward_chains"] == 0
        grads[fusion] = [p.grad_as_array() for p in Ws + bs]
    for g, r in zip(grads[True], grads[False]):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_cg_revert_gives_back_the_dropped_consumers():
    # a consumer made after a checkpoint and dropped by cg_revert no longer counts
    pc, Ws, bs = make_params(8)
    dy.renew_cg()
    zs = [Ws[0] * dy.inputVector([k, 1, 2, 3, 4]) for k in range(3)]
    dy.cg_checkpoint()
    extra = [dy.sum_elems(z) for z in zs]       # second consumers of every z
    dy.cg_revert()
    hs = [dy.tanh(z) for z in zs]
    dy.esum([dy.sum_elems(h) for h in hs]).backward()
    assert "matmul>tanh" in dy.cg().stats()["fused"]["patterns"]


def gate_cells(Us, inputs):
    """Each gate its own weight times the same input, as DyNet users write a cell, at
    two levels (so each weight has two postponed weight-gradient terms)."""
    out = []
    for v in inputs:
        x1 = dy.tanh(dy.inputVector(v))
        x2 = dy.tanh(x1 * 0.5 + 0.1)
        terms = [dy.sum_elems(dy.logistic(U * x1)) for U in Us]
        terms += [dy.sum_elems(dy.tanh(U * x2)) for U in Us]
        out.append(dy.esum(terms))
    return dy.esum(out)


def gate_params(seed):
    rng = np.random.default_rng(seed)
    pc = dy.ParameterCollection(seed=seed)
    Us = [pc.add_parameters((4 + g, 6)) for g in range(3)]     # rows differ per gate
    for U in Us:
        U.set_value(rng.uniform(-0.5, 0.5, U.shape()))
    inputs = [rng.uniform(-1, 1, 6).tolist() for _ in range(5)]
    return pc, Us, inputs


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_weights_sharing_an_input_share_one_weight_gradient_product(strategy):
    # the weight gradients of W_g x with one x share one product [dY_1; ..] X^T; each
    # equals the weight's own product (fusion off) and the unbatched reference. (agenda
    # runs a weight's products on x1 and x2 as one batch, whose stacked X is a copy of
    # its own: nothing to share there)
    pc, Us, inputs = gate_params(5)
    grads = {}
    for name, strat, fusion in (("shared", strategy, True), ("own", strategy, False),
                                ("none", "none", True)):
        pc.reset_gradient()
        dy.renew_cg(strategy=strat, fusion=fusion)
        gate_cells(Us, inputs).backward()
        grads[name] = [U.grad_as_array().copy() for U in Us]
        if name == "shared" and strategy == "depth":
            assert dy.cg().stats()["fused"]["shared_weight_grads"] == len(Us)
        if name != "shared":
            assert dy.cg().stats()["fused"]["shared_weight_grads"] == 0
    for g in range(len(Us)):
        np.testing.assert_allclose(grads["shared"][g], grads["own"][g], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grads["shared"][g], grads["none"][g], rtol=1e-5, atol=1e-6)


def test_shared_weight_gradients_gradient_checked():
    pc, Us, inputs = gate_params(6)
    check_grad(lambda: gate_cells(Us, inputs), Us, strategy="agenda")
