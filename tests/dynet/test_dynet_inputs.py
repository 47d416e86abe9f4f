"""DyNet's inputs and expressions, compared with DyNet's own results
(tests/data/dynet_inputs.json, recorded by tests/data/dynet_inputs.py with dynet38),
and the engine-side guarantees behind them: a set() input never lets a stale value or
gradient be read, a Parameters used as an Expression always reads the current graph's
node, strided slices have correct gradients."""
import importlib.util
import json
import pathlib
import threading

import numpy as np
import pytest

import autobatch as dy

from python_strategies import PYTHON_STRATEGIES

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
_spec = importlib.util.spec_from_file_location("dynet_inputs", DATA / "dynet_inputs.py")
probes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probes)
DYNET = json.loads((DATA / "dynet_inputs.json").read_text())

# where DyNet raises another exception class for the same mistake
OTHER_ERROR = {"index_stop_big": "IndexError",           # DyNet 2.0 raised IndexError too
               "identity_lookup_rect": "ValueError",
               "to_device_gpu": "ValueError"}


def same(ours, theirs):
    if isinstance(theirs, dict) and "array" in theirs:
        assert isinstance(ours, dict) and ours["shape"] == theirs["shape"]
        np.testing.assert_allclose(ours["array"], theirs["array"], rtol=1e-5, atol=1e-6)
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs):
            same(a, b)
    elif isinstance(theirs, float):
        assert ours == pytest.approx(theirs, rel=1e-5, abs=1e-6)
    else:
        assert ours == theirs


@pytest.mark.parametrize("name,code", probes.PROBES, ids=[n for n, _ in probes.PROBES])
def test_as_dynet(name, code):
    ours, theirs = probes.run(dy, code), DYNET[name]
    if "error" in theirs:
        assert ours == {"error": OTHER_ERROR.get(name, theirs["error"])}
        return
    assert "error" not in ours, ours
    assert set(ours) == set(theirs)
    if "dim" in theirs:
        assert ours["dim"] == theirs["dim"]
    same(ours["value"], theirs["value"])


# ------------------------------------------------- set(): no stale values ----

def test_set_recomputes_every_downstream_value_and_gradient():
    pc = dy.ParameterCollection(seed=1)
    W = pc.add_parameters((4, 3))
    dy.renew_cg()
    x = dy.vecInput(3)
    h = dy.tanh(W * x)
    loss = dy.sum_elems(dy.cmult(h, h))
    for values in ([0.5, -1.0, 2.0], [1.0, 0.0, 0.0], [-0.3, 0.2, 0.1]):
        x.set(values)
        ref = np.tanh(W.as_array() @ np.array(values, dtype=np.float32))
        np.testing.assert_allclose(h.npvalue(), ref, rtol=1e-5)          # a middle node
        assert loss.value() == pytest.approx(float(ref @ ref), rel=1e-5)
        W.grad[...] = 0
        loss.backward()
        expect = np.outer(2 * ref * (1 - ref ** 2), values)
        np.testing.assert_allclose(W.grad_as_array(), expect, rtol=1e-4, atol=1e-6)


def test_value_set_value_of_the_same_node():
    dy.renew_cg()
    x = dy.inputVector([1.0, 2.0])
    y = x * 3
    assert y.value() == [3.0, 6.0]
    x.set([5.0, 7.0])
    assert x.value() == [5.0, 7.0] and y.value() == [15.0, 21.0]
    x.set([0.0, 1.0])
    assert y.npvalue().tolist() == [0.0, 3.0]


def test_backward_right_after_set_uses_the_new_values():
    # DyNet reuses the old forward values here (a bug); the graph must recompute
    pc = dy.ParameterCollection()
    W = pc.add_parameters((2, 3), init=np.arange(6.0).reshape(2, 3))
    dy.renew_cg()
    x = dy.vecInput(3)
    loss = dy.sum_elems(dy.cmult(W * x, W * x))
    x.set([1, 0, 0])
    loss.backward()
    before = W.grad_as_array()
    x.set([0, 1, 0])
    loss.backward()                      # no value() in between
    np.testing.assert_allclose(W.grad_as_array() - before, [[0, 2, 0], [0, 8, 0]])


def test_gradient_after_set_is_an_error_until_the_next_backward():
    pc = dy.ParameterCollection()
    W = pc.add_parameters((2, 3))
    dy.renew_cg()
    x = dy.vecInput(3)
    loss = dy.sum_elems(W * x)
    loss.backward()
    x.set([1, 1, 1])
    with pytest.raises(RuntimeError, match="before backward"):
        loss.gradient()
    loss.backward()
    assert loss.gradient().tolist() == [1.0]


def test_lookup_set_moves_the_row_and_its_gradient():
    pc = dy.ParameterCollection()
    lp = pc.add_lookup_parameters((5, 2), init=np.arange(10.0).reshape(5, 2))
    dy.renew_cg()
    e = lp[1]
    loss = dy.sum_elems(e * 2)
    assert loss.value() == 2 + 3 + 2 + 3 - 0.0 * 0 + 0 and e.value() == [2.0, 3.0]
    e.set(4)
    assert e.value() == [8.0, 9.0] and loss.value() == 34.0
    loss.backward()
    g = lp.grad_as_array()
    assert g[4].tolist() == [2.0, 2.0] and g[1].tolist() == [0.0, 0.0]
    assert 4 in lp.used_rows().tolist()          # sparse updates see the new row
    with pytest.raises(IndexError):
        e.set(5)
    with pytest.raises(TypeError):
        e.set(1.5)
    assert e.value() == [8.0, 9.0]               # a refused set() changes nothing


def test_constant_lookup_set_stays_constant():
    pc = dy.ParameterCollection()
    lp = pc.add_lookup_parameters((3, 2), init=np.ones((3, 2)))
    dy.renew_cg()
    e = dy.lookup(lp, 0, update=False)
    loss = dy.sum_elems(e)
    loss.backward()
    e.set(2)
    loss.backward()
    assert not lp.grad_as_array().any()


def test_lookup_batch_set_checks_before_changing():
    pc = dy.ParameterCollection()
    lp = pc.add_lookup_parameters((4, 1), init=np.arange(4.0).reshape(4, 1))
    dy.renew_cg()
    b = dy.lookup_batch(lp, [0, 1])
    assert b.value() == [0.0, 1.0]
    b.set([3, 2])
    assert b.value() == [3.0, 2.0]
    for bad, error in (([1], ValueError), ([1, 2, 3], ValueError), ([0, 4], IndexError), (2, TypeError)):
        with pytest.raises(error):
            b.set(bad)
    assert b.value() == [3.0, 2.0]


def test_set_errors_are_clear_and_change_nothing():
    dy.renew_cg()
    v = dy.vecInput(2)
    s = dy.scalarInput(1.0)
    y = dy.tanh(v)
    for bad, error in (([1], ValueError), ([1, 2, 3], ValueError), ([[1, 2]], TypeError),
                       ("ab", TypeError), (3, TypeError), ([1, float("nan")], ValueError)):
        with pytest.raises(error):
            v.set(bad)
    assert v.value() == [0.0, 0.0]
    with pytest.raises(TypeError):
        s.set([2.0])
    with pytest.raises(TypeError, match="set_index"):
        y.set_index(0)
    with pytest.raises(TypeError, match="set\\(\\)"):
        y.set([1, 2])
    with pytest.raises(ValueError, match="reusable"):
        dy.zeros(2).set([1, 2])
    with pytest.raises(IndexError):
        dy.pick(v, 0).set_index(2)


def test_set_does_not_grow_memory():
    dy.renew_cg()
    x = dy.vecInput(50)
    y = dy.sum_elems(dy.tanh(x) * 2)
    y.value()
    before = dy.cg().stats()["arena_capacity_bytes"]
    for k in range(200):
        x.set(np.full(50, k / 100.0))
        y.value()
    assert dy.cg().stats()["arena_capacity_bytes"] == before


def test_set_under_every_strategy_gives_the_unbatched_values(strategies):
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, 3) for _ in range(4)]
    results = {}
    # the built-in strategies and two in Python; not dy.available_strategies(), which also
    # holds whatever other test modules registered (test_errors' broken one among them)
    for strategy in strategies + PYTHON_STRATEGIES:
        pc = dy.ParameterCollection(seed=3)
        W = pc.add_parameters((2, 3))
        dy.renew_cg(strategy=strategy)
        xs = [dy.vecInput(3) for _ in range(3)]
        loss = dy.esum([dy.sum_elems(dy.logistic(W * x)) for x in xs])
        out = []
        for k in range(2):
            for j, x in enumerate(xs):
                x.set(inputs[(j + k) % 4])
            out.append(loss.value())
            loss.backward()
        results[strategy] = (out, W.grad_as_array())
    ref = results["none"]
    for strategy, (out, grad) in results.items():
        np.testing.assert_allclose(out, ref[0], rtol=1e-5, err_msg=strategy)
        np.testing.assert_allclose(grad, ref[1], rtol=1e-5, atol=1e-6, err_msg=strategy)


# ------------------------------------------- Parameters as Expressions ----

def test_parameters_follow_the_current_graph():
    pc = dy.ParameterCollection()
    p = pc.add_parameters(3, init=np.array([1.0, 2.0, 3.0]))
    for _ in range(3):
        dy.renew_cg()
        y = dy.tanh(p) * 2                      # p is this graph's node each time
        np.testing.assert_allclose(y.npvalue(), 2 * np.tanh([1.0, 2.0, 3.0]), rtol=1e-6)
        assert not p.is_stale() and p.vindex == p.vindex
    old = y
    dy.renew_cg()
    with pytest.raises(dy.StaleExpressionError):
        old.value()
    assert p.value() == [1.0, 2.0, 3.0]
    p.set_value(np.array([0.0, 0.0, 1.0]))
    dy.renew_cg()
    assert p.value() == [0.0, 0.0, 1.0]


def test_parameters_many_in_one_op_after_renew():
    # each new graph makes the parameters' nodes while the op checks its arguments:
    # the node array must not move under the op (see ComputationGraph.add_node)
    pc = dy.ParameterCollection(seed=2)
    ps = [pc.add_parameters((2, 2)) for _ in range(3)]
    f = pc.add_parameters((2, 2, 1, 2))
    b = pc.add_parameters(2)
    img = np.ones((3, 3, 1), dtype=np.float32)
    for n_before in range(40):
        dy.renew_cg()
        assert dy.cg().stats()["node_capacity"] >= 4     # free slots for the nodes of
        for _ in range(n_before):                        # parameters used in one op
            dy.scalarInput(1.0)
            assert dy.cg().stats()["node_capacity"] - dy.cg().num_nodes >= 4
        a = ps[0] + ps[1]
        c = dy.cmult(ps[1], ps[2]) - ps[0] * ps[2]
        conv = dy.conv2d_bias(dy.inputTensor(img), f, b, [1, 1])
        assert dy.cg().stats()["node_capacity"] - dy.cg().num_nodes >= 4
        A, B, C = (p.as_array() for p in ps)
        np.testing.assert_allclose(a.npvalue(), A + B, rtol=1e-6)
        np.testing.assert_allclose(c.npvalue(), B * C - A @ C, rtol=1e-5, atol=1e-6)
        assert conv.dim() == ((2, 2, 2), 1)


def test_parameters_in_threads_use_each_threads_graph():
    pc = dy.ParameterCollection()
    p = pc.add_parameters(2, init=np.array([1.0, -1.0]))
    out, errors = [], []

    def work(k):
        try:
            for _ in range(20):
                dy.renew_cg()
                out.append((dy.scalarInput(float(k)) * p).value())
        except Exception as e:       # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted({tuple(v) for v in out}) == [(1.0, -1.0), (2.0, -2.0)]


@pytest.mark.parametrize("name", sorted(dy.ELEMENTWISE_FUNCTIONS))
def test_every_unary_function_takes_parameters(name):
    pc = dy.ParameterCollection()
    p = pc.add_parameters(3, init=np.array([0.2, 0.5, 0.7]))
    f = getattr(dy, name)
    dy.renew_cg()
    ours = f(p)
    ref = f(p.expr(True))
    np.testing.assert_array_equal(ours.npvalue(), ref.npvalue())
    dy.sum_elems(ours).backward()
    g = p.grad_as_array()
    p.grad[...] = 0
    dy.sum_elems(ref).backward()
    np.testing.assert_array_equal(g, p.grad_as_array())


def test_first_graph_is_version_zero_and_renew_counts():
    import subprocess
    import sys
    code = ("import autobatch as dy; a = dy.cg_version(); dy.renew_cg(); b = dy.cg_version(); "
            "g = dy.cg().renew(); print(a, b, dy.cg_version(), g.version())")
    root = str(pathlib.Path(dy.__file__).parent.parent)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=root)
    assert out.stdout.split() == ["0", "1", "2", "2"]          # as DyNet's


def test_lookup_parameters_as_expression_train_every_row():
    pc = dy.ParameterCollection()
    lp = pc.add_lookup_parameters((3, 2), init=np.arange(6.0).reshape(3, 2))
    dy.renew_cg()
    assert lp.dim() == ((2, 3), 1)
    dy.sum_elems(dy.cmult(lp, lp)).backward()
    np.testing.assert_allclose(lp.grad_as_array(), 2 * np.arange(6.0).reshape(3, 2))
    assert lp.used_rows().tolist() == [0, 1, 2]


def test_parameters_are_not_pickled_as_expressions():
    import pickle
    pc = dy.ParameterCollection()
    for p in (pc.add_parameters(2), pc.add_lookup_parameters((2, 2))):
        with pytest.raises(TypeError, match="dy.save"):
            pickle.dumps(p)


def test_parameter_update_false_is_constant():
    pc = dy.ParameterCollection()
    p = pc.add_parameters(2, init=np.array([1.0, 2.0]))
    dy.renew_cg()
    dy.sum_elems(dy.const_parameter(p) * 3).backward()
    assert not p.grad_as_array().any()
    dy.sum_elems(dy.parameter(p) * 3).backward()
    assert p.grad_as_array().tolist() == [3.0, 3.0]


# ------------------------------------------------------- slices and pow ----

@pytest.mark.parametrize("index", [np.s_[::2], np.s_[1::2], np.s_[-3:], np.s_[:, 1:3], np.s_[::2, 1:3],
                                   np.s_[1:, ::3], np.s_[-1], np.s_[:, -2], np.s_[1, 2]])
@pytest.mark.parametrize("strategy", ["none", "agenda"])
def test_slices_values_and_gradients(index, strategy):
    pc = dy.ParameterCollection()
    a = np.arange(20.0).reshape(4, 5) / 10
    p = pc.add_parameters((4, 5), init=a)
    w = np.random.default_rng(0).uniform(-1, 1, np.shape(a[index]))
    dy.renew_cg(strategy=strategy)
    s = p[index]
    np.testing.assert_allclose(s.npvalue().reshape(np.shape(a[index])), a[index], rtol=1e-6)
    weights = dy.inputTensor(w.reshape(s.dim()[0]) if w.size > 1 else w.reshape(1))
    dy.sum_elems(dy.cmult(s, weights)).backward()
    expect = np.zeros_like(a)
    expect[index] = w
    np.testing.assert_allclose(p.grad_as_array(), expect, rtol=1e-6)


@pytest.mark.parametrize("strategy", ["none", "agenda"])
def test_dropout_of_everything_is_zero(strategy):
    # DyNet gives NaN (0 * 1/0); every element is dropped
    pc = dy.ParameterCollection()
    W = pc.add_parameters((2, 3))
    dy.renew_cg(strategy=strategy)
    loss = dy.sum_elems(dy.dropout(W * dy.inputVector([1, 2, 3]), 1.0))
    assert loss.value() == 0.0
    loss.backward()
    assert not W.grad_as_array().any()


def test_number_to_the_power_of_an_expression():
    dy.renew_cg()
    x = dy.inputVector([0.0, 1.0, 2.0])
    np.testing.assert_allclose((2 ** x).npvalue(), [1.0, 2.0, 4.0])
    np.testing.assert_allclose(dy.pow(3.0, x).npvalue(), [1.0, 3.0, 9.0])


def test_forward_of_a_list_runs_one_pass():
    dy.renew_cg()
    xs = [dy.inputVector([float(k), 1.0]) for k in range(4)]
    ys = [dy.tanh(x) for x in xs]
    dy.forward(ys)
    stats = dy.cg().stats()
    assert stats["forward_calls"] == 1
    np.testing.assert_allclose([y.value() for y in ys], [np.tanh([k, 1.0]) for k in range(4)], rtol=1e-6)
    assert dy.cg().stats()["forward_calls"] == 1       # nothing left to compute
    with pytest.raises(TypeError):
        dy.forward(ys[0])


def test_dynet_static_graph_xor_trains_as_in_dynet():
    """DyNet's xor example, its graph built once: set() inputs, read, backward, update."""
    spec = importlib.util.spec_from_file_location("dynet_xor_static", DATA / "dynet_xor_static.py")
    xor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(xor)
    ours, ref = xor.run(dy), np.load(DATA / "dynet_xor_static.npz")
    for key in ref.files:
        np.testing.assert_allclose(ours[key], ref[key], rtol=1e-5, atol=1e-6, err_msg=key)
    assert ref["losses"][-1] < ref["losses"][0]            # it learns


def test_parameters_expr_is_a_constant_by_default_as_in_dynet():
    """dynet38: Parameters.expr() is expr(update=False), i.e. const_parameter(p): no
    gradient reaches p; expr(update=True) and p itself train p."""
    for use, grad in ((lambda p: p.expr(), 0.0), (lambda p: p.expr(update=True), 2.0),
                      (lambda p: p, 2.0)):
        p = dy.ParameterCollection().add_parameters((2,), init=1.0)
        dy.renew_cg()
        dy.squared_norm(use(p)).backward()
        np.testing.assert_array_equal(p.grad_as_array(), [grad, grad])


def test_npvalues_and_values_compute_a_list_in_one_forward_as_in_dynet():
    """dynet38: npvalues([vec(2), mat(2,2)]) -> [array([1., 2.]), array([[1, 2], [3, 4]])];
    values() gives each one's value() (a list for a vector)."""
    dy.renew_cg()
    a, b = dy.inputVector([1, 2]), dy.inputTensor([[1, 2], [3, 4]])
    x, y = dy.tanh(a), dy.tanh(a * 2)
    nx, ny = dy.npvalues([x, y])
    assert dy.cg().stats()["forward_calls"] == 1               # one pass for both
    np.testing.assert_allclose(nx, np.tanh([1, 2]), rtol=1e-6)
    np.testing.assert_allclose(ny, np.tanh([2, 4]), rtol=1e-6)
    va, vb = dy.values([a, b])
    assert va == [1.0, 2.0] and np.array_equal(vb, [[1, 2], [3, 4]])
    assert dy.zeroes((2, 3), batch_size=2).dim() == ((2, 3), 2)
    assert dy.available_devices() == ["CPU"] and dy.HAVE_CUDA is False
