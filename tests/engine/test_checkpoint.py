"""cg_checkpoint / cg_revert and DyNet's graph calls (forward_scalar, forward_vec,
inc_forward, renew, print_text_graphviz).

Revert drops the nodes made after the checkpoint; their expressions must raise, never
read the node later made at the same index; the nodes kept keep their values (or get
the same ones again when a batch held a dropped node) and train as in a graph that
never had the dropped part."""
import io

import numpy as np
import pytest

import autobatch as dy

from python_strategies import PYTHON_STRATEGIES
from strategy_names import BUILTIN_STRATEGIES

# every strategy: the built-in ones and the two Python ones of the batching tests (this
# list used to be sorted(dy.available_strategies()), whose Python entries depended on
# which test modules had been imported before this one)
STRATEGIES = BUILTIN_STRATEGIES + PYTHON_STRATEGIES


@pytest.fixture
def pc():
    return dy.ParameterCollection(seed=0)


def _model(pc):
    W = pc.add_parameters((3, 3), name="W")
    b = pc.add_parameters(3, name="b")
    E = pc.add_lookup_parameters((5, 3), name="E")
    return W, b, E


def _chain(W, b, E, words):
    h = dy.zeros(3)
    for w in words:
        h = dy.tanh(W * (h + E[w]) + b)
    return h


def _grads(params):
    return [p.grad_as_array() for p in params]


def test_revert_drops_nodes_and_their_expressions_raise(pc):
    W, b, E = _model(pc)
    dy.renew_cg()
    h = _chain(W, b, E, [1, 2])
    kept = h.npvalue()
    n = dy.cg().num_nodes
    dy.cg_checkpoint()
    dropped = dy.tanh(W * h) + 1
    dropped.value()
    dy.cg_revert()
    assert dy.cg().num_nodes == n
    assert dropped.is_stale() and not h.is_stale()
    with pytest.raises(dy.StaleExpressionError):
        dropped.value()
    # a new node takes the dropped one's index: the old handle still refuses to read it
    again = [dy.inputVector([5.0, 6.0, 7.0]) for _ in range(4)]
    assert any(e.vindex == dropped.vindex for e in again)
    with pytest.raises(dy.StaleExpressionError):
        dropped.npvalue()
    with pytest.raises(dy.StaleExpressionError):
        dy.tanh(dropped)
    np.testing.assert_array_equal(h.npvalue(), kept)
    assert "stale" in repr(dropped)


def test_revert_without_checkpoint_does_nothing_and_checkpoints_nest(pc):
    W, b, E = _model(pc)
    dy.renew_cg()
    dy.cg_revert()
    x = dy.inputVector([1.0, 2.0, 3.0])
    dy.cg_checkpoint()
    y = W * x
    dy.cg_checkpoint()
    z = y + b
    dy.cg_revert()
    assert z.is_stale() and not y.is_stale()
    dy.cg_revert()
    assert y.is_stale() and not x.is_stale()
    dy.cg_revert()              # the stack is empty again
    assert x.value() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_kept_values_and_gradients_match_a_graph_without_the_dropped_part(pc, strategy):
    W, b, E = _model(pc)
    params = [W, b, E]

    def kept_part():
        return [_chain(W, b, E, ws) for ws in ([0, 1, 2], [3, 4], [2])]

    dy.renew_cg(strategy="none")
    ref_outs = kept_part()
    ref_loss = dy.esum([dy.sum_elems(o) for o in ref_outs])
    ref_values = [o.npvalue() for o in ref_outs]
    ref_signatures = dy.cg().signature_nodes()
    pc.reset_gradient()
    ref_loss.backward()
    ref_grads = _grads(params)

    dy.renew_cg(strategy=strategy)
    outs = kept_part()
    outs[0].value()                      # part of the kept graph computed before
    dy.cg_checkpoint()
    # same signatures as kept nodes not computed yet: batched strategies put kept and
    # dropped nodes in one batch
    extra = [_chain(W, b, E, ws) for ws in ([4, 4, 4], [1, 0])]
    dy.esum([dy.sum_elems(e) for e in extra + outs]).value()
    dy.cg_revert()
    loss = dy.esum([dy.sum_elems(o) for o in outs])
    for o, ref in zip(outs, ref_values):
        np.testing.assert_allclose(o.npvalue(), ref, rtol=1e-6)
    pc.reset_gradient()
    loss.backward()
    for g, ref in zip(_grads(params), ref_grads):
        np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-7)
    # built in the same order, so the same signature ids: as if never dropped
    assert dy.cg().signature_nodes() == ref_signatures


def test_signature_counts_forget_the_dropped_nodes(pc):
    W, b, E = _model(pc)
    dy.renew_cg()
    _chain(W, b, E, [1, 2])
    before = dy.cg().signature_nodes()
    dy.cg_checkpoint()
    _chain(W, b, E, [3, 4, 0])
    dy.conv2d(dy.inputTensor(np.ones((4, 4, 1))), dy.inputTensor(np.ones((2, 2, 1, 1))), [1, 1])
    dy.cg_revert()
    assert dy.cg().signature_nodes() == before


def test_dropout_values_survive_a_revert_that_recomputes_them(pc):
    W, b, E = _model(pc)
    dy.renew_cg(strategy="agenda")
    kept = [dy.dropout(W * E[i], 0.5) for i in range(3)]
    dy.cg_checkpoint()
    dropped = [dy.dropout(W * E[i], 0.5) for i in range(3, 5)]
    dy.esum([dy.sum_elems(e) for e in kept + dropped]).value()
    first = [k.npvalue() for k in kept]
    dy.cg_revert()
    for k, v in zip(kept, first):      # the same mask; a batch of other size may round apart
        np.testing.assert_array_equal(k.npvalue() == 0, v == 0)
        np.testing.assert_allclose(k.npvalue(), v, rtol=1e-6)


def test_a_recalculation_between_checkpoint_and_revert(pc):
    W, b, E = _model(pc)
    dy.renew_cg()
    h = _chain(W, b, E, [1, 2])
    dy.cg_checkpoint()
    d = dy.tanh(h) * 3
    d.value()
    expected = h.npvalue()
    h.value(recalculate=True)
    d.value()
    dy.cg_revert()
    np.testing.assert_allclose(h.npvalue(), expected)
    np.testing.assert_allclose((h * 2).npvalue(), 2 * expected, rtol=1e-6)


def test_memory_does_not_grow_in_a_checkpoint_revert_loop(pc):
    W, b, E = _model(pc)
    dy.renew_cg()
    h = _chain(W, b, E, [1, 2, 3])
    h.value()
    n = dy.cg().num_nodes
    arena = []
    for step in range(300):
        dy.cg_checkpoint()
        cand = [dy.sum_elems(dy.tanh(W * h + E[w])) for w in range(5)]
        scores = [c.value() for c in cand]
        x = dy.inputTensor(np.full(50, float(step)))
        assert x.npvalue()[0] == step
        dy.cg_revert()
        arena.append(dy.cg().stats()["arena_bytes"])
        assert dy.cg().num_nodes == n and len(scores) == 5
    assert max(arena[10:]) <= arena[10]


def test_parameters_and_builders_after_a_revert(pc):
    W, b, E = _model(pc)
    lstm = dy.VanillaLSTMBuilder(1, 3, 4, pc)
    dy.renew_cg()
    x = E[1]
    dy.cg_checkpoint()
    s = lstm.initial_state().add_input(x)     # parameter nodes made after the checkpoint
    (W * x).value()
    dy.cg_revert()
    out = lstm.initial_state().add_input(x).output()
    y = W * x + b
    dy.renew_cg()
    fresh = lstm.initial_state().add_input(E[1]).output().npvalue()
    del s
    with pytest.raises(dy.StaleExpressionError):
        out.value()
    assert y.is_stale()
    dy.renew_cg()
    x = E[1]
    dy.cg_checkpoint()
    lstm.initial_state().add_input(x)
    dy.cg_revert()
    np.testing.assert_allclose(lstm.initial_state().add_input(x).output().npvalue(), fresh, rtol=1e-6)


class _Reverting(dy.Strategy):
    """Tries to revert the graph from inside a forward pass."""
    name = "reverting-test"

    def select(self, frontier):
        dy.cg_revert()
        return frontier.signatures()[0]


def test_revert_is_refused_while_the_graph_computes():
    dy.renew_cg(strategy=_Reverting())
    x = dy.inputVector([1.0])
    dy.cg_checkpoint()
    y = dy.tanh(x * 2)
    with pytest.raises(RuntimeError, match="middle of a forward"):
        y.value()
    dy.renew_cg()


# ------------------------------------------------------- DyNet's graph calls ----

def test_forward_scalar_vec_and_incremental(pc):
    W, b, E = _model(pc)
    dy.renew_cg()
    g = dy.cg()
    m = dy.inputTensor([[1.0, 2.0], [3.0, 4.0]])
    s = dy.sum_elems(m)
    assert g.forward_scalar(s.vindex) == 10.0 and g.inc_forward_scalar(s) == 10.0
    assert g.forward_vec(m.vindex) == [1.0, 3.0, 2.0, 4.0]       # column-major, as DyNet
    assert g.inc_forward_vec(m) == [1.0, 3.0, 2.0, 4.0]
    h = W * E[1]
    assert g.inc_forward(h) is None and g.inc_forward(h.vindex) is None
    before = h.npvalue()
    W.set_value(W.as_array() * 2)
    np.testing.assert_array_equal(g.inc_forward_vec(h), before.ravel())    # kept
    np.testing.assert_allclose(g.forward_vec(h.vindex), 2 * before.ravel(), rtol=1e-6)  # again
    with pytest.raises(ValueError):
        g.forward_scalar(m.vindex)
    with pytest.raises(IndexError):
        g.forward_vec(10 ** 6)
    with pytest.raises(IndexError):
        g.inc_forward(-1)
    with pytest.raises(TypeError):
        g.forward_vec("0")
    loss = dy.sum_elems(h)
    g.forward(loss.vindex)
    g.backward(loss.vindex)             # DyNet's VariableIndex form
    assert W.grad_as_array().any()


def test_renew_method_and_checkpoint_methods():
    g = dy.renew_cg()
    x = dy.inputVector([1.0])
    assert g.renew() is dy.cg() and x.is_stale()
    y = dy.inputVector([2.0])
    g.checkpoint()
    z = y * 3
    g.revert()
    assert z.is_stale() and y.value() == 2.0
    v = dy.cg_version()
    g.renew(autobatching=False)
    assert dy.cg().strategy.name == "none" and dy.cg_version() != v


def test_print_text_graphviz(pc, capsys):
    W, b, E = _model(pc)
    dy.renew_cg()
    dy.tanh(W * E[2] + b)
    dy.print_text_graphviz()
    err = capsys.readouterr().err
    assert err.startswith("digraph G {") and err.rstrip().endswith("}")
    assert 'N4 [label="v4 = add(v2, v3) (3,)"];' in err and "N2 -> N4;" in err
    out = io.StringIO()
    dy.print_text_graphviz(out)
    assert out.getvalue() == err
    with pytest.raises(TypeError):
        dy.print_text_graphviz(3)
