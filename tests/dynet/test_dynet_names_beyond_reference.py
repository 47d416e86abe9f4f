"""The names dynet38 exports beyond its Python reference (the rows of
tests/data/dynet_public_names.txt that make_dynet_public_names.py --beyond adds), doing
what DyNet's do: Tensor (tensor_value), the value holders, the device queries,
inputTensorTranspose and ComputationGraph's inputs from flat values, dump, the trainers'
learning_rate property and whoami. The expected numbers and texts are dynet38's."""
import io
from contextlib import redirect_stdout

import numpy as np
import pytest

import autobatch as dy


def test_tensor_value_is_a_tensor_with_dynets_argmax_and_topk():
    dy.renew_cg()
    t = dy.inputTensor(np.array([[1., 5, 3], [4, 2, 6]])).tensor_value()
    assert isinstance(t, dy.Tensor)
    np.testing.assert_array_equal(t.as_numpy(), [[1, 5, 3], [4, 2, 6]])
    np.testing.assert_array_equal(t.argmax().as_numpy(), [[1, 0, 1]])
    np.testing.assert_array_equal(t.argmax(1).as_numpy(), [[1], [2]])
    values, ids = t.topk(0, 1)
    np.testing.assert_array_equal(values.as_numpy(), [[4, 5, 6]])
    np.testing.assert_array_equal(ids.as_numpy(), [[1, 0, 1]])
    values, ids = t.topk(1, 2)
    np.testing.assert_array_equal(values.as_numpy(), [[5, 3], [6, 4]])
    np.testing.assert_array_equal(ids.as_numpy(), [[1, 2], [2, 0]])
    v = dy.inputVector([0.1, 3, 2, 0.5]).tensor_value()
    assert v.argmax().as_numpy().tolist() == [1] and v.argmax().as_numpy().dtype == np.int64
    values, ids = v.topk(0, 2)
    assert values.as_numpy().tolist() == [3, 2] and ids.as_numpy().tolist() == [1, 2]
    ties = dy.inputVector([1.0, 1.0, 0.5]).tensor_value()
    assert ties.argmax().as_numpy().tolist() == [0]
    assert ties.topk(0, 3)[1].as_numpy().tolist() == [0, 1, 2]
    b = dy.inputTensor(np.array([[1., 5], [4, 2], [0, 9]]), batched=True).tensor_value()
    np.testing.assert_array_equal(b.argmax().as_numpy(), [[1, 2]])
    np.testing.assert_array_equal(b.topk(0, 2)[1].as_numpy(), [[1, 2], [0, 0]])
    assert dy.scalarInput(3.0).tensor_value().argmax().as_numpy().tolist() == [0]
    assert str(t) == "<autobatch Tensor:float>" and str(t.argmax()) == "<autobatch Tensor:int>"


def test_tensor_refuses_what_dynet_refuses():
    dy.renew_cg()
    t = dy.inputVector([1.0, 2.0]).tensor_value()
    with pytest.raises(ValueError, match="num > 1"):
        t.argmax(0, 2)
    with pytest.raises(ValueError, match="num > 1"):
        t.categorical_sample_log_prob(0, 2)
    with pytest.raises(ValueError, match="more than the 2 values"):
        t.topk(0, 3)
    with pytest.raises(ValueError, match="dim"):
        t.argmax(4)


def test_categorical_samples_follow_the_log_probabilities_and_the_seed():
    dy.renew_cg()
    t = dy.inputVector(np.log([0.1, 0.6, 0.3]) + 7.0).tensor_value()    # unnormalised
    dy.reset_random_seed(5)
    draws = [int(t.categorical_sample_log_prob().as_numpy()[0]) for _ in range(3000)]
    freq = np.bincount(draws, minlength=3) / len(draws)
    np.testing.assert_allclose(freq, [0.1, 0.6, 0.3], atol=0.03)
    dy.reset_random_seed(5)
    again = [int(t.categorical_sample_log_prob().as_numpy()[0]) for _ in range(3000)]
    assert again == draws
    m = dy.inputTensor(np.log([[0.999, 0.001], [0.001, 0.999]])).tensor_value()
    assert m.categorical_sample_log_prob(1).as_numpy().shape == (2, 1)


def test_value_holders_store_as_dynet():
    f = dy.FloatValue(0.1)
    assert f.get() == float(np.float32(0.1))
    f.set(3)
    assert f.get() == 3.0 and isinstance(f.get(), float)
    u = dy.UnsignedValue()
    assert u.get() == 0
    with pytest.raises(OverflowError):
        u.set(-1)
    fv = dy.FloatVectorValue([1, 2.5])
    assert fv.get() == [1.0, 2.5] and fv.size() == 2
    fv.set((0.1,))
    assert fv.get() == [float(np.float32(0.1))] and fv.size() == 1
    uv = dy.UnsignedVectorValue([1, 2])
    assert uv.get() == [1, 2] and uv.size() == 2
    with pytest.raises(TypeError):
        dy.FloatVectorValue()


def test_device_info_and_the_gpu_message():
    d = dy.get_device_info("CPU")
    assert (d.name, d.id, d.type) == (b"CPU", 0, -1)
    assert isinstance(d, dy.DeviceInfo)
    with pytest.raises(RuntimeError, match="Invalid device name: GPU:0"):
        dy.get_device_info("GPU:0")
    assert "CPU only" in dy.ERRMSG
    with pytest.raises(RuntimeError) as raised:
        dy.DynetParams().set_requested_gpus(1)
    assert dy.ERRMSG in str(raised.value)


def test_print_graphviz_without_dynet_viz_draws_nothing():
    out = io.StringIO()
    with redirect_stdout(out):
        dy.print_graphviz(compact=True)
    assert "print_text_graphviz" in out.getvalue()


def test_input_tensor_transpose_reads_flat_column_major_values():
    dy.renew_cg()
    x = dy.inputTensorTranspose([1., 2, 3, 4, 5, 6], (2, 3))
    assert isinstance(x, dy.Expression) and isinstance(x, dy.inputTensorTranspose)
    np.testing.assert_array_equal(x.npvalue(), [[1, 3, 5], [2, 4, 6]])
    y = dy.inputTensorTranspose([1., 2, 3, 4], (2,), batch_size=2)
    assert y.dim() == ((2,), 2)
    np.testing.assert_array_equal(y.npvalue(), [[1, 3], [2, 4]])
    assert dy.inputTensorTranspose([1., 2, 3]).dim() == ((3,), 1)
    z = dy.sum_elems(x * 2)
    assert z.value() == 42
    x.set([0., 0, 0, 0, 0, 1])
    assert z.value() == 2
    with pytest.raises(ValueError, match="hold 4 values, got 3"):
        dy.inputTensorTranspose([1., 2, 3], (2, 2))


def test_graph_inputs_from_flat_values():
    dy.renew_cg()
    m = dy.cg().inputMatrixLiteral([1., 2, 3, 4], (2, 2))
    np.testing.assert_array_equal(m.npvalue(), [[1, 3], [2, 4]])
    b = dy.cg().inputMatrixLiteral([1., 2, 3, 4], (2,), 2)
    assert b.dim() == ((2,), 2)
    s = dy.cg().inputSparseTensor([0, 3], [5., 7.], (2, 2), 1, 0.5)
    np.testing.assert_array_equal(s.npvalue(), [[5, 0.5], [0.5, 7]])
    s = dy.cg().inputSparseTensor([0, 5], [5., 7.], (3,), 2)
    np.testing.assert_array_equal(s.npvalue(), [[5, 0], [0, 0], [0, 7]])
    with pytest.raises(ValueError, match=r"in \[0, 4\)"):
        dy.cg().inputSparseTensor([4], [1.], (2, 2))
    with pytest.raises(ValueError, match="2 indices for 1 values"):
        dy.cg().inputSparseTensor([0, 1], [1.], (2, 2))


def test_dump_prints_values_as_dynet(tmp_path):
    dy.renew_cg()
    out = io.StringIO()
    with redirect_stdout(out):
        dy.dump_cg()
    assert out.getvalue() == "(Computation graph is empty)\n"
    x = dy.inputTensor(np.array([[1.5, 2, 3], [4, 5, 6e-7]]))
    v = dy.inputVector([1.0, -1.0])
    loss = dy.sum_elems(dy.log(v))
    out = io.StringIO()
    with redirect_stdout(out):
        dy.dump_cg(show_gradients=False)
    assert out.getvalue().startswith("Node 0\nValue: \n  1.5     2     3\n    4     5 6e-07\n"
                                     "Node 1\nValue: \n 1\n-1\n")
    path = tmp_path / "graph.txt"
    dy.cg().dump(str(path).encode(), True, True, True)
    text = path.read_text()
    assert "Node 2\nValue: invalid\nGradient: (not computed)\n" in text
    assert text.count("Node ") == 4 and "Node 0\nValue: valid\n" in text
    loss.backward(full=True)
    out = io.StringIO()
    with redirect_stdout(out):
        dy.cg().dump("", False, True, False)
    assert "Node 1\nGradient: \n 1\n-1\n" in out.getvalue()
    assert x.dim() == ((2, 3), 1)


def test_graph_methods_take_dynets_index_keyword():
    dy.renew_cg()
    e = dy.inputVector([1.0, 2.0]) * 2
    assert dy.cg().forward_vec(index=e) == [2.0, 4.0]
    assert dy.cg().inc_forward_scalar(index=dy.sum_elems(e)) == 6.0


@pytest.mark.parametrize("name", ["SimpleSGDTrainer", "CyclicalSGDTrainer", "MomentumSGDTrainer",
                                  "AdagradTrainer", "AdadeltaTrainer", "RMSPropTrainer",
                                  "AdamTrainer", "AmsgradTrainer"])
def test_trainers_say_who_they_are(name):
    assert getattr(dy, name)(dy.ParameterCollection()).whoami() == name


def test_learning_rate_is_a_checked_property():
    t = dy.SimpleSGDTrainer(dy.ParameterCollection(), 0.3)
    assert isinstance(type(t).__dict__.get("learning_rate") or dy.Trainer.__dict__["learning_rate"],
                      property)
    assert t.learning_rate == 0.3
    t.learning_rate *= 0.5          # xnmt's decay
    assert t.learning_rate == 0.15
    with pytest.raises(ValueError, match="learning_rate"):
        t.learning_rate = float("nan")
    assert t.learning_rate == 0.15


def test_birnn_builder_says_who_it_is():
    b = dy.BiRNNBuilder(1, 2, 4, dy.ParameterCollection(), dy.VanillaLSTMBuilder)
    assert b.whoami() == "BiRNNBuilder"
