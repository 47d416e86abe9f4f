"""The DyNet-style API surface."""
import numpy as np
import pytest

import autobatch as dy


@pytest.fixture
def pc():
    return dy.ParameterCollection(seed=0)


def test_values_and_shapes():
    dy.renew_cg()
    s = dy.scalarInput(2.5)
    v = dy.inputVector([1, 2, 3])
    m = dy.inputTensor([[1, 2, 3], [4, 5, 6]])
    b = dy.inputTensor([[1, 2], [3, 4], [5, 6]], batched=True)      # (3,) x batch 2
    assert s.value() == 2.5 and isinstance(s.value(), float) and s.scalar_value() == 2.5
    assert v.value() == [1.0, 2.0, 3.0]
    assert isinstance(m.value(), np.ndarray) and m.value().shape == (2, 3)
    assert s.dim() == ((1,), 1) and v.dim() == ((3,), 1) and m.dim() == ((2, 3), 1) and b.dim() == ((3,), 2)
    np.testing.assert_array_equal(m.npvalue(), [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(b.npvalue(), [[1, 2], [3, 4], [5, 6]])
    assert m.vec_value() == [1, 4, 2, 5, 3, 6]              # column-major
    assert b.vec_value() == [1, 3, 5, 2, 4, 6]              # batch last
    assert m.npvalue().dtype == np.float32
    np.testing.assert_array_equal(dy.inputMatrix([1, 2, 3, 4, 5, 6], (2, 3)).npvalue(), [[1, 3, 5], [2, 4, 6]])
    bm = dy.inputTensor(np.arange(12.0).reshape(2, 3, 2), batched=True)
    assert bm.dim() == ((2, 3), 2)
    np.testing.assert_array_equal(dy.pick_batch_elem(bm, 1).npvalue(), np.arange(12.0).reshape(2, 3, 2)[:, :, 1])
    assert dy.zeros(2).value() == [0, 0] and dy.ones((2,)).value() == [1, 1]
    assert dy.constant(3, 0.5, batch_size=2).dim() == ((3,), 2)


def test_gradient_of_intermediate_nodes(pc):
    p = pc.add_parameters(3, init=dy.NumpyInitializer([0.1, -0.2, 0.3]))
    dy.renew_cg()
    x = dy.inputVector([1, 2, 3])
    h = dy.tanh(p.expr(True))
    loss = dy.sum_elems(h * 2.0)
    late = dy.inputVector([1, 2, 3])
    loss.backward()
    np.testing.assert_allclose(h.gradient(), [2, 2, 2])
    np.testing.assert_allclose(p.grad_as_array(), 2 * (1 - np.tanh([0.1, -0.2, 0.3]) ** 2), rtol=1e-6)
    np.testing.assert_array_equal(x.gradient(), [0, 0, 0])      # inputs get no gradient
    with pytest.raises(RuntimeError, match="backward"):            # as in DyNet
        late.gradient()                                             # (created after the loss)


@pytest.mark.parametrize("strategy", ["none", "agenda"])
def test_operators(pc, strategy):
    p = pc.add_parameters(3, init=dy.NumpyInitializer([1.0, 2.0, 4.0]))
    W = pc.add_parameters((2, 3), init=dy.NumpyInitializer([[1, 0, 1], [0, 1, 0]]))
    dy.renew_cg(strategy=strategy)
    x = dy.inputVector([2.0, 4.0, 8.0])
    pv, xv, Wv = np.array([1.0, 2.0, 4.0]), np.array([2.0, 4.0, 8.0]), W.as_array()
    cases = {
        "x + p": (x + p, xv + pv), "p + x": (p + x, pv + xv), "x - p": (x - p, xv - pv),
        "p - x": (p - x, pv - xv), "x / p": (x / p, xv / pv), "-x": (-x, -xv), "-p": (-p, -pv),
        "x + 1": (x + 1, xv + 1), "1 + x": (1 + x, 1 + xv), "x - 1": (x - 1, xv - 1),
        "1 - x": (1 - x, 1 - xv), "x * 2": (x * 2, xv * 2), "2 * x": (2 * x, 2 * xv),
        "x / 2": (x / 2, xv / 2), "8 / x": (8 / x, 8 / xv), "p * 3": (p * 3, pv * 3),
        "3 * p": (3 * p, 3 * pv), "p - 1": (p - 1, pv - 1), "1 - p": (1 - p, 1 - pv),
        "p / 2": (p / 2, pv / 2), "2 / p": (2 / p, 2 / pv), "np.float32 * x": (np.float32(2) * x, 2 * xv),
        "W * x": (W * x, Wv @ xv), "W * p": (W * p, Wv @ pv),
        "scalar * x": (dy.scalarInput(3) * x, 3 * xv), "x * scalar": (x * dy.scalarInput(3), 3 * xv),
        "x ** 2": (dy.pow(x, 2), xv ** 2),
    }
    for name, (e, expected) in cases.items():
        np.testing.assert_allclose(e.npvalue(), expected, rtol=1e-6, err_msg=name)


def test_indexing_and_slicing():
    dy.renew_cg()
    x = dy.inputVector([10, 11, 12, 13])
    m = dy.inputTensor([[1, 2], [3, 4], [5, 6]])
    assert x[2].value() == 12 and x[0].dim() == ((1,), 1)
    assert x[1:3].value() == [11, 12] and x[:2].value() == [10, 11] and x[2:].value() == [12, 13]
    assert m[1].value() == [3, 4]                       # a row: element 1 along d=0
    assert dy.pick(m, 1, 1).value() == [2, 4, 6]        # a column
    assert x[::2].value() == [10, 12] and x[-1].value() == 13     # as in DyNet
    with pytest.raises(ValueError):
        x[::-1]                                         # DyNet: the step must be > 0


def test_lookup(pc):
    lp = pc.add_lookup_parameters((5, 3))
    dy.renew_cg()
    np.testing.assert_array_equal(lp[2].npvalue(), lp.as_array()[2])
    np.testing.assert_array_equal(dy.lookup(lp, 4).npvalue(), lp.as_array()[4])
    b = lp.batch([4, 0, 4])
    assert b.dim() == ((3,), 3)
    np.testing.assert_array_equal(b.npvalue(), lp.as_array()[[4, 0, 4]].T)
    np.testing.assert_array_equal(dy.lookup_batch(lp, np.array([1, 2])).npvalue(), lp.as_array()[[1, 2]].T)
    # lookup reads the table's memory: writes to values are seen by later graphs
    lp.values[2] = [1, 2, 3]
    dy.renew_cg()
    assert lp[2].value() == [1, 2, 3]
    # update=False: no gradient into the table
    dy.renew_cg()
    dy.sum_elems(dy.lookup(lp, 1, update=False) * 2 + lp[3]).backward()
    assert (lp.grad_as_array()[1] == 0).all() and (lp.grad_as_array()[3] == 1).all()


def test_parameters_views(pc):
    W = pc.add_parameters((2, 3))
    W.values[1, 2] = 5.0
    dy.renew_cg()
    assert W.expr(True).npvalue()[1, 2] == 5.0
    assert W.as_array()[1, 2] == 5.0 and W.shape() == (2, 3)
    dy.sum_elems(W * dy.inputVector([1, 2, 3])).backward()
    np.testing.assert_array_equal(W.grad, [[1, 2, 3], [1, 2, 3]])
    W.grad[...] = 0
    assert (W.grad_as_array() == 0).all()
    c = dy.const_parameter(W)
    dy.sum_elems(c * dy.inputVector([1, 2, 3])).backward()
    assert (W.grad_as_array() == 0).all()


def per_instance_loss(E, W, words, gold):
    return dy.esum([dy.pickneglogsoftmax(W * dy.tanh(E[w]), g) for w, g in zip(words, gold)])


def hand_batched_loss(E, W, words, gold):
    return dy.sum_batches(dy.pickneglogsoftmax_batch(W * dy.tanh(dy.lookup_batch(E, words)), gold))


@pytest.mark.parametrize("strategy", ["none", "agenda"])
def test_hand_batched_equals_per_instance(pc, strategy):
    E = pc.add_lookup_parameters((6, 4))
    W = pc.add_parameters((5, 4))
    words, gold = [3, 1, 3, 5], [0, 4, 2, 2]
    results = []
    for loss_fn in (per_instance_loss, hand_batched_loss):
        dy.renew_cg(strategy=strategy)
        loss = loss_fn(E, W, words, gold)
        value = loss.value()
        loss.backward()
        results.append((value, E.grad_as_array(), W.grad_as_array()))
        E.grad[...] = 0
        W.grad[...] = 0
    (v1, e1, w1), (v2, e2, w2) = results
    assert v1 == pytest.approx(v2, rel=1e-6)
    np.testing.assert_allclose(e1, e2, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(w1, w2, rtol=1e-5, atol=1e-7)
    assert (e1[[0, 2, 4]] == 0).all() and (e1[[1, 3, 5]] != 0).any(axis=1).all()
    # batched losses reduce to the same scalar with a batch of one
    dy.renew_cg(strategy=strategy)
    lb = dy.pickneglogsoftmax_batch(W * dy.tanh(dy.lookup_batch(E, words)), gold)
    assert lb.dim() == ((1,), 4)
    assert lb.npvalue().sum() == pytest.approx(v1, rel=1e-6)


def test_sgd_dense_update(pc):
    W = pc.add_parameters((2, 2), init=dy.NumpyInitializer([[1, 2], [3, 4]]))
    b = pc.add_parameters(2, init=0.5)
    trainer = dy.SimpleSGDTrainer(pc, 0.1)
    dy.renew_cg()
    loss = dy.sum_elems(W * dy.inputVector([1, -1]) + b)
    loss.backward()
    trainer.update()
    np.testing.assert_allclose(W.as_array(), [[0.9, 2.1], [2.9, 4.1]], rtol=1e-6)
    np.testing.assert_allclose(b.as_array(), [0.4, 0.4], rtol=1e-6)
    assert (W.grad_as_array() == 0).all() and (b.grad_as_array() == 0).all()


def test_numeric_initializers(pc):
    assert (pc.add_parameters(3, init=0).as_array() == 0).all()
    assert (pc.add_parameters((2, 2), init=0.0).as_array() == 0).all()
    assert (pc.add_parameters(2, init=1.5).as_array() == 1.5).all()
    assert (pc.add_lookup_parameters((3, 2), init=0).as_array() == 0).all()
    assert (pc.add_parameters(3).as_array() != 0).any()


def test_sgd_clips_large_gradients(pc):
    p = pc.add_parameters(4, init=0.0)
    trainer = dy.SimpleSGDTrainer(pc, 1.0)
    dy.renew_cg()
    dy.sum_elems(p * 10.0).backward()                  # gradient norm 20 > 5
    trainer.update()
    np.testing.assert_allclose(p.as_array(), -2.5, rtol=1e-6)
    trainer.set_clip_threshold(0)
    dy.renew_cg()
    dy.sum_elems(p * 10.0).backward()
    trainer.update()
    np.testing.assert_allclose(p.as_array(), -12.5, rtol=1e-6)


def test_sgd_sparse_update_touches_only_used_rows(pc):
    E = pc.add_lookup_parameters((5, 3))
    before = E.as_array()
    trainer = dy.SimpleSGDTrainer(pc, 0.5)
    dy.renew_cg()
    loss = dy.sum_elems(E[1]) + dy.sum_elems(dy.sum_batches(E.batch([3, 3])))
    loss.backward()
    assert list(E.used_rows()) == [1, 3]
    trainer.update()
    after = E.as_array()
    np.testing.assert_array_equal(after[[0, 2, 4]], before[[0, 2, 4]])
    np.testing.assert_allclose(after[1], before[1] - 0.5, rtol=1e-6)
    np.testing.assert_allclose(after[3], before[3] - 1.0, rtol=1e-6)
    assert len(E.used_rows()) == 0 and (E.grad_as_array() == 0).all()


def test_cg_version_and_stale():
    v = dy.cg_version()
    g = dy.renew_cg()
    assert dy.cg_version() == v + 1 and g is dy.cg()
    x = dy.inputVector([1])
    assert x.cg_version == dy.cg_version() and not x.is_stale()
    dy.renew_cg()
    assert dy.cg_version() == v + 2 and x.is_stale()


def test_stats_and_inspection(pc):
    W = pc.add_parameters((3, 3))
    dy.renew_cg(strategy="agenda")
    hs = [dy.tanh(W * dy.inputVector([k, 1, 2])) for k in range(4)]
    total = dy.esum(hs)
    total.value()
    stats = dy.cg().stats()
    assert {"strategy", "nodes", "nodes_run", "batches", "signatures", "batch_sizes", "unbatched",
            "unbatched_nodes", "forward_calls", "backward_calls", "seconds", "arena_bytes",
            "grad_arena_bytes"} <= set(stats)
    assert set(stats["seconds"]) == {"build", "schedule", "forward", "backward"}
    assert stats["strategy"] == "agenda" and stats["nodes"] == dy.cg().num_nodes == 14
    assert stats["batch_sizes"] == {"matmul": {4: 1}, "tanh": {4: 1}, "esum": {1: 1}}
    assert stats["batches"] == 3 and stats["nodes_run"] == 9 and stats["forward_calls"] == 1
    assert stats["unbatched"] == {"esum": {"no other node has its signature": 1}}
    assert dy.cg().batches()[0] == ("matmul", [dy.cg().node_info(h.vindex)[4][0] for h in hs])
    op, shape, bs, sig, args = dy.cg().node_info(total.vindex)
    assert (op, shape, bs) == ("esum", (3,), 1) and args == [h.vindex for h in hs]
    assert dy.default_strategy() in dy.available_strategies()
    assert {"none", "depth", "agenda"} <= set(dy.available_strategies())


@pytest.mark.parametrize("strategy", ["none", "agenda"])
def test_recalculate_after_changing_parameters(strategy):
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((2, 2), init=1.0)
    dy.renew_cg(strategy=strategy)
    y = dy.tanh(W * dy.inputVector([0.5, 0.25]))
    s = dy.sum_elems(y)
    assert s.value() == pytest.approx(2 * np.tanh(0.75), rel=1e-6)
    W.set_value(np.full((2, 2), 2.0))
    assert s.value() == pytest.approx(2 * np.tanh(0.75), rel=1e-6)      # incremental: as it was
    assert s.value(recalculate=True) == pytest.approx(2 * np.tanh(1.5), rel=1e-6)
    assert y.npvalue() == pytest.approx(np.tanh([1.5, 1.5]), rel=1e-6)
    W.set_value(np.zeros((2, 2)))
    dy.cg().invalidate()
    assert s.value() == 0.0
    s.backward()
    np.testing.assert_allclose(W.grad_as_array(), np.outer([1, 1], [0.5, 0.25]), rtol=1e-6)


def test_immediate_compute_runs_every_node_when_created():
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((3, 3))
    E = pc.add_lookup_parameters((4, 3))
    values = {}
    for immediate in (False, True):
        dy.renew_cg(immediate_compute=immediate)
        h = dy.tanh(W * E.batch([0, 2]) + E[1])
        if immediate:
            assert dy.cg().stats()["batches"] == 4      # already computed, one node at a time
        loss = dy.sum_batches(dy.squared_norm(h))
        values[immediate] = loss.value()
    assert values[True] == pytest.approx(values[False], rel=1e-6)


def test_check_validity_names_the_op_that_made_a_nan():
    dy.renew_cg(check_validity=True)
    x = dy.inputVector([1.0, 0.0])
    ok = dy.exp(x)
    assert ok.value() == pytest.approx([np.e, 1.0])
    with pytest.raises(FloatingPointError, match="log"):
        dy.sum_elems(dy.log(x)).value()
    dy.renew_cg()                                           # off again
    assert dy.log(dy.inputVector([1.0, 0.0])).value()[1] == -np.inf


def test_autobatching_false_means_strategy_none():
    assert dy.renew_cg(autobatching=False).strategy.name == "none"
    with pytest.raises(ValueError, match="contradict"):
        dy.renew_cg(autobatching=False, strategy="agenda")
    assert dy.renew_cg().strategy.name == dy.default_strategy() == "lookahead"


@pytest.mark.parametrize("strategy", ["none", "agenda"])
def test_backward_full_gives_gradients_of_inputs_and_constants(strategy):
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((3, 2))
    C = pc.add_parameters(3)
    x0 = np.array([0.3, -0.7])
    w, c = W.as_array().astype(np.float64), C.as_array().astype(np.float64)
    t = np.tanh(w @ x0 + c)
    want_x = w.T @ (1 - t * t)
    want_c = 1 - t * t
    dy.renew_cg(strategy=strategy)
    x = dy.inputVector(x0)
    cp = dy.const_parameter(C)
    loss = dy.sum_elems(dy.tanh(W * x + cp))
    loss.backward()
    np.testing.assert_array_equal(x.gradient(), 0.0)            # not asked for
    W_grad_once = W.grad_as_array().copy()
    loss.backward(full=True)
    np.testing.assert_allclose(x.gradient(), want_x, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(cp.gradient(), want_c, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(C.grad_as_array(), 0.0)       # a constant stays untrained
    np.testing.assert_allclose(W.grad_as_array(), 2 * W_grad_once, rtol=1e-6)
