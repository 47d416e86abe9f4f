"""Every size argument follows one rule (api/shapes.pxi's _as_size): an int, a numpy
integer, or a float that is a whole number (48.0: code written for DyNet computes sizes
with /, and DyNet truncates every float); any other float, NaN or a bool is a
TypeError, never truncated. The indices given to op functions, which DyNet also takes
as floats, follow the same rule for floats (api/ops_inputs.pxi's _as_function_index);
x[i] keeps ints only, as DyNet's does."""
import numpy as np
import pytest

import autobatch as dy


def _x():
    return dy.inputTensor(np.arange(24.0).reshape(4, 6))


# (name, a call taking the size v) for every kind of size argument: shapes of values
# and parameters, batch sizes, builders' layers and dims, and the ops' counts
SIZE_ARGUMENTS = [
    ("add_parameters", lambda v: dy.ParameterCollection().add_parameters((v, 2)).shape()),
    ("add_parameters scalar", lambda v: dy.ParameterCollection().add_parameters(v).shape()),
    ("add_lookup_parameters rows", lambda v: dy.ParameterCollection().add_lookup_parameters((v, 2)).shape()),
    ("add_lookup_parameters dim", lambda v: dy.ParameterCollection().add_lookup_parameters((2, v)).shape()),
    ("reshape", lambda v: dy.reshape(dy.zeros(8), (v, 8 // 4)).dim()),
    ("reshape batch_size", lambda v: dy.reshape(dy.zeros(2, batch_size=4), (2,), batch_size=v).dim()),
    ("zeros", lambda v: dy.zeros((v, 2)).dim()),
    ("zeros batch_size", lambda v: dy.zeros(2, batch_size=v).dim()),
    ("ones", lambda v: dy.ones(v).dim()),
    ("constant", lambda v: dy.constant((v,), 1.0).dim()),
    ("vecInput", lambda v: dy.vecInput(v).dim()),
    ("random_normal", lambda v: dy.random_normal((v,)).dim()),
    ("random_uniform batch_size", lambda v: dy.random_uniform((2,), 0, 1, batch_size=v).dim()),
    ("random_bernoulli", lambda v: dy.random_bernoulli((v,), 0.5).dim()),
    ("random_gumbel", lambda v: dy.random_gumbel((v,)).dim()),
    ("sparse_inputTensor", lambda v: dy.sparse_inputTensor([[0]], [1.0], (v,)).dim()),
    ("one_hot", lambda v: dy.one_hot(v, 1).dim()),
    ("kmax_pooling k", lambda v: dy.kmax_pooling(_x(), v, 1).dim()),
    ("fold_rows", lambda v: dy.fold_rows(_x(), v).dim()),
    ("kmh_ngram", lambda v: dy.kmh_ngram(_x(), v).dim()),
    ("mean_dim n", lambda v: dy.mean_dim(_x(), [1], False, v).npvalue().tolist()),
    ("std_dim n", lambda v: dy.std_dim(_x(), [1], False, v).npvalue().tolist()),
    ("conv2d stride", lambda v: dy.conv2d(dy.zeros((5, 5, 1)), dy.zeros((2, 2, 1, 1)), [v, 1]).dim()),
    ("maxpooling2d ksize", lambda v: dy.maxpooling2d(dy.zeros((6, 6, 1)), [v, 2], [1, 1]).dim()),
    ("VanillaLSTMBuilder", lambda v: _run(dy.VanillaLSTMBuilder(1, v, v, dy.ParameterCollection()), v)),
    ("VanillaLSTMBuilder layers", lambda v: _run(dy.VanillaLSTMBuilder(v, 4, 4, dy.ParameterCollection()), v)),
    ("LSTMBuilder", lambda v: _run(dy.LSTMBuilder(1, v, v, dy.ParameterCollection()), v)),
    ("CompactVanillaLSTMBuilder", lambda v: _run(dy.CompactVanillaLSTMBuilder(1, v, v, dy.ParameterCollection()), v)),
    ("SimpleRNNBuilder", lambda v: _run(dy.SimpleRNNBuilder(1, v, v, dy.ParameterCollection()), v)),
    ("GRUBuilder", lambda v: _run(dy.GRUBuilder(1, v, v, dy.ParameterCollection()), v)),
    ("BiRNNBuilder", lambda v: [e.dim() for e in dy.BiRNNBuilder(
        1, v, v, dy.ParameterCollection(), dy.VanillaLSTMBuilder).transduce([dy.zeros(4)])]),
    ("TreeLSTMBuilder", lambda v: dy.TreeLSTMBuilder(v, v, dy.ParameterCollection()).hidden_dim),
    ("StandardSoftmaxBuilder", lambda v: dy.StandardSoftmaxBuilder(
        v, v, dy.ParameterCollection()).full_logits(dy.zeros(4)).dim()),
]


def _run(builder, v):
    dy.renew_cg()
    return builder.initial_state().add_input(dy.zeros(4)).output().dim()


@pytest.mark.parametrize("name,call", SIZE_ARGUMENTS, ids=[n for n, _ in SIZE_ARGUMENTS])
def test_a_whole_number_float_is_the_size_it_names(name, call):
    dy.renew_cg()
    expected = call(4)
    for v in (4.0, np.float32(4.0), np.float64(4.0), np.int64(4)):
        dy.renew_cg()
        assert call(v) == expected, (name, v)


@pytest.mark.parametrize("name,call", SIZE_ARGUMENTS, ids=[n for n, _ in SIZE_ARGUMENTS])
def test_a_size_that_is_not_a_whole_number_is_a_type_error(name, call):
    for v in (4.5, np.float32(4.5), float("nan"), float("inf")):
        dy.renew_cg()
        with pytest.raises(TypeError, match="sizes must be whole numbers"):
            call(v)
    for v in (True, "4", None):
        dy.renew_cg()
        with pytest.raises(TypeError, match="ints"):
            call(v)


def test_the_size_helper_for_the_layers_above():
    assert dy.api.core.size_argument(48.0, "here") == 48
    assert type(dy.api.core.size_argument(np.float32(48.0), "here")) is int
    with pytest.raises(dy.DimensionError, match="here: sizes must be 1 or more, got 0"):
        dy.api.core.size_argument(0.0, "here", 1)


_lp = dy.ParameterCollection().add_lookup_parameters((5, 2))

# (name, a call taking the index v = 2) for the op functions DyNet 2.2 gives a float
INDEX_ARGUMENTS = [
    ("pick", lambda v: dy.pick(_x(), v).npvalue().tolist()),
    ("pick d", lambda v: dy.pick(_x(), 1, v - 1).npvalue().tolist()),
    ("pick_batch", lambda v: dy.pick_batch(_x(), [v, 0]).npvalue().tolist()),
    ("pick_range", lambda v: dy.pick_range(_x(), 0, v).npvalue().tolist()),
    ("pick_batch_elem", lambda v: dy.pick_batch_elem(dy.zeros(2, batch_size=3), v).dim()),
    ("pick_batch_elems", lambda v: dy.pick_batch_elems(dy.zeros(2, batch_size=3), [v]).dim()),
    ("select_rows", lambda v: dy.select_rows(_x(), [v]).npvalue().tolist()),
    ("select_cols", lambda v: dy.select_cols(_x(), [v]).npvalue().tolist()),
    ("lookup", lambda v: dy.lookup(_lp, v).npvalue().tolist()),
    ("lp[i]", lambda v: _lp[v].npvalue().tolist()),
    ("lookup_batch", lambda v: dy.lookup_batch(_lp, [v, 1]).npvalue().tolist()),
    ("sum_dim d", lambda v: dy.sum_dim(_x(), [v - 1]).npvalue().tolist()),
    ("max_dim d", lambda v: dy.max_dim(_x(), v - 1).npvalue().tolist()),
    ("concatenate d", lambda v: dy.concatenate([_x(), _x()], d=v).dim()),
    ("transpose", lambda v: dy.transpose(dy.zeros((2, 3, 4)), [v, 0, 1]).dim()),
    ("softmax d", lambda v: dy.softmax(_x(), v - 1).npvalue().tolist()),
    ("pickneglogsoftmax", lambda v: dy.pickneglogsoftmax(dy.inputVector([1.0, 2, 3]), v).value()),
    ("hinge", lambda v: dy.hinge(dy.inputVector([1.0, 2, 3]), v).value()),
    ("log_softmax restrict", lambda v: dy.log_softmax(dy.inputVector([1.0, 2, 3]), [v, 0]).npvalue().tolist()),
]


@pytest.mark.parametrize("name,call", INDEX_ARGUMENTS, ids=[n for n, _ in INDEX_ARGUMENTS])
def test_an_op_function_takes_a_whole_number_float_index(name, call):
    dy.renew_cg()
    expected = call(2)
    for v in (2.0, np.float32(2.0), np.int64(2)):
        dy.renew_cg()
        assert call(v) == expected, (name, v)
    dy.renew_cg()
    with pytest.raises(TypeError, match="whole number"):
        call(2.5)


def test_x_of_i_keeps_int_indices_as_dynet():
    dy.renew_cg()
    with pytest.raises(TypeError, match="index must be an int"):
        _x()[2.0]
