"""Builders: gradients, batching invariance, numpy references, the RNNState API."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.testing import check_batching_invariance, check_grad

from strategy_names import BATCHING_STRATEGIES

RNNS = [dy.SimpleRNNBuilder, dy.VanillaLSTMBuilder, dy.CoupledLSTMBuilder, dy.GRUBuilder,
        dy.FastLSTMBuilder, dy.CompactVanillaLSTMBuilder]
LENGTHS = (3, 1, 4, 2)


def _inputs(pc, n, dim, seed=0):
    """Input vectors as parameters, so that gradients reach them too."""
    rng = np.random.default_rng(seed)
    xs = [pc.add_parameters(dim) for _ in range(n)]
    for x in xs:
        x.set_value(rng.uniform(-1, 1, dim))
    return xs


def _flat_params(builder):
    return [p for layer in builder.get_parameters() for p in layer]


@pytest.mark.parametrize("cls", RNNS, ids=lambda c: c.__name__)
def test_rnn_builder_gradients(cls):
    pc = dy.ParameterCollection(seed=1)
    rnn = cls(2, 3, 4, pc)
    xs = _inputs(pc, 3, 3)
    build = lambda: rnn.initial_state().transduce([dy.parameter(x) for x in xs])[-1]
    check_grad(build, _flat_params(rnn) + xs, eps=1e-2, rtol=2e-2, atol=2e-3)


def test_lstm_cells_read_by_the_loss(strategy):
    """The loss reads every cell state too. lstm_cell's backward assigns a previous
    cell's gradient when it writes it first and adds to it when the loss's nodes wrote
    it before (the strategies order these two differently)."""
    pc = dy.ParameterCollection(seed=4)
    rnn = dy.VanillaLSTMBuilder(1, 3, 4, pc)
    xs = _inputs(pc, 3, 3)

    def build():
        s, terms = rnn.initial_state(), []
        for x in xs:
            s = s.add_input(dy.parameter(x))
            c = s.s()[0]
            terms += [dy.sum_elems(dy.cmult(c, c)), dy.sum_elems(s.output())]
        return dy.esum(terms)
    check_grad(build, _flat_params(rnn) + xs, eps=1e-2, rtol=2e-2, atol=2e-3, strategy=strategy)


@pytest.mark.parametrize("cls", RNNS, ids=lambda c: c.__name__)
def test_rnn_builder_batching_invariance(cls):
    pc = dy.ParameterCollection(seed=2)
    rnn = cls(2, 3, 4, pc)
    seqs = [_inputs(pc, n, 3, seed=n) for n in LENGTHS]

    def build():
        return [rnn.initial_state().transduce([dy.parameter(x) for x in seq])[-1] for seq in seqs]
    stats = check_batching_invariance(build, _flat_params(rnn) + [x for s in seqs for x in s],
                                      strategies=BATCHING_STRATEGIES)
    assert stats["agenda"]["batches"] < stats["none"]["batches"] / 2


def test_bi_rnn_builder():
    pc = dy.ParameterCollection(seed=3)
    bi = dy.BiRNNBuilder(2, 3, 4, pc, dy.LSTMBuilder)
    seqs = [_inputs(pc, n, 3, seed=n) for n in LENGTHS]
    params = [p for fb in bi.builder_layers for b in fb for p in _flat_params(b)]

    def build():
        return [dy.esum(bi.transduce([dy.parameter(x) for x in seq])) for seq in seqs]
    check_batching_invariance(build, params + [x for s in seqs for x in s], strategies=BATCHING_STRATEGIES)
    check_grad(lambda: build()[0], params + seqs[0], eps=1e-2, rtol=2e-2, atol=2e-3)
    dy.renew_cg()
    outs = bi.transduce([dy.parameter(x) for x in seqs[0]])
    assert len(outs) == LENGTHS[0] and outs[0].dim() == ((4,), 1)


def _lstm_reference(rnn, xs):
    """The vanilla LSTM in float64 numpy with the builder's parameters."""
    h_dim = rnn.hidden_dim
    hs = []
    for layer, ps in enumerate(rnn.get_parameters()):
        Wx, Wh, b = (p.as_array().astype(np.float64) for p in ps)
        h, c, out = np.zeros(h_dim), np.zeros(h_dim), []
        for x in xs:
            z = Wx @ x + Wh @ h + b
            i, f, o = (1 / (1 + np.exp(-v)) for v in (z[:h_dim], z[h_dim:2 * h_dim] + rnn.forget_bias,
                                                        z[2 * h_dim:3 * h_dim]))
            c = f * c + i * np.tanh(z[3 * h_dim:])
            h = o * np.tanh(c)
            out.append(h)
        xs = out
        hs = out
    return hs


def test_fused_lstm_matches_the_written_out_cell():
    pc = dy.ParameterCollection(seed=4)
    rnn = dy.VanillaLSTMBuilder(2, 3, 5, pc)
    for ps in rnn.get_parameters():      # non-zero biases exercise every term
        ps[2].set_value(np.random.default_rng(0).uniform(-0.5, 0.5, 20))
    xs = [np.random.default_rng(k).uniform(-1, 1, 3) for k in range(4)]
    dy.renew_cg()
    got = [h.npvalue() for h in rnn.initial_state().transduce([dy.inputVector(x) for x in xs])]
    for g, want in zip(got, _lstm_reference(rnn, xs)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def _tree_reference(tree, builder, vec):
    H = builder.hidden_dim
    sig = lambda v: 1 / (1 + np.exp(-v))
    if not isinstance(tree, tuple):
        z = builder.W_leaf.as_array() @ vec(tree) + builder.b_leaf.as_array()
        c = sig(z[:H]) * np.tanh(z[2 * H:])
        return sig(z[H:2 * H]) * np.tanh(c), c
    (hl, cl), (hr, cr) = (_tree_reference(t, builder, vec) for t in tree)
    z = builder.U.as_array() @ np.concatenate([hl, hr]) + builder.b.as_array()
    i, fl, fr, o = (sig(z[k * H:(k + 1) * H]) for k in range(4))
    c = i * np.tanh(z[4 * H:]) + fl * cl + fr * cr
    return o * np.tanh(c), c


TREES = [((0, 1), (2, (3, 4))), (5, 6), 7, ((8, 9), 10)]


def test_tree_lstm_matches_reference_and_batches():
    pc = dy.ParameterCollection(seed=5)
    tree = dy.TreeLSTMBuilder(3, 4, pc)
    tree.b.set_value(np.random.default_rng(1).uniform(-0.5, 0.5, 20))
    words = _inputs(pc, 11, 3)
    dy.renew_cg()
    got = tree.expr_for_tree(TREES[0], lambda w: dy.parameter(words[w])).h.npvalue()
    want, _ = _tree_reference(TREES[0], tree, lambda w: words[w].as_array())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    params = tree.get_parameters() + words
    build = lambda: [tree.expr_for_tree(t, lambda w: dy.parameter(words[w])).h for t in TREES]
    stats = check_batching_invariance(build, params, strategies=BATCHING_STRATEGIES)
    # all 11 leaves of the 4 trees run as one batch of fused gate nodes
    assert stats["agenda"]["batch_sizes"]["lstm_gates"].get(11, 0) == 1
    check_grad(lambda: build()[0], params, eps=1e-2, rtol=2e-2, atol=2e-3)


def test_state_api():
    pc = dy.ParameterCollection(seed=6)
    rnn = dy.LSTMBuilder(2, 3, 4, pc)
    dy.renew_cg()
    x = dy.inputVector([0.1, 0.2, 0.3])
    s0 = rnn.initial_state()
    s1 = s0.add_input(x)
    s2 = s1.add_input(x)
    assert s2.prev() is s1 and s1.prev() is s0 and s2.b() is rnn
    assert len(s2.h()) == 2 and len(s2.s()) == 4            # cells then hidden states
    np.testing.assert_array_equal(s2.output().npvalue(), s2.h()[-1].npvalue())
    states = s0.add_inputs([x, x])
    np.testing.assert_array_equal(states[-1].output().npvalue(), s2.output().npvalue())
    # restarting from a saved state gives the same continuation
    s_from = rnn.initial_state(list(s1.s()))
    np.testing.assert_allclose(s_from.add_input(x).output().npvalue(), s2.output().npvalue(), rtol=1e-6)
    zeros = [dy.zeros(4), dy.zeros(4)]
    np.testing.assert_allclose(s1.set_h(zeros).h()[0].npvalue(), 0)
    with pytest.raises(ValueError):
        s1.set_h([dy.zeros(4)])
    with pytest.raises(TypeError):
        s1.add_input([0.1, 0.2, 0.3])


def test_dropout_masks_per_sequence():
    pc = dy.ParameterCollection(seed=7)
    rnn = dy.LSTMBuilder(1, 3, 4, pc)
    xs = lambda: [dy.inputVector([1.0, -1.0, 0.5])] * 3
    dy.renew_cg()
    clean = rnn.initial_state().transduce(xs())[-1].npvalue()
    rnn.set_dropouts(0.5, 0.5)
    dy.renew_cg()
    dropped = rnn.initial_state().transduce(xs())[-1].npvalue()
    assert not np.allclose(clean, dropped)
    rnn.disable_dropout()
    dy.renew_cg()
    np.testing.assert_array_equal(rnn.initial_state().transduce(xs())[-1].npvalue(), clean)
    with pytest.raises(ValueError):
        rnn.set_dropout(1.0)


def test_batched_inputs_run_through_builders():
    pc = dy.ParameterCollection(seed=8)
    rnn = dy.LSTMBuilder(1, 3, 4, pc)
    E = pc.add_lookup_parameters((5, 3))
    dy.renew_cg()
    batched = rnn.initial_state().transduce([E.batch([0, 1]), E.batch([2, 3])])[-1]
    assert batched.dim() == ((4,), 2)
    for k, (a, b) in enumerate([(0, 2), (1, 3)]):
        dy.renew_cg()
        single = rnn.initial_state().transduce([E[a], E[b]])[-1].npvalue()
        dy.renew_cg()
        both = rnn.initial_state().transduce([E.batch([0, 1]), E.batch([2, 3])])[-1].npvalue()
        np.testing.assert_allclose(both[:, k], single, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("cls", RNNS + [dy.TreeLSTMBuilder], ids=lambda c: c.__name__)
def test_builders_save_and_load_to_identical_predictions(cls, tmp_path):
    pc = dy.ParameterCollection(seed=9)
    b = cls(3, 4, pc) if cls is dy.TreeLSTMBuilder else cls(2, 3, 4, pc)

    def predict(builder):
        dy.renew_cg()
        xs = [dy.inputVector([0.3, -0.2, 0.1]), dy.inputVector([0.5, 0.4, -0.6])]
        if isinstance(builder, dy.TreeLSTMBuilder):
            return builder.compose(builder.leaf(xs[0]), builder.leaf(xs[1])).h.npvalue()
        return builder.initial_state().transduce(xs)[-1].npvalue()
    dy.save(str(tmp_path / "m"), [b])
    (loaded,) = dy.load(str(tmp_path / "m"), dy.ParameterCollection())
    assert type(loaded) is cls
    np.testing.assert_array_equal(predict(loaded), predict(b))
