"""DyNet's builder API beyond stepping: _RNNBuilder, set_dropout_masks, set_s with
cells only, StackedRNNState, weight noise, DyNet's parameter names (and the old ones
of our earlier files), batch-1 states fed batches."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.io.legacy_names import migrate
from autobatch.testing import check_batching_invariance, check_grad

LSTMS = [dy.VanillaLSTMBuilder, dy.CoupledLSTMBuilder, dy.FastLSTMBuilder, dy.CompactVanillaLSTMBuilder]


def test_builders_are_rnn_builders_with_dynets_names():
    pc = dy.ParameterCollection()
    for cls, coll, per_layer in ((dy.SimpleRNNBuilder, "simple-rnn-builder", 3),
                                 (dy.VanillaLSTMBuilder, "vanilla-lstm-builder", 3),
                                 (dy.CoupledLSTMBuilder, "lstm-builder", 11),
                                 (dy.GRUBuilder, "gru-builder", 9),
                                 (dy.FastLSTMBuilder, "fast-lstm-builder", 11),
                                 (dy.CompactVanillaLSTMBuilder, "compact-vanilla-lstm-builder", 3)):
        b = cls(2, 3, 4, pc)
        assert isinstance(b, dy._RNNBuilder)
        assert b.param_collection().name() == f"/{coll}/"
        assert [p.name() for p in b.param_collection().parameters_list()] == \
            [f"/{coll}/_{i}" for i in range(2 * per_layer)]
    bi = dy.BiRNNBuilder(2, 3, 4, pc, dy.VanillaLSTMBuilder)
    assert [p.name() for p in bi.param_collection().parameters_list()][::3] == [
        "/birnn/vanilla-lstm-builder/_0", "/birnn/vanilla-lstm-builder_1/_0",
        "/birnn/vanilla-lstm-builder_2/_0", "/birnn/vanilla-lstm-builder_3/_0"]   # as dynet38


def test_old_names_migrate_to_dynets():
    assert migrate("/vanilla-lstm-builder/p_bias1") == "/vanilla-lstm-builder/_5"
    assert migrate("/enc/coupled-lstm-builder_2/c2o0") == "/enc/lstm-builder_2/_6"
    assert migrate("/bi-rnn-builder_1/gru-builder_1/h2h0") == "/birnn_1/gru-builder_1/_7"
    assert migrate("/simple-rnn-builder/x2h1") == "/simple-rnn-builder/_3"
    for unchanged in ("/W", "/enc/b", "/vanilla-lstm-builder/_0", "/gru-builder/foo1", "/x2h0"):
        assert migrate(unchanged) == unchanged


@pytest.mark.parametrize("cls", LSTMS, ids=lambda c: c.__name__)
def test_set_s_with_cells_only_keeps_the_hidden_states(cls):
    pc = dy.ParameterCollection(seed=1)
    b = cls(2, 3, 4, pc)
    dy.renew_cg()
    s = b.initial_state().add_input(dy.inputVector([1, 2, 3]))
    cells = [dy.inputVector([0.1, 0.2, 0.3, 0.4]), dy.inputVector([0.5, 0.6, 0.7, 0.8])]
    t = s.set_s(cells)
    for got, want in zip(t.s(), cells + list(s.h())):
        np.testing.assert_array_equal(got.npvalue(), want.npvalue())
    t0 = b.initial_state().set_s(cells)          # an initial state: zero hidden states
    assert not t0.h()[0].npvalue().any()
    with pytest.raises(ValueError):
        s.set_s(cells[:1])


@pytest.mark.parametrize("cls", LSTMS + [dy.SimpleRNNBuilder, dy.GRUBuilder], ids=lambda c: c.__name__)
def test_batch_one_state_broadcasts_over_a_batched_input(cls):
    pc = dy.ParameterCollection(seed=2)
    b = cls(1, 2, 3, pc)
    dy.renew_cg()
    s = b.initial_state().add_input(dy.inputVector([0.5, -0.5]))
    xb = dy.inputTensor(np.array([[1., 2.], [3., 4.]]), batched=True)
    out = s.add_input(xb).output()
    assert out.dim() == ((3,), 2)
    for k in range(2):
        single = s.add_input(dy.inputVector(xb.npvalue()[:, k])).output().npvalue()
        np.testing.assert_allclose(out.npvalue()[:, k], single, rtol=1e-6, atol=1e-7)


def test_set_dropout_masks_per_batch_element():
    pc = dy.ParameterCollection(seed=3)
    b = dy.VanillaLSTMBuilder(1, 4, 5, pc)
    b.set_dropouts(0.5, 0.5)
    dy.renew_cg()
    x = dy.inputTensor(np.ones((4, 3)), batched=True)
    shared = b.initial_state().add_input(x).output().npvalue()    # one mask for the batch
    assert np.allclose(shared, shared[:, :1])
    s = b.initial_state()
    b.set_dropout_masks(3)
    per = s.add_input(x).output().npvalue()
    assert not np.allclose(per, per[:, :1])
    with pytest.raises(ValueError):
        b.set_dropout_masks(0)
    b.disable_dropout()
    dy.renew_cg()
    x = dy.inputTensor(np.ones((4, 3)), batched=True)
    clean = b.initial_state().add_input(x).output().npvalue()
    assert np.allclose(clean, clean[:, :1])


def test_compact_lstm_dropout_and_weight_noise():
    pc = dy.ParameterCollection(seed=4)
    b = dy.CompactVanillaLSTMBuilder(1, 3, 4, pc)
    xs = lambda: [dy.inputVector([0.1, 0.2, 0.3]), dy.inputVector([0.3, -0.1, 0.2])]
    dy.renew_cg()
    clean = b.initial_state().transduce(xs())[-1].npvalue()
    b.set_weightnoise(0.5)
    dy.renew_cg()
    assert not np.allclose(b.initial_state().transduce(xs())[-1].npvalue(), clean)
    b.set_weightnoise(0)
    b.set_dropouts(0.3, 0.3)
    dy.renew_cg()
    assert not np.allclose(b.initial_state().transduce(xs())[-1].npvalue(), clean)
    with pytest.raises(ValueError):
        b.set_weightnoise(-1)
    b.disable_dropout()
    dy.renew_cg()
    np.testing.assert_array_equal(b.initial_state().transduce(xs())[-1].npvalue(), clean)


def test_stacked_rnn_state():
    pc = dy.ParameterCollection(seed=5)
    lower, upper = dy.SimpleRNNBuilder(1, 3, 4, pc), dy.VanillaLSTMBuilder(1, 4, 2, pc)
    dy.renew_cg()
    xs = [dy.inputVector([0.1, 0.2, 0.3]), dy.inputVector([0.4, 0.5, 0.6])]
    stacked = dy.StackedRNNState([lower.initial_state(), upper.initial_state()])
    states = stacked.add_inputs(xs)
    by_hand = upper.initial_state().transduce(lower.initial_state().transduce(xs))
    for s, want in zip(states, by_hand):
        np.testing.assert_array_equal(s.output().npvalue(), want.npvalue())
    assert states[1].prev() is states[0] and len(states[1].h()) == 2 and len(states[1].s()) == 2
    with pytest.raises(ValueError):
        dy.StackedRNNState([])


def test_softmax_builders_batch_and_train():
    pc = dy.ParameterCollection(seed=6)
    sm = dy.StandardSoftmaxBuilder(3, 5, pc)
    assert isinstance(sm, dy.SoftmaxBuilder)
    xs = [pc.add_parameters(3) for _ in range(4)]
    build = lambda: [sm.neg_log_softmax(dy.parameter(x), i) for i, x in enumerate(xs)]
    check_batching_invariance(build, pc.parameters_list())
    check_grad(lambda: dy.esum(build()), pc.parameters_list(), eps=1e-2, rtol=2e-2, atol=2e-3)
    with pytest.raises(ValueError):
        sm.neg_log_softmax_batch(dy.inputVector([1, 2, 3]), [0, 1])


def test_sparse_lstm_gradients_batching_and_save(tmp_path):
    pc = dy.ParameterCollection(seed=7)
    b = dy.SparseLSTMBuilder(2, 3, 4, pc)
    b.set_sparsity(0.3)
    trained = [p for layer in b.get_parameters() for p in layer[:3]]    # not the masks
    xs = [pc.add_parameters(3) for _ in range(3)]
    check_grad(lambda: b.initial_state().transduce([dy.parameter(x) for x in xs])[-1],
               trained + xs, eps=1e-2, rtol=2e-2, atol=2e-3)
    seqs = [xs[:n] for n in (3, 1, 2)]
    check_batching_invariance(
        lambda: [b.initial_state().transduce([dy.parameter(x) for x in s])[-1] for s in seqs],
        trained + xs)
    dy.save(str(tmp_path / "m"), [b])
    (loaded,) = dy.load(str(tmp_path / "m"), dy.ParameterCollection())
    assert type(loaded) is dy.SparseLSTMBuilder
    dy.renew_cg()
    x = [dy.inputVector([0.3, -0.2, 0.1])]
    np.testing.assert_array_equal(loaded.initial_state().transduce(x)[-1].npvalue(),
                                  b.initial_state().transduce(x)[-1].npvalue())


def test_whoami():
    pc = dy.ParameterCollection()
    assert dy.SimpleRNNBuilder(1, 2, 3, pc).whoami() == "SimpleRNNBuilder"
    assert dy.VanillaLSTMBuilder(1, 2, 3, pc).whoami() == "VanillaLSTMBuilder"


def test_layer_normalised_lstm_gradients_batching_and_save(tmp_path):
    pc = dy.ParameterCollection(seed=8)
    b = dy.VanillaLSTMBuilder(2, 3, 4, pc, ln_lstm=True)
    params = b.param_collection().parameters_list()
    assert len(params) == 18 and params[3].name() == "/vanilla-lstm-builder/ln_gh"
    xs = [pc.add_parameters(3) for _ in range(3)]
    check_grad(lambda: b.initial_state().transduce([dy.parameter(x) for x in xs])[-1],
               params + xs, eps=1e-2, rtol=3e-2, atol=3e-3)
    seqs = [xs[:n] for n in (3, 1, 2)]
    check_batching_invariance(
        lambda: [b.initial_state().transduce([dy.parameter(x) for x in s])[-1] for s in seqs],
        params + xs)
    for p in params[3:9]:
        p.set_value(np.random.default_rng(1).uniform(0.5, 1.5, p.shape()))
    dy.save(str(tmp_path / "m"), [b])
    (loaded,) = dy.load(str(tmp_path / "m"), dy.ParameterCollection())
    assert loaded.ln_lstm
    dy.renew_cg()
    x = [dy.inputVector([0.3, -0.2, 0.1])]
    np.testing.assert_array_equal(loaded.initial_state().transduce(x)[-1].npvalue(),
                                  b.initial_state().transduce(x)[-1].npvalue())
    with pytest.raises(NotImplementedError):
        dy.SparseLSTMBuilder(1, 2, 3, pc, ln_lstm=True)
