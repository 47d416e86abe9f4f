"""DyNet's own Python tests of builders and softmax builders (clab/dynet
tests/python/test.py: TestSimpleRNN, TestGRU, TestVanillaLSTM, TestCoupledLSTM,
TestFastLSTM, TestStandardSoftmax, TestClassFactoredSoftmax), run with
`import autobatch as dy`."""
import numpy as np
import pytest

import autobatch as dy

BUILDERS = [dy.SimpleRNNBuilder, dy.GRUBuilder, dy.VanillaLSTMBuilder, dy.CoupledLSTMBuilder,
            dy.FastLSTMBuilder, dy.CompactVanillaLSTMBuilder, dy.SparseLSTMBuilder]
LSTMS = [dy.VanillaLSTMBuilder, dy.CoupledLSTMBuilder, dy.FastLSTMBuilder]


@pytest.mark.parametrize("cls", BUILDERS, ids=lambda c: c.__name__)
def test_get_parameters(cls):
    rnn = cls(2, 10, 10, dy.ParameterCollection())
    dy.renew_cg()
    rnn.initial_state()
    for l_p, l_e in zip(rnn.get_parameters(), rnn.get_parameter_expressions()):
        for w_p, w_e in zip(l_p, l_e):
            np.testing.assert_allclose(w_e.npvalue(), w_p.as_array(), rtol=1e-6)


@pytest.mark.parametrize("cls", BUILDERS, ids=lambda c: c.__name__)
def test_get_parameters_sanity(cls):
    rnn = cls(2, 10, 10, dy.ParameterCollection())
    dy.renew_cg()
    with pytest.raises(ValueError):
        rnn.get_parameter_expressions()


@pytest.mark.parametrize("cls", LSTMS, ids=lambda c: c.__name__)
def test_initial_state_set_h_set_c_set_s(cls):
    rnn = cls(2, 10, 10, dy.ParameterCollection())
    dy.renew_cg()
    rnn.initial_state([dy.ones(10), dy.ones(10), dy.ones(10), dy.ones(10)])
    rnn.initial_state().set_h([dy.ones(10), dy.ones(10)])
    rnn.initial_state().set_s([dy.ones(10), dy.ones(10)])
    s = rnn.initial_state().set_s([dy.ones(10), dy.ones(10), dy.ones(10), dy.ones(10)])
    assert s.add_input(dy.ones(10)).output().dim() == ((10,), 1)


def test_standard_softmax_sanity():
    sm = dy.StandardSoftmaxBuilder(3, 10, dy.ParameterCollection(), True)
    for _ in range(3):
        dy.renew_cg()
        nll = sm.neg_log_softmax(dy.inputTensor(np.arange(3)), 4, update=True)
        nll_const = sm.neg_log_softmax(dy.inputTensor(np.arange(3)), 5, update=False)
        nll.value()
        nll_const.value()


def test_class_factored_softmax_sanity(tmp_path):
    dic = {}
    path = tmp_path / "cluster_file.txt"
    with open(path, "w+") as f:
        for i in range(5):
            f.write(f"{i} {2 * i}\n{i} {2 * i + 1}\n")
            dic[str(2 * i)] = len(dic)
            dic[str(2 * i + 1)] = len(dic)
    pc = dy.ParameterCollection()
    sm = dy.ClassFactoredSoftmaxBuilder(3, str(path), dic, pc, True)
    trainer = dy.SimpleSGDTrainer(pc)
    for _ in range(3):
        dy.renew_cg()
        nll = sm.neg_log_softmax(dy.inputTensor(np.arange(3)), 4, update=True)
        nll_const = sm.neg_log_softmax(dy.inputTensor(np.arange(3)), 5, update=False)
        nll.value()
        nll_const.value()
        (nll + nll_const).backward()
        trainer.update()
    dy.renew_cg()
    probs = np.exp(sm.full_log_distribution(dy.inputTensor(np.arange(3))).npvalue())
    assert probs.shape == (10,) and abs(probs.sum() - 1) < 1e-5
