"""A fused `add` stage shares its gradient buffer with its argument from the previous
stage (engine/backward.pyx, assign_gradient_memory; docs/fusion.md): the gradients are
those of the unfused pass, the argument's gradient is the stage's, a consumer the
argument gains after the forward still adds its part, and the buffer is not allocated
twice."""
import numpy as np
import pytest

import autobatch as dy

H, N = 6, 5


def model(seed=0):
    pc = dy.ParameterCollection(seed=seed)
    rng = np.random.default_rng(seed)
    W, b = pc.add_parameters((H, H)), pc.add_parameters(H)
    W.set_value(rng.uniform(-0.7, 0.7, (H, H)))
    b.set_value(rng.uniform(-0.7, 0.7, H))
    return pc, W, b


def xs():
    return [dy.inputVector([0.3 * (k + 1) * (i - 2) for i in range(H)]) for k in range(N)]


def gates(W, b, swap):
    """logistic(W x + b) (or b + W x) per instance; returns the products, sums, outputs."""
    prods = [W * x for x in xs()]
    sums = [b + p if swap else p + b for p in prods]
    return prods, sums, [dy.logistic(s) for s in sums]


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("strategy", ["agenda", "depth"])
def test_gradients_equal_the_unfused_ones(strategy, swap):
    got = {}
    for fusion in (True, False):
        pc, W, b = model()
        dy.renew_cg(strategy=strategy, fusion=fusion)
        prods, sums, hs = gates(W, b, swap)
        loss = dy.esum([dy.sum_elems(dy.square(h)) for h in hs])
        loss.backward(full=True)
        got[fusion] = ([p.gradient() for p in prods], W.grad_as_array(), b.grad_as_array())
        if fusion:
            assert "matmul>add>logistic>square" in dy.cg().stats()["fused"]["patterns"]
            assert dy.cg().stats()["fused"]["backward_chains"] >= 1
            for p, s in zip(prods, sums):       # d(p + b)/dp = 1: the same numbers
                np.testing.assert_array_equal(p.gradient(), s.gradient())
    for g, r in zip(got[True][0], got[False][0]):
        np.testing.assert_array_equal(g, r)
    np.testing.assert_allclose(got[True][1], got[False][1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[True][2], got[False][2], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("strategy", ["agenda", "depth"])
def test_a_consumer_added_after_the_forward_keeps_its_part(strategy):
    # the product gains a second consumer after its chain ran: the two gradients no
    # longer coincide, and the product's must be the sum of both parts
    got = {}
    for s in (strategy, "none"):
        pc, W, b = model(1)
        dy.renew_cg(strategy=s)
        prods, sums, hs = gates(W, b, False)
        loss = dy.esum([dy.sum_elems(h) for h in hs])
        loss.value()
        loss = loss + dy.esum([dy.sum_elems(dy.square(p)) for p in prods])
        loss.backward(full=True)
        got[s] = ([p.gradient() for p in prods], W.grad_as_array(), b.grad_as_array())
    for g, r in zip(got[strategy][0], got["none"][0]):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[strategy][1], got["none"][1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[strategy][2], got["none"][2], rtol=1e-5, atol=1e-6)


def test_backward_from_one_instance_does_not_share():
    # only some nodes of the chain are ancestors: its stages run unfused, unshared
    pc, W, b = model(2)
    dy.renew_cg()
    prods, sums, hs = gates(W, b, False)
    dy.esum([dy.sum_elems(h) for h in hs]).value()
    dy.sum_elems(hs[2]).backward(full=True)
    got = [p.gradient() for p in prods], W.grad_as_array()
    ref_pc, rW, rb = model(2)
    dy.renew_cg(strategy="none")
    rp, rs, rh = gates(rW, rb, False)
    dy.sum_elems(rh[2]).backward(full=True)
    for k in range(N):
        np.testing.assert_allclose(got[0][k], rp[k].gradient(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[1], rW.grad_as_array(), rtol=1e-6, atol=1e-7)


def test_the_shared_buffer_is_allocated_once():
    sizes = {}
    for fusion in (True, False):
        pc, W, b = model(3)
        dy.renew_cg(fusion=fusion)
        prods, sums, hs = gates(W, b, False)
        dy.esum([dy.sum_elems(h) for h in hs]).backward()
        sizes[fusion] = dy.cg().stats()["grad_arena_bytes"]
    assert sizes[False] - sizes[True] >= N * H * 4
