"""Values with a dimension of 0 (empty tensors), as DyNet allows them: code written for
DyNet makes them when an optional part is switched off (a hidden layer of size 0, no
external embeddings). They must be creatable, flow through products, sums,
concatenation and reshapes with the right (empty or zero) values and gradients, batch
like any other value, and never make a kernel read memory it does not own (checked by
running this file under valgrind). The reductions that need an element refuse clearly."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.errors import DimensionError
from autobatch.kernels.gemm import gemm_for_tests


EMPTY_SHAPES = [(0,), (0, 3), (3, 0), (0, 0), (2, 0, 3), (2, 3, 4, 0)]


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
def test_empty_inputs_have_their_shape(shape):
    dy.renew_cg()
    for e in (dy.inputTensor(np.zeros(shape)), dy.zeros(shape), dy.random_normal(shape),
              dy.reshape(dy.zeros(shape), shape[::-1])):
        e.forward()
        assert e.npvalue().shape in (shape, shape[::-1])
        assert e.npvalue().size == 0
    assert dy.inputTensor(np.zeros(shape)).dim() == (shape, 1)
    assert dy.inputVector([]).dim() == ((0,), 1)
    assert dy.inputVector([]).value() == []


def test_value_and_npvalue_of_empty_values_are_dynets():
    # as dynet38 gives them: value() of a vector is a list, of a matrix an array
    W = dy.ParameterCollection().add_parameters((0, 3))
    dy.renew_cg()
    assert dy.zeros(0).value() == []
    assert dy.zeros(0, batch_size=2).value() == []
    assert dy.zeros(0, batch_size=2).npvalue().shape == (0, 2)
    for e in (dy.zeros((0, 3)), dy.parameter(W), W):
        assert e.value().shape == (0, 3) and e.npvalue().shape == (0, 3)
    assert dy.zeros((3, 0)).value().shape == (3, 0)


def test_an_empty_batched_input_keeps_its_batch():
    dy.renew_cg()
    x = dy.inputTensor(np.zeros((0, 3)), batched=True)
    assert x.dim() == ((0,), 3)
    assert x.npvalue().shape == (0, 3)
    with pytest.raises(DimensionError, match="batch size"):
        dy.inputTensor(np.zeros((3, 0)), batched=True)      # a batch of none


def test_a_negative_dimension_is_still_refused():
    dy.renew_cg()
    with pytest.raises(DimensionError, match="0 or more"):
        dy.zeros((3, -1))
    with pytest.raises(DimensionError, match="0 or more"):
        dy.ParameterCollection().add_parameters((-1, 2))


def test_set_on_an_empty_input():
    dy.renew_cg()
    x = dy.inputVector([])
    x.set([])
    assert x.npvalue().shape == (0,)


def _param(m, shape, value):
    return m.add_parameters(shape, init=dy.NumpyInitializer(np.full(shape, value)))


def test_products_with_an_empty_outer_or_inner_dimension():
    m = dy.ParameterCollection()
    dy.renew_cg()
    x5 = dy.inputVector(np.arange(5.0))
    W05, W50 = _param(m, (0, 5), 1.0), _param(m, (5, 0), 1.0)
    assert (W05 * x5).npvalue().shape == (0,)
    # an inner dimension of 0: the product is zero, whatever the memory held before
    y = W50 * dy.zeros(0)
    np.testing.assert_array_equal(y.npvalue(), np.zeros(5))
    np.testing.assert_array_equal((dy.zeros((3, 0)) * dy.zeros((0, 4))).npvalue(), np.zeros((3, 4)))
    assert (dy.zeros((3, 4)) * dy.zeros((4, 0))).npvalue().shape == (3, 0)
    batch = dy.zeros(0, batch_size=4)
    np.testing.assert_array_equal((W50 * batch).npvalue(), np.zeros((5, 4)))
    b = dy.inputVector(np.arange(5.0))
    np.testing.assert_array_equal(dy.affine_transform([b, W50, dy.zeros(0)]).npvalue(),
                                  np.arange(5.0))


def test_gemm_with_an_empty_inner_dimension_scales_c_by_beta():
    # C = alpha A B + beta C with k = 0 is beta C (BLAS's rule), for every beta
    for beta, expected in ((0.0, 0.0), (1.0, 3.0), (0.5, 1.5)):
        C = np.full((4, 2), 3.0, dtype=np.float32, order="F")
        gemm_for_tests("N", "N", 1.0, np.zeros((4, 0), np.float32, order="F"),
                       np.zeros((0, 2), np.float32, order="F"), beta, C)
        np.testing.assert_array_equal(C, np.full((4, 2), expected))


def test_gradients_through_an_empty_hidden_layer():
    """bist-parser's --hidden2 0: a (0, H) layer and a (0,) bias between two products."""
    m = dy.ParameterCollection()
    W1 = _param(m, (0, 3), 1.0)
    b1 = _param(m, (0,), 1.0)
    W2 = _param(m, (4, 0), 1.0)
    b2 = _param(m, (4,), 2.0)
    dy.renew_cg()
    x = dy.inputVector([1.0, 2.0, 3.0])
    loss = dy.sum_elems(W2 * dy.tanh(W1 * x + b1) + b2)
    assert loss.value() == pytest.approx(8.0)
    loss.backward()
    np.testing.assert_array_equal(b2.grad_as_array(), np.ones(4))
    assert W1.grad_as_array().shape == (0, 3)
    assert W2.grad_as_array().shape == (4, 0)
    assert b1.grad_as_array().shape == (0,)


def test_concatenation_with_empty_parts():
    # DyNet refuses these ("Attempt to set dimension size to zero"); an empty part adds
    # nothing, which is what a switched-off feature means
    m = dy.ParameterCollection()
    W = _param(m, (0, 2), 1.0)
    v = _param(m, (2,), 1.0)
    dy.renew_cg()
    a = dy.inputVector([1.0, 2.0])
    parts = [W * a, v, dy.zeros(0), a]
    c = dy.concatenate(parts)
    np.testing.assert_array_equal(c.npvalue(), [1.0, 1.0, 1.0, 2.0])
    loss = dy.dot_product(c, dy.inputVector([1.0, 2.0, 3.0, 4.0]))
    loss.backward()
    np.testing.assert_array_equal(v.grad_as_array(), [1.0, 2.0])
    assert dy.concatenate([dy.zeros(0), dy.zeros(0)]).npvalue().shape == (0,)
    cols = dy.concatenate_cols([dy.inputTensor(np.ones((2, 2))), dy.zeros((2, 0))])
    np.testing.assert_array_equal(cols.npvalue(), np.ones((2, 2)))
    assert dy.concatenate_to_batch([dy.zeros(0), dy.zeros(0)]).dim() == ((0,), 2)


def test_elementwise_ops_and_sums_of_empty_values():
    dy.renew_cg()
    e = dy.zeros(0)
    for y in (dy.tanh(e), e + e, dy.cmult(e, e), e * 2.0, dy.softmax(e), dy.log_softmax(e),
              dy.logistic(dy.zeros((0, 2))), dy.esum([e, e]), dy.emax([e, e]), dy.dropout(e, 0.5),
              dy.transpose(dy.zeros((0, 5))), dy.sum_batches(dy.zeros(0, batch_size=3)),
              dy.colwise_add(dy.zeros((0, 3)), e), dy.nobackprop(e)):
        assert y.npvalue().size == 0
    assert dy.sum_elems(e).value() == 0.0
    assert dy.sum_elems(dy.zeros((0, 3))).value() == 0.0
    assert dy.dot_product(e, e).value() == 0.0
    assert dy.squared_norm(e).value() == 0.0
    assert dy.l2_norm(e).value() == 0.0
    assert dy.squared_distance(e, e).value() == 0.0
    np.testing.assert_array_equal(dy.sum_dim(dy.zeros((0, 3)), [0]).npvalue(), np.zeros(3))
    np.testing.assert_array_equal(dy.logsumexp_dim(dy.zeros((0, 3)), 0).npvalue(),
                                  np.full(3, -np.inf))


def _dirty_memory():
    """Leave 7s in the graph's memory, where the next graph's values will be: a kernel
    that does not write its output shows them."""
    dy.renew_cg()
    dy.tanh(dy.inputTensor(np.full((64, 64), 7.0)) * 2.0 + 5.0).forward()
    dy.renew_cg()


@pytest.mark.parametrize("op,expected", [
    (lambda P: dy.logdet(P((0, 0))), [0.0]),                       # det of the empty matrix: 1
    (lambda P: dy.trace_of_product(P((0, 0)), P((0, 0))), [0.0]),
    (lambda P: dy.contract3d_1d(P((2, 3, 0)), P((0,))), np.zeros((2, 3))),
    (lambda P: dy.contract3d_1d_1d(P((2, 3, 0)), P((0,)), P((3,))), np.zeros(2)),
    (lambda P: dy.filter1d_narrow(P((2, 8)), P((2, 0))), np.zeros((1, 9))),
    (lambda P: dy.filter1d_narrow(P((0, 8)), P((0, 3))), np.zeros((1, 6))),
    (lambda P: dy.transpose(P((0, 4))) * P((0, 2)), np.zeros((4, 2))),
    (lambda P: dy.sum_dim(P((0, 2)), [0]), np.zeros(2)),
    (lambda P: dy.binary_log_loss(P((0,)), P((0,))), [0.0]),
    (lambda P: dy.l1_distance(P((0,)), P((0,))), [0.0]),
    (lambda P: dy.huber_distance(P((0,)), P((0,))), [0.0]),
])
def test_ops_of_empty_values_with_a_value_give_their_empty_sums(op, expected):
    """Products, contractions, filters and losses over nothing are 0, written even where
    the memory held something else, and their backward passes run (BLAS and LAPACK
    refuse a leading dimension of 0, so these never reach them)."""
    m = dy.ParameterCollection()
    _dirty_memory()
    y = op(lambda shape: m.add_parameters(shape, init=1.0))
    np.testing.assert_array_equal(y.npvalue(), np.asarray(expected).reshape(y.npvalue().shape))
    dy.sum_elems(y).backward()


def test_inverse_of_the_empty_matrix():
    m = dy.ParameterCollection()
    dy.renew_cg()
    assert dy.inverse(m.add_parameters((0, 0))).npvalue().shape == (0, 0)


def test_logsumexp_over_an_empty_dimension_reads_nothing():
    # an empty parameter has no memory at all (its pointer is NULL): the kernel must not
    # read a first element to start its maximum from
    W = dy.ParameterCollection().add_parameters((0, 3))
    dy.renew_cg()
    y = dy.logsumexp_dim(W, 0)
    np.testing.assert_array_equal(y.npvalue(), np.full(3, -np.inf))
    dy.sum_elems(dy.cmult(y, dy.zeros(3))).backward()
    assert W.grad_as_array().shape == (0, 3)


def test_the_fused_lstm_ops_refuse_an_empty_cell():
    dy.renew_cg()
    with pytest.raises(DimensionError, match="lstm_hidden"):
        dy.lstm_hidden(dy.zeros(0), dy.zeros(3))


@pytest.mark.parametrize("op", [
    lambda x: dy.max_dim(x, 0), lambda x: dy.min_dim(x, 0), lambda x: dy.mean_dim(x, [0], False),
    lambda x: dy.std_dim(x, [0]), lambda x: dy.moment_dim(x, [0], 2), lambda x: dy.mean_elems(x),
    lambda x: dy.std_elems(x),
])
def test_reductions_that_need_an_element_refuse_an_empty_dimension(op):
    # DyNet returns -inf, +inf or NaN for these
    dy.renew_cg()
    with pytest.raises(DimensionError, match="empty|no elements"):
        op(dy.zeros((0, 3)))


def test_an_empty_row_count_still_divides_a_masked_mean():
    dy.renew_cg()
    np.testing.assert_array_equal(dy.mean_dim(dy.zeros((0, 3)), [0], False, 2).npvalue(),
                                  np.zeros(3))


def test_lookups_into_zero_width_and_zero_row_tables():
    m = dy.ParameterCollection()
    narrow = m.add_lookup_parameters((5, 0))
    none = m.add_lookup_parameters((0, 5))
    dy.renew_cg()
    assert narrow[1].npvalue().shape == (0,)
    assert dy.lookup_batch(narrow, [1, 2]).dim() == ((0,), 2)
    assert narrow.expr().npvalue().shape == (0, 5)
    with pytest.raises(IndexError):
        none[0]
    loss = dy.sum_elems(dy.concatenate([narrow[3], dy.inputVector([2.0])]))
    loss.backward()
    assert narrow.grad_as_array().shape == (5, 0)


def _graph(instances):
    """Per instance, an empty layer between two products and a concatenation."""
    m = dy.ParameterCollection()
    W1 = _param(m, (0, 3), 0.5)
    W2 = m.add_parameters((4, 0))
    b2 = m.add_parameters(4, init=dy.NumpyInitializer(np.arange(4.0)))
    E = m.add_lookup_parameters((6, 0))
    V = m.add_parameters((2, 5), init=dy.NumpyInitializer(np.arange(10.0).reshape(2, 5) / 10))
    losses = []
    for k in range(instances):
        x = dy.inputVector([k, 1.0, -k])
        h = dy.concatenate([W2 * dy.rectify(W1 * x) + b2, E[k], dy.inputVector([k / 2.0])])
        losses.append(dy.sum_elems(dy.tanh(V * h)))
    return m, losses


def test_empty_values_batch_as_the_unbatched_run(strategy):
    def run(s):
        dy.renew_cg(strategy=s)
        m, losses = _graph(5)
        values = [loss.value() for loss in losses]
        dy.esum(losses).backward()
        return values, [p.grad_as_array().copy() for p in m.parameters_list()]
    base_values, base_grads = run("none")
    values, grads = run(strategy)
    np.testing.assert_allclose(values, base_values, rtol=1e-6)
    for g, b in zip(grads, base_grads):
        np.testing.assert_allclose(g, b, rtol=1e-6)
    assert any(np.any(g) for g in grads)        # the non-empty parts did get gradients
