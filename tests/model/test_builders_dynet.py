"""Builders against DyNet: with the same parameter values, outputs equal dynet38's
(tests/data/builders_dynet.json, written by tests/data/make_builders_fixture.py), and
parameters carry DyNet's names (so key-based loading works both ways)."""
import json
import pathlib

import numpy as np
import pytest

import autobatch as dy

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
FIX = json.loads((DATA / "builders_dynet.json").read_text())
INP = FIX["inputs"]
RNNS = ["SimpleRNNBuilder", "VanillaLSTMBuilder", "CoupledLSTMBuilder", "GRUBuilder",
        "FastLSTMBuilder", "CompactVanillaLSTMBuilder"]


def close(got, want):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(want), rtol=1e-5, atol=1e-6)


def load_params(pc, rec):
    assert [p.name() for p in pc.parameters_list()] == rec["names"]
    for p in pc.parameters_list():
        p.set_value(np.array(rec["params"][p.name()]))


@pytest.mark.parametrize("name", RNNS)
@pytest.mark.parametrize("strategy", ["none", "agenda"])
def test_rnn_builder_matches_dynet(name, strategy):
    rec = FIX[name]
    pc = dy.ParameterCollection()
    b = getattr(dy, name)(2, 3, 4, pc)
    load_params(pc, rec)
    dy.renew_cg(strategy=strategy)
    states = b.initial_state().add_inputs([dy.inputVector(x) for x in INP["xs"]])
    for s, want in zip(states, rec["outputs"]):
        close(s.output().npvalue(), want)
    for e, want in zip(states[-1].s(), rec["s"]):
        close(e.npvalue(), want)
    if "set_s_cells" in rec:
        st = states[-1].set_s([dy.inputVector(c) for c in INP["cells"]])
        for e, want in zip(st.s(), rec["set_s_cells"]["s"]):
            close(e.npvalue(), want)
        close(st.add_input(dy.inputVector(INP["xs"][0])).output().npvalue(), rec["set_s_cells"]["out"])
    xb = dy.inputTensor(INP["xb"], batched=True)
    close(b.initial_state().add_input(xb).output().npvalue(), rec["batched_initial"])
    if rec["batched_after_1"] is not None:      # DyNet broadcasts a state of batch 1
        s0 = b.initial_state().add_input(dy.inputVector(INP["xs"][0]))
        close(s0.add_input(xb).output().npvalue(), rec["batched_after_1"])


def test_standard_softmax_builder_matches_dynet():
    rec = FIX["StandardSoftmaxBuilder"]
    pc = dy.ParameterCollection()
    sm = dy.StandardSoftmaxBuilder(3, 5, pc)
    load_params(pc, rec)
    dy.renew_cg()
    x = dy.inputVector(INP["rep"])
    close(sm.full_logits(x).npvalue(), rec["full_logits"])
    close(sm.full_log_distribution(x).npvalue(), rec["full_log_distribution"])
    close(sm.neg_log_softmax(x, 3).value(), rec["neg_log_softmax"])
    close(sm.neg_log_softmax_batch(dy.inputTensor(INP["xb"], batched=True), [1, 4]).npvalue(),
          rec["neg_log_softmax_batch"])
    assert sm.param_collection().name() == "/standard-softmax-builder/"
    assert 0 <= sm.sample(x) < 5


def test_class_factored_softmax_builder_matches_dynet():
    rec = FIX["ClassFactoredSoftmaxBuilder"]
    pc = dy.ParameterCollection()
    words = rec["words"]
    cf = dy.ClassFactoredSoftmaxBuilder(3, str(DATA / "clusters_dynet.txt"), words, pc)
    load_params(pc, rec)
    dy.renew_cg()
    x = dy.inputVector(INP["rep"])
    for what in ("full_logits", "full_log_distribution", "class_logits", "class_log_distribution"):
        close(getattr(cf, what)(x).npvalue(), rec[what])
    close(cf.subclass_logits(x, 1).npvalue(), rec["subclass_logits"])
    close(cf.subclass_log_distribution(x, 0).npvalue(), rec["subclass_log_distribution"])
    for w, want in rec["neg_log_softmax"].items():
        close(cf.neg_log_softmax(x, words[w]).value(), want)
    close(cf.neg_log_softmax_batch(dy.inputTensor(INP["xb"], batched=True), [1, 4]).npvalue(),
          rec["neg_log_softmax_batch"])
    assert cf.sample(x) in {i for w, i in words.items() if w != "unused"}
    with pytest.raises(ValueError, match="no class"):
        cf.neg_log_softmax(x, words["unused"])
    with pytest.raises(ValueError):
        cf.subclass_logits(x, 2)          # a class of one word has no word-level parameters


def test_cluster_file_errors(tmp_path):
    bad = tmp_path / "c.txt"
    bad.write_text("c0 the\nc1\n")
    with pytest.raises(ValueError, match="class word"):
        dy.ClassFactoredSoftmaxBuilder(3, str(bad), {"the": 0}, dy.ParameterCollection())
    bad.write_text("c0 the\n")
    with pytest.raises(ValueError, match="not in word_dict"):
        dy.ClassFactoredSoftmaxBuilder(3, str(bad), {}, dy.ParameterCollection())
    with pytest.raises(ValueError, match="not an int"):
        dy.ClassFactoredSoftmaxBuilder(3, str(bad), {"the": -1}, dy.ParameterCollection())


def test_sparse_lstm_builder_matches_dynet():
    rec = FIX["SparseLSTMBuilder"]
    pc = dy.ParameterCollection()
    b = dy.SparseLSTMBuilder(2, 3, 4, pc)
    load_params(pc, rec)
    b.set_sparsity(0.25)
    for p in pc.parameters_list():
        np.testing.assert_array_equal(p.as_array(), np.array(rec["masks"][p.name()], dtype=np.float32))
    dy.renew_cg()
    outs = b.initial_state().transduce([dy.inputVector(x) for x in INP["xs"]])
    for got, want in zip(outs, rec["outputs"]):
        close(got.npvalue(), want)
    masks = [layer[3] for layer in b.get_parameters()]
    before = [m.as_array() for m in masks]
    dy.sum_elems(dy.esum(outs)).backward()
    dy.SimpleSGDTrainer(pc, 0.5).update()
    for m, v in zip(masks, before):                   # constants: no gradient, no change
        np.testing.assert_array_equal(m.as_array(), v)
    with pytest.raises(ValueError):
        b.set_sparsity(1.5)


def test_layer_normalised_lstm_matches_dynet():
    rec = FIX["VanillaLSTMBuilder_ln"]
    pc = dy.ParameterCollection()
    b = dy.VanillaLSTMBuilder(2, 3, 4, pc, ln_lstm=True)
    # the same creation order as DyNet's (whose layer-norm parameters are in the parent)
    for p, name in zip(pc.parameters_list(), rec["names"], strict=True):
        p.set_value(np.array(rec["params"][name]))
    dy.renew_cg()
    outs = b.initial_state().transduce([dy.inputVector(x) for x in INP["xs"]])
    for got, want in zip(outs, rec["outputs"]):
        close(got.npvalue(), want)
    close(b.initial_state().add_input(dy.inputTensor(INP["xb"], batched=True)).output().npvalue(),
          rec["batched_initial"])
    assert [len(layer) for layer in b.get_parameters()] == [3, 3]
