"""VanillaLSTMBuilder's compiled transduce (model/builders.py `_transduce`, `_vanilla_lstm_run`
in api/ops_lstm.pxi): the nodes of the step-by-step path in the same order, so the
same values and gradients bit for bit; every case it does not cover (batched inputs,
dropout, layer norm, SparseLSTMBuilder, wrong sizes) takes the step-by-step path."""
import numpy as np
import pytest

import autobatch as dy

# deliberately a subset of the built-in strategies (not the shared `strategy` fixture of
# tests/conftest.py): the compiled path must reproduce the step-by-
# step nodes bit for bit; the reference and two batching schedules check it
STRATEGIES = ("none", "agenda", "depth")


def _model(layers, seed=0, cls=dy.VanillaLSTMBuilder, **kw):
    pc = dy.ParameterCollection(seed=seed)
    rnn = cls(layers, 4, 3, pc, **kw)
    rng = np.random.default_rng(seed)
    xs = [pc.add_parameters(4) for _ in range(5)]
    for p in pc.parameters_list():
        p.set_value(rng.uniform(-0.9, 0.9, p.shape()))
    return pc, rnn, xs


def _run(pc, rnn, xs, strategy, compiled, vecs=False, inputs=None):
    """Loss and gradients of three sequences run with transduce (compiled) or
    add_inputs (the step-by-step path)."""
    pc.reset_gradient()
    dy.renew_cg(strategy=strategy)
    outs = []
    for k in range(3):
        seq = inputs() if inputs else [dy.parameter(x) * (1.0 + 0.5 * k) for x in xs[k:]]
        state = rnn.initial_state()
        if vecs:
            state = rnn.initial_state([dy.tanh(dy.parameter(xs[j]))[0:3] for j in range(2 * rnn.layers)])
        hs = state.transduce(seq) if compiled else [s.output() for s in state.add_inputs(seq)]
        outs += hs
    loss = dy.esum([dy.sum_elems(dy.square(h)) for h in outs])
    value = loss.value()
    loss.backward()
    return value, dy.cg().stats()["nodes"], [p.grad_as_array().copy() for p in pc.parameters_list()]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("vecs", [False, True])
def test_compiled_transduce_equals_the_step_by_step_path(strategy, layers, vecs):
    pc, rnn, xs = _model(layers, seed=layers)
    rnn.forget_bias = 0.5
    fast = _run(pc, rnn, xs, strategy, True, vecs)
    slow = _run(pc, rnn, xs, strategy, False, vecs)
    assert fast[0] == slow[0] and fast[1] == slow[1]
    for a, b in zip(fast[2], slow[2]):
        np.testing.assert_array_equal(a, b)


def test_compiled_transduce_takes_a_generator_and_an_empty_sequence():
    pc, rnn, xs = _model(1)
    dy.renew_cg()
    hs = rnn.initial_state().transduce(dy.parameter(x) for x in xs)
    assert len(hs) == len(xs)
    assert rnn.initial_state().transduce([]) == []


@pytest.mark.parametrize("case", ["batched", "dropout", "ln_lstm", "sparse", "subclass_cell"])
def test_cases_the_compiled_path_leaves_to_the_step_by_step_one(case):
    cls = dy.SparseLSTMBuilder if case == "sparse" else dy.VanillaLSTMBuilder
    pc, rnn, xs = _model(1, cls=cls, ln_lstm=(case == "ln_lstm"))
    inputs = None
    if case == "batched":
        E = pc.add_lookup_parameters((6, 4))
        inputs = lambda: [E.batch([0, 1]), E.batch([2, 3]), E.batch([4, 5])]
    if case == "dropout":
        rnn.set_dropouts(0.3, 0.2)
        dy.set_random_seed(7)
    if case == "subclass_cell":
        class Mine(dy.VanillaLSTMBuilder):
            def _cell(self, p, x, h, c):
                return super()._cell(p, x, h, c)
        pc, rnn, xs = _model(1, cls=Mine)
    if case != "dropout":
        fast = _run(pc, rnn, xs, "agenda", True, inputs=inputs)
        slow = _run(pc, rnn, xs, "agenda", False, inputs=inputs)
        assert fast[0] == slow[0] and fast[1] == slow[1]
    dy.renew_cg()
    seq = inputs() if inputs else [dy.parameter(x) for x in xs]
    assert rnn._transduce(rnn.initial_state(), seq) is None


def test_compiled_transduce_reports_errors_as_the_step_by_step_path():
    pc, rnn, xs = _model(1)
    dy.renew_cg()
    bad = [dy.parameter(xs[0]), dy.inputVector([1.0, 2.0])]          # 2 rows, not 4
    with pytest.raises(dy.DimensionError) as fast:
        rnn.initial_state().transduce(bad)
    with pytest.raises(dy.DimensionError) as slow:
        rnn.initial_state().add_inputs(bad)
    assert str(fast.value) == str(slow.value)
    with pytest.raises(TypeError):
        rnn.initial_state().transduce([dy.parameter(xs[0]), 3.0])
    stale = dy.parameter(xs[0]) + 1
    dy.renew_cg()
    with pytest.raises(dy.StaleExpressionError):
        rnn.initial_state().transduce([stale])
