"""Known failure patterns of batching toolkits (and bugs found here)."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.testing import check_batching_invariance, check_grad


def batch_of_id(i):
    """The node ids of the batch that computed node i."""
    return next(nodes for _, nodes in dy.cg().batches() if i in nodes)


def batch_of(e):
    return batch_of_id(e.vindex)


def vec(*v):
    return dy.inputVector(list(v))


# ------------------------------------------- ops differing in an attribute ----

ATTRIBUTE_PAIRS = {
    "elu_alpha": (lambda x: dy.elu(x, 1.0), lambda x: dy.elu(x, 0.5),
                  lambda v: np.where(v > 0, v, 1.0 * (np.exp(v) - 1)),
                  lambda v: np.where(v > 0, v, 0.5 * (np.exp(v) - 1))),
    "mul_constant": (lambda x: x * 2.0, lambda x: x * 3.0, lambda v: 2 * v, lambda v: 3 * v),
    "add_constant": (lambda x: x + 1, lambda x: x + 2, lambda v: v + 1, lambda v: v + 2),
    "constant_minus": (lambda x: 1 - x, lambda x: 5 - x, lambda v: 1 - v, lambda v: 5 - v),
    "scale_gradient": (lambda x: dy.scale_gradient(x, 1.0), lambda x: dy.scale_gradient(x, 0.0),
                       lambda v: v, lambda v: v),
    "hinge_margin": (lambda x: dy.hinge(x, 0, 1.0), lambda x: dy.hinge(x, 0, 0.25),
                     lambda v: np.maximum(0, 1.0 - v[0] + v[1:]).sum(),
                     lambda v: np.maximum(0, 0.25 - v[0] + v[1:]).sum()),
    "max_dim_d": (lambda x: dy.max_dim(dy.reshape(x, (2, 2)), 0),
                  lambda x: dy.max_dim(dy.reshape(x, (2, 2)), 1),
                  lambda v: v.reshape(2, 2, order="F").max(0), lambda v: v.reshape(2, 2, order="F").max(1)),
}


@pytest.mark.parametrize("pair", sorted(ATTRIBUTE_PAIRS))
def test_attribute_is_part_of_the_signature(pair, strategy):
    f, g, ref_f, ref_g = ATTRIBUTE_PAIRS[pair]
    dy.renew_cg(strategy=strategy)
    xs = [np.array([-0.7, 0.3, -1.2, 0.9]) * (k + 1) for k in range(4)]
    a = [f(vec(*x)) for x in xs]
    b = [g(vec(*x)) for x in xs]
    dy.esum([dy.sum_elems(e) for e in a + b]).forward()
    ids_a = {e.vindex for e in a}
    ids_b = {e.vindex for e in b}
    for e in a + b:
        nodes = set(batch_of(e))
        assert nodes <= ids_a or nodes <= ids_b, f"{pair}: nodes with different attributes share a batch"
    if strategy != "none":
        assert len(batch_of(a[0])) == 4 and len(batch_of(b[0])) == 4
    for x, ea, eb in zip(xs, a, b):
        np.testing.assert_allclose(ea.npvalue(), ref_f(x), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(eb.npvalue(), ref_g(x), rtol=1e-6, atol=1e-6)


def test_scale_gradient_factor_applies_per_node():
    pc = dy.ParameterCollection(seed=0)
    p, q = pc.add_parameters(3), pc.add_parameters(3)
    dy.renew_cg(strategy="agenda")
    loss = dy.sum_elems(dy.scale_gradient(p.expr(True), 2.0)) + dy.sum_elems(dy.scale_gradient(q.expr(True), 0.5))
    loss.backward()
    np.testing.assert_allclose(p.grad_as_array(), 2.0)
    np.testing.assert_allclose(q.grad_as_array(), 0.5)


def test_dropout_rates_do_not_share_a_batch(strategy):
    dy.renew_cg(strategy=strategy)
    x = dy.ones(500)
    low = [dy.dropout(x, 0.2) for _ in range(3)]
    high = [dy.dropout(x, 0.6) for _ in range(3)]
    dy.esum(low + high).forward()
    for e in low + high:
        assert set(batch_of(e)) <= {d.vindex for d in low} or set(batch_of(e)) <= {d.vindex for d in high}
    for es, p in ((low, 0.2), (high, 0.6)):
        v = np.concatenate([e.npvalue() for e in es])
        kept = v != 0
        np.testing.assert_allclose(v[kept], 1 / (1 - p), rtol=1e-6)
        assert abs((~kept).mean() - p) < 0.06


# ------------------------------------ shared argument produced in a batch ----

def test_shared_argument_computed_inside_a_batch_gets_its_gradient(strategy):
    pc = dy.ParameterCollection(seed=0)
    W, V = pc.add_parameters((3, 4)), pc.add_parameters((3, 4))
    xs = np.random.default_rng(0).uniform(-1, 1, (6, 4))

    def build():
        W2 = W * 2.0            # batched with V * 2.0: same signature
        V2 = V * 2.0
        return [dy.tanh(W2 * dy.inputVector(x)) for x in xs] + [dy.tanh(V2 * dy.inputVector(xs[0]))]

    dy.renew_cg(strategy=strategy)
    outs = build()
    dy.esum([dy.sum_elems(o) for o in outs]).backward()
    if strategy != "none":
        g = dy.cg()
        matmul, W2 = g.node_info(outs[0].vindex)[4][0], g.node_info(g.node_info(outs[0].vindex)[4][0])[4][0]
        V2 = g.node_info(g.node_info(outs[-1].vindex)[4][0])[4][0]
        assert len(batch_of_id(matmul)) == 6          # W2 * x_i: one batch
        assert {W2, V2} <= set(batch_of_id(W2))       # W2 itself was computed in a batch
    h = np.tanh(2 * W.as_array() @ xs.T)              # (3, 6)
    np.testing.assert_allclose(W.grad_as_array(), 2 * ((1 - h ** 2) @ xs), rtol=1e-5, atol=1e-6)
    W.grad[...] = 0
    V.grad[...] = 0
    check_grad(lambda: dy.esum(build()), [W, V], strategy=strategy)


# ------------------------------------------ sequences offset by one op ----

def offset_sequences(params, lengths):
    """RNNs where odd instances start with one extra op, so equal steps of
    different instances are one depth apart."""
    W, U, b = params
    outs = []
    for k, n in enumerate(lengths):
        h = dy.inputVector([0.1 * k, -0.2, 0.3])
        if k % 2:
            h = dy.tanh(h)
        for t in range(n):
            x = dy.inputVector([np.sin(k + t), np.cos(k * t), 0.5])
            h = dy.tanh(dy.affine_transform([b, W, x, U, h]))
        outs.append(h)
    return outs


def test_sequences_offset_by_one_op():
    pc = dy.ParameterCollection(seed=0)
    params = [pc.add_parameters((3, 3)), pc.add_parameters((3, 3)), pc.add_parameters(3)]
    lengths = [4, 4, 3, 5, 2, 5]
    stats = check_batching_invariance(lambda: offset_sequences(params, lengths), params,
                                      strategies=("depth", "agenda"), rtol=1e-5, atol=1e-6)
    steps = sum(lengths)
    # agenda realigns the offset instances (their extra tanh joins the others' first
    # tanh): one affine batch per step of the longest sequence, plus one for the offset;
    # batching by depth keeps the two groups apart
    affine_batches = {s: sum(stats[s]["batch_sizes"]["affine_transform"].values()) for s in stats}
    assert affine_batches["agenda"] == max(lengths) + 1
    assert affine_batches["depth"] > affine_batches["agenda"]
    assert stats["agenda"]["batches"] < stats["depth"]["batches"] < stats["none"]["batches"]
    assert stats["none"]["batch_sizes"]["affine_transform"] == {1: steps}
    check_grad(lambda: dy.esum(offset_sequences(params, lengths)), params)


# ----------------------------------------- value() in the middle of a graph ----

def mlp_instances(params, xs, probe=None):
    """Per-instance MLP; probe(k, h) is called on each hidden layer as it is built."""
    W1, b1, W2 = params
    outs = []
    for k, x in enumerate(xs):
        h = dy.tanh(dy.affine_transform([b1, W1, dy.inputVector(x)]))
        if probe:
            probe(k, h)
        outs.append(dy.logistic(W2 * h))
    return outs


@pytest.mark.parametrize("strategy", ["depth", "agenda"])
def test_value_in_the_middle_of_building(strategy):
    pc = dy.ParameterCollection(seed=0)
    params = [pc.add_parameters((4, 3)), pc.add_parameters(4), pc.add_parameters((2, 4))]
    xs = np.random.default_rng(1).uniform(-1, 1, (5, 3))

    dy.renew_cg(strategy=strategy)
    ref_outs = mlp_instances(params, xs)
    ref_loss = dy.esum([dy.sum_elems(o) for o in ref_outs])
    ref_value = ref_loss.value()
    ref_loss.backward()
    ref_grads = [p.grad_as_array() for p in params]
    for p in params:
        p.grad[...] = 0

    dy.renew_cg(strategy=strategy)
    early = {}
    outs = mlp_instances(params, xs, probe=lambda k, h: early.setdefault(k, h.npvalue()) if k == 1 else None)
    loss = dy.esum([dy.sum_elems(o) for o in outs])
    assert loss.value() == pytest.approx(ref_value, rel=1e-6)
    loss.backward()
    for p, g in zip(params, ref_grads):
        np.testing.assert_allclose(p.grad_as_array(), g, rtol=1e-5, atol=1e-7)
    # the early value() computed only h_1's ancestors; instance 0's hidden layer (built
    # before) and the later instances still batch together afterwards
    sizes = dy.cg().stats()["batch_sizes"]
    assert sizes["affine_transform"] == {1: 1, 4: 1} and sizes["tanh"] == {1: 1, 4: 1}
    assert sum(sizes["matmul"].values()) <= 2 and sum(sizes["logistic"].values()) <= 2
    assert dy.cg().stats()["nodes_run"] == len({i for _, n in dy.cg().batches() for i in n})
    np.testing.assert_allclose(early[1], np.tanh(params[0].as_array() @ xs[1] + params[1].as_array()),
                               rtol=1e-5)


def test_per_node_indices_share_a_batch_and_stay_right(strategy):
    """Indices (pick, pick_range start, pickneglogsoftmax, lookup_batch rows) are
    per-node data, not signature: nodes with different indices batch together."""
    dy.renew_cg(strategy=strategy)
    xs = [np.arange(5.0) * (k + 1) - 2 for k in range(3)]
    slices = [vec(*x)[k:k + 2] for k, x in enumerate(xs)]
    picks = [dy.pick(vec(*x), 4 - k) for k, x in enumerate(xs)]
    nls = [dy.pickneglogsoftmax(vec(*x), k) for k, x in enumerate(xs)]
    dy.esum([dy.sum_elems(e) for e in slices + picks + nls]).forward()
    if strategy != "none":
        for group in (slices, picks, nls):
            assert set(batch_of(group[0])) == {e.vindex for e in group}
    for k, x in enumerate(xs):
        np.testing.assert_allclose(slices[k].npvalue(), x[k:k + 2])
        assert picks[k].value() == x[4 - k]
        assert nls[k].value() == pytest.approx(np.log(np.exp(x).sum()) - x[k], rel=1e-5)


def test_agenda_batches_nodes_whose_arguments_an_earlier_value_computed():
    # W2 * h_1, whose argument an earlier value() computed, is ready early; agenda's
    # priority is the average depth of all pending nodes of a signature (as DyNet's),
    # so it waits and runs with the other four
    pc = dy.ParameterCollection(seed=0)
    params = [pc.add_parameters((4, 3)), pc.add_parameters(4), pc.add_parameters((2, 4))]
    xs = np.random.default_rng(1).uniform(-1, 1, (5, 3))
    dy.renew_cg(strategy="agenda")
    outs = mlp_instances(params, xs, probe=lambda k, h: h.value() if k == 1 else None)
    dy.esum(outs).value()
    assert dy.cg().stats()["batch_sizes"]["matmul"] == {5: 1}


def test_agenda_reaches_the_lower_bound_on_chains_of_different_lengths():
    # per-instance losses of chains that end at different steps: agenda waits for all
    # of them (they have the deepest average) instead of one batch per length
    pc = dy.ParameterCollection(seed=0)
    W, b = pc.add_parameters((4, 4)), pc.add_parameters(4)
    dy.renew_cg(strategy="agenda")
    losses = []
    for n in (3, 5, 4, 6, 5):
        x = dy.inputVector(np.ones(4))
        for _ in range(n):
            x = dy.tanh(W * x + b)
        losses.append(dy.squared_norm(x))
    dy.esum(losses).value()
    assert dy.cg().stats()["batches"] == dy.cg().batch_lower_bound()[0]
    assert dy.cg().stats()["batch_sizes"]["squared_norm"] == {5: 1}


# ------------------------------------------------------- bugs found here ----

@pytest.mark.parametrize("strategy", ["depth", "agenda"])
def test_backward_from_a_node_whose_batch_holds_non_ancestors(strategy):
    """a1 and a2 run in one batch; backward from a1 alone must not touch a2's
    (absent) gradient storage. This used to segfault: the batch's kernel wrote the
    gradient of a2's argument tanh(q) through a NULL pointer. Unfused: fusion runs
    a1 in the pass of exp(...) (tests/engine/test_fusion.py covers its partial backward)."""
    pc = dy.ParameterCollection(seed=0)
    p, q = pc.add_parameters(1), pc.add_parameters(1)
    for _ in range(3):
        dy.renew_cg(strategy=strategy, fusion=False)
        t = dy.tanh(q.expr(True))
        a2 = p + t                      # before a1: gradient() is of nodes up to a1
        a1 = p + dy.exp(vec(0.5))
        (a1 + a2).value()
        assert {a1.vindex, a2.vindex} <= set(batch_of(a1))
        p.grad[...] = 0
        q.grad[...] = 0
        a1.backward()
        assert p.grad_as_array()[0] == 1.0 and q.grad_as_array()[0] == 0.0
        assert t.gradient()[0] == 0.0 and a2.gradient()[0] == 0.0
        # backward from the other one is still right
        a2.backward()
        assert p.grad_as_array()[0] == 2.0
        assert q.grad_as_array()[0] == pytest.approx(1 - np.tanh(q.as_array()[0]) ** 2)


# deliberately a subset of the built-in strategies (not the shared `strategy` fixture of
# tests/conftest.py): the unbatched reference and the two basic
# batching schedules are enough to batch the unused node with used ones
@pytest.mark.parametrize("strategy", ["none", "depth", "agenda"])
def test_no_nan_from_a_batched_node_the_loss_does_not_use(strategy):
    # log(p) at p = 0 has an infinite derivative; batched with log(q), which the loss
    # uses, it must contribute nothing (not 0 * inf = NaN) to p's gradient.
    pc = dy.ParameterCollection(seed=0)
    p = pc.add_parameters(3, init=0.0)
    q = pc.add_parameters(3, init=1.0)
    dy.renew_cg(strategy=strategy)
    used = dy.log(dy.parameter(q))
    unused = dy.log(dy.parameter(p))
    dy.esum([dy.sum_elems(used), dy.sum_elems(unused)]).value()
    if strategy != "none":
        assert ("log", 2) in [(op, len(ids)) for op, ids in dy.cg().batches()]
    dy.sum_elems(used).backward()
    np.testing.assert_array_equal(p.grad_as_array(), 0.0)
    np.testing.assert_array_equal(q.grad_as_array(), 1.0)


# deliberately a subset of the built-in strategies (not the shared `strategy` fixture of
# tests/conftest.py): as above, the reference and the two basic
# batching schedules, which put the matmuls in one batch
@pytest.mark.parametrize("strategy", ["none", "depth", "agenda"])
def test_backward_through_part_of_a_matmul_batch(strategy):
    # the loss uses two of four W * x_i computed in one batch: dW and dx_i come from
    # those two only (the shared-weight gemm runs on the gathered part of the batch)
    pc = dy.ParameterCollection(seed=3)
    W = pc.add_parameters((2, 3))
    xs = [pc.add_parameters(3) for _ in range(4)]
    dy.renew_cg(strategy=strategy)
    ys = [W * dy.parameter(x) for x in xs]
    dy.esum([dy.sum_elems(y) for y in ys]).value()
    (dy.sum_elems(ys[1]) + dy.sum_elems(ys[3])).backward()
    w = W.as_array()
    expected_dw = np.outer(np.ones(2), xs[1].as_array() + xs[3].as_array())
    np.testing.assert_allclose(W.grad_as_array(), expected_dw, rtol=1e-6)
    for i, x in enumerate(xs):
        want = w.sum(axis=0) if i in (1, 3) else np.zeros(3)
        np.testing.assert_allclose(x.grad_as_array(), want, rtol=1e-6)


@pytest.mark.parametrize("strategy", ["depth", "agenda", "critical"])
def test_postponed_weight_gradients_of_a_large_weight(strategy):
    # a 512 x 256 weight (over the postponing threshold) used at every step of
    # sequences of different lengths: its gradient is summed by one gemm at the end
    # of backward and must equal the per-node sum of 'none'
    pc = dy.ParameterCollection(seed=5)
    W = pc.add_parameters((512, 256), init=dy.UniformInitializer(0.05))
    V = pc.add_parameters((256, 512), init=dy.UniformInitializer(0.05))
    xs = [pc.add_parameters(256) for _ in range(4)]

    def build():
        outs = []
        for k, x in enumerate(xs):
            h = dy.parameter(x)
            for _ in range(2 + k):
                h = dy.tanh(V * dy.tanh(W * h))
            outs.append(dy.sum_elems(h))
        return outs
    check_batching_invariance(build, [W, V] + xs, strategies=[strategy], rtol=1e-4, atol=1e-6)


def test_memory_does_not_grow_from_step_to_step():
    pc = dy.ParameterCollection(seed=6)
    E = pc.add_lookup_parameters((100, 16))
    lstm = dy.LSTMBuilder(1, 16, 16, pc)
    W = pc.add_parameters((4, 16))
    trainer = dy.SimpleSGDTrainer(pc, 0.1)
    rng = np.random.default_rng(0)
    capacity = []
    for step in range(40):
        dy.renew_cg()
        losses = [dy.pickneglogsoftmax(W * lstm.initial_state().transduce(
                      [E[int(w)] for w in rng.integers(0, 100, size=5 + step % 3)])[-1], 1)
                  for _ in range(8)]
        loss = dy.esum(losses)
        loss.value()
        loss.backward()
        trainer.update()
        capacity.append(dy.cg().stats()["arena_capacity_bytes"])
    assert capacity[-1] == capacity[10], "the arenas keep growing"
