"""Parameters, lookup tables and builders with a size of 0, as DyNet allows (bist-parser
and uuparser make them when an optional layer or the external embeddings are switched
off): every initializer, every trainer, the builders with an input of size 0, and
saving and loading in both file formats."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.errors import DimensionError

TRAINERS = [dy.SimpleSGDTrainer, dy.MomentumSGDTrainer, dy.AdagradTrainer, dy.AdadeltaTrainer,
            dy.RMSPropTrainer, dy.AdamTrainer, dy.AmsgradTrainer]

INITS = [None, 0.5, "glorot", "he", "saxe", "identity", "uniform", "normal",
         dy.GlorotInitializer(is_lookup=True), dy.NormalInitializer(0, 1)]


@pytest.mark.parametrize("init", INITS, ids=repr)
@pytest.mark.parametrize("shape", [(0,), 0, (0, 5), (5, 0), (0, 0), (2, 0, 3, 1)])
def test_empty_parameters_take_every_initializer(shape, init):
    if init == "identity" and shape != (0, 0):
        pytest.skip("the identity needs a square matrix")
    if init == "saxe" and (not isinstance(shape, tuple) or len(shape) != 2):
        pytest.skip("Saxe's initializer needs a matrix")
    m = dy.ParameterCollection()
    p = m.add_parameters(shape, init=init)
    want = shape if isinstance(shape, tuple) else (shape,)
    assert p.shape() == want
    assert p.as_array().shape == want
    assert p.grad_as_array().shape == want
    dy.renew_cg()
    assert p.npvalue().shape == want


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 2, 3), (3, 2, 0)])
def test_empty_lookup_tables(shape):
    m = dy.ParameterCollection()
    lp = m.add_lookup_parameters(shape)
    assert lp.shape() == shape
    assert lp.as_array().shape == shape
    if shape[0]:
        dy.renew_cg()
        assert lp[shape[0] - 1].npvalue().shape == shape[1:]


def _model_with_empty_parts():
    m = dy.ParameterCollection()
    W = m.add_parameters((0, 3))
    E = m.add_lookup_parameters((4, 0))
    F = m.add_lookup_parameters((0, 2))
    b = m.add_parameters(2, init=dy.NumpyInitializer(np.array([1.0, -1.0])))
    return m, W, E, F, b


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.__name__)
def test_every_trainer_updates_a_model_with_empty_parameters(trainer):
    def step(with_empty):
        if with_empty:
            m, W, E, F, b = _model_with_empty_parts()
        else:
            m = dy.ParameterCollection()
            b = m.add_parameters(2, init=dy.NumpyInitializer(np.array([1.0, -1.0])))
        t = trainer(m)
        for _ in range(2):
            dy.renew_cg()
            parts = [b * 1.0]
            if with_empty:
                parts += [W * dy.inputVector([1.0, 2.0, 3.0]), E[1], dy.sum_batches(dy.lookup_batch(E, [0, 3])),
                          dy.reshape(F.expr(), (0,))]
            loss = dy.squared_norm(dy.concatenate(parts))
            loss.value()
            loss.backward()
            t.update()
        return b.as_array()
    np.testing.assert_array_equal(step(True), step(False))


def test_builders_take_an_input_of_size_0():
    """An input_dim of 0 (uuparser without any embeddings): the recurrence runs on the
    hidden state alone, as a builder with a zero input of size 1 does."""
    for cls in (dy.VanillaLSTMBuilder, dy.LSTMBuilder, dy.CompactVanillaLSTMBuilder,
                dy.SimpleRNNBuilder, dy.GRUBuilder, dy.CoupledLSTMBuilder):
        m0, m1 = dy.ParameterCollection(), dy.ParameterCollection()
        b0, b1 = cls(2, 0, 3, m0), cls(2, 1, 3, m1)
        rng = np.random.default_rng(0)
        for p0, p1 in zip(m0.parameters_list(), m1.parameters_list()):
            p1.set_value(rng.uniform(-1, 1, p1.shape()))        # biases too: not all 0
            if p0.shape() == p1.shape():         # all but the input weights
                p0.set_value(p1.as_array())
        dy.renew_cg()
        s0, s1 = b0.initial_state(), b1.initial_state()
        for _ in range(3):
            s0, s1 = s0.add_input(dy.zeros(0)), s1.add_input(dy.zeros(1))
        np.testing.assert_allclose(s0.output().npvalue(), s1.output().npvalue(), rtol=1e-6,
                                   err_msg=cls.__name__)
        assert np.any(s0.output().npvalue())
        s0.output().value()
        dy.sum_elems(s0.output()).backward()


def test_transduce_and_birnn_take_an_input_of_size_0():
    m = dy.ParameterCollection()
    lstm = dy.VanillaLSTMBuilder(1, 0, 4, m)
    bi = dy.BiRNNBuilder(1, 0, 4, m, dy.VanillaLSTMBuilder)
    dy.renew_cg()
    xs = [dy.zeros(0) for _ in range(3)]
    stepped = lstm.initial_state().add_inputs(xs)
    fast = lstm.initial_state().transduce(xs)
    for s, f in zip(stepped, fast):
        np.testing.assert_allclose(f.npvalue(), s.output().npvalue(), rtol=1e-6)
    outs = bi.transduce(xs)
    assert [o.npvalue().shape for o in outs] == [(4,)] * 3


def test_builders_refuse_no_layers_and_an_empty_state():
    # DyNet crashes on both (a segmentation fault, a division by zero, or an error deep
    # inside a step)
    m = dy.ParameterCollection()
    with pytest.raises(DimensionError, match="layers"):
        dy.VanillaLSTMBuilder(0, 3, 3, m)
    with pytest.raises(DimensionError, match="hidden_dim"):
        dy.GRUBuilder(1, 3, 0, m)
    with pytest.raises(DimensionError, match="num_labels"):
        dy.StandardSoftmaxBuilder(3, 0, m)


def test_a_softmax_builder_over_an_empty_representation():
    m = dy.ParameterCollection()
    sm = dy.StandardSoftmaxBuilder(0, 4, m)
    dy.renew_cg()
    assert sm.neg_log_softmax(dy.zeros(0), 1).value() == pytest.approx(np.log(4.0), rel=1e-6)


# DyNet 2.2's files for _model_with_empty_parts (b's values as DyNet drew them): an
# empty tensor is a header and an empty line
DYNET_TEXT = (b"#Parameter# /_0 {0,3} 1 ZERO_GRAD\n\n"
              b"#Parameter# /_3 {2} 33 ZERO_GRAD\n-8.48371461e-02 -3.77410322e-01 \n"
              b"#LookupParameter# /_1 {0,4} 1 ZERO_GRAD\n\n"
              b"#LookupParameter# /_2 {2,0} 1 ZERO_GRAD\n\n")


def _check_loaded(m, W, E, F, b):
    assert (W.shape(), E.shape(), F.shape()) == ((0, 3), (4, 0), (0, 2))
    np.testing.assert_allclose(b.as_array(), [-0.0848371461, -0.377410322])


def test_populate_reads_dynets_file_of_empty_parameters(tmp_path):
    path = tmp_path / "model"
    path.write_bytes(DYNET_TEXT)
    m, W, E, F, b = _model_with_empty_parts()
    m.populate(str(path))
    _check_loaded(m, W, E, F, b)


@pytest.mark.parametrize("fmt", [None, "dynet"])
def test_empty_parameters_round_trip_in_both_formats(tmp_path, fmt):
    m, W, E, F, b = _model_with_empty_parts()
    b.set_value(np.array([-0.0848371461, -0.377410322]))
    m.save(str(tmp_path / "m"), format=fmt)
    m2, *rest = _model_with_empty_parts()
    m2.populate(str(tmp_path / "m"))
    _check_loaded(m2, *rest)
    dy.save(str(tmp_path / "objects"), [W, E, F, b], format=fmt)
    W2, E2, F2, b2 = dy.load(str(tmp_path / "objects"), dy.ParameterCollection())
    _check_loaded(None, W2, E2, F2, b2)
    if fmt == "dynet":
        text = (tmp_path / "m").read_bytes()
        assert b"#Parameter# /_0 {0,3} 1 ZERO_GRAD\n\n" in text
        assert b"#LookupParameter# /_1 {0,4} 1 ZERO_GRAD\n\n" in text
