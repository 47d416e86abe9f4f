"""Errors are raised with useful types and messages, and leave the graph and the
parameters usable."""
import numpy as np
import pytest

import autobatch as dy


@pytest.fixture
def model():
    pc = dy.ParameterCollection(seed=0)
    return pc, pc.add_parameters((2, 3)), pc.add_lookup_parameters((4, 3))


def check_still_works(W, lp, before):
    """The current graph accepts new nodes and computes right; parameters unchanged."""
    np.testing.assert_array_equal(W.as_array(), before[0])
    np.testing.assert_array_equal(lp.as_array(), before[1])
    x = dy.inputVector([0.5, -1.0, 2.0])
    y = dy.tanh(W * x + lp[1][0:2])
    expected = np.tanh(before[0] @ [0.5, -1.0, 2.0] + before[1][1, :2])
    np.testing.assert_allclose(y.npvalue(), expected, rtol=1e-6)
    W.grad[...] = 0
    dy.sum_elems(y).backward()
    np.testing.assert_allclose(W.grad_as_array(), np.outer(1 - expected ** 2, [0.5, -1.0, 2.0]), rtol=1e-5)
    W.grad[...] = 0
    lp.grad[...] = 0


def x3():
    return dy.inputVector([1.0, 2.0, 3.0])


ERRORS = {
    # shape mismatches: DimensionError naming the op and both shapes
    "add_shapes": (lambda W, lp: x3() + dy.inputVector([1, 2]), dy.DimensionError, r"add: .*\(3,\).*\(2,\)"),
    "cmult_shapes": (lambda W, lp: dy.cmult(x3(), dy.zeros((2, 2))), dy.DimensionError,
                     r"cmult: .*\(3,\).*\(2, 2\)"),
    "add_3d_shapes": (lambda W, lp: dy.zeros((2, 3, 2)) + dy.zeros((2, 2, 2)), dy.DimensionError,
                      r"add: .*\(2, 3, 2\).*\(2, 2, 2\).*equal or one of them 1"),
    "cdiv_dividend_repeats": (lambda W, lp: dy.cdiv(dy.zeros((1, 3)), dy.ones((2, 3))), dy.DimensionError,
                              r"cdiv: .*\(1, 3\).*\(2, 3\).*divisor"),
    "cdiv_rank": (lambda W, lp: dy.cdiv(x3(), dy.ones((3, 2))), dy.DimensionError, r"cdiv: .*divisor"),
    "cdiv_divisor_batch": (lambda W, lp: dy.cdiv(x3(), dy.ones(3, batch_size=2)), dy.DimensionError,
                           r"cdiv: batch sizes 1 and 2"),
    "colwise_add_vector": (lambda W, lp: dy.colwise_add(x3(), x3()), dy.DimensionError, r"colwise_add"),
    "colwise_add_rows": (lambda W, lp: dy.colwise_add(W, x3()), dy.DimensionError, r"colwise_add"),
    "colwise_add_row": (lambda W, lp: dy.colwise_add(W, dy.zeros((1, 3))), dy.DimensionError, r"colwise_add"),
    "matmul_shapes": (lambda W, lp: W * dy.inputVector([1, 2]), dy.DimensionError,
                      r"matmul: .*\(2, 3\).*\(2,\)"),
    "dot_shapes": (lambda W, lp: dy.dot_product(x3(), dy.zeros(4)), dy.DimensionError,
                   r"dot_product: .*\(3,\).*\(4,\)"),
    "dot_rank": (lambda W, lp: dy.dot_product(x3(), dy.zeros((3, 1))), dy.DimensionError,
                 r"dot_product: .*\(3,\).*\(3, 1\)"),
    "esum_shapes": (lambda W, lp: dy.esum([x3(), dy.zeros(2)]), dy.DimensionError, r"esum: .*\(2,\).*\(3,\)"),
    "concat_shapes": (lambda W, lp: dy.concatenate([dy.zeros((2, 2)), dy.zeros((2, 3))]),
                      dy.DimensionError, r"concatenate\(d=0\): .*\(2, 3\).*\(2, 2\)"),
    "affine_shapes": (lambda W, lp: dy.affine_transform([dy.zeros(2), W, dy.zeros(4)]),
                      dy.DimensionError, r"affine_transform: .*\(2, 3\).*\(4,\)"),
    "batch_sizes": (lambda W, lp: dy.zeros(3, batch_size=2) + dy.zeros(3, batch_size=3),
                    dy.DimensionError, r"add: batch sizes 2 and 3"),
    "reshape_size": (lambda W, lp: dy.reshape(x3(), (2, 2)), dy.DimensionError, r"reshape: .*\(3,\).*\(2, 2\)"),
    # indices out of range
    "lookup_row": (lambda W, lp: lp[4], IndexError, r"lookup index 4"),
    "lookup_negative": (lambda W, lp: dy.lookup(lp, -1), IndexError, r"-1"),
    "lookup_batch_row": (lambda W, lp: lp.batch([0, 7]), IndexError, r"7"),
    "pick_index": (lambda W, lp: dy.pick(x3(), 3), IndexError, r"pick: index 3"),
    "pick_d1_index": (lambda W, lp: dy.pick(dy.zeros((2, 2)), 2, 1), IndexError, r"pick: index 2"),
    "pick_dim": (lambda W, lp: dy.pick(x3(), 0, dim=1), dy.DimensionError, r"pick: dim=1 is not a dimension"),
    "pick_range_dim": (lambda W, lp: dy.pick_range(dy.zeros((2, 3)), 0, 1, 2), dy.DimensionError,
                       r"pick_range: d=2"),
    "pick_range_3d": (lambda W, lp: dy.pick_range(dy.zeros((2, 3, 4)), 2, 5, 2), IndexError,
                      r"pick_range: range \[2, 5\).*dimension 2"),
    "pick_list_index": (lambda W, lp: dy.pick_batch(x3(), [0, 5]), IndexError, r"pick: index 5"),
    "getitem_index": (lambda W, lp: x3()[-4], IndexError, r"index too small: -4 < -3"),
    "pick_range": (lambda W, lp: dy.pick_range(x3(), 2, 5), IndexError, r"pick_range: range \[2, 5\)"),
    "pick_range_empty": (lambda W, lp: x3()[2:2], ValueError, r"empty slice"),
    "pnls_index": (lambda W, lp: dy.pickneglogsoftmax(x3(), 3), IndexError, r"pickneglogsoftmax: index 3"),
    "pnls_batch_index": (lambda W, lp: dy.pickneglogsoftmax_batch(dy.zeros(3, batch_size=2), [0, 3]),
                         IndexError, r"pickneglogsoftmax: index 3"),
    "hinge_index": (lambda W, lp: dy.hinge(x3(), 9), IndexError, r"hinge: index 9"),
    "pick_batch_elems": (lambda W, lp: dy.pick_batch_elems(dy.zeros(3, batch_size=2), [2]), IndexError, r"2"),
    # wrong types
    "tanh_of_float": (lambda W, lp: dy.tanh(3.0), TypeError, None),
    "add_str": (lambda W, lp: x3() + "a", TypeError, r"str"),
    "esum_int": (lambda W, lp: dy.esum([x3(), 3]), TypeError, r"int"),
    "pick_float": (lambda W, lp: dy.pick(x3(), 1.5), TypeError, r"pick: index must be an int"),
    "pick_str": (lambda W, lp: dy.pick(x3(), "a"), TypeError, r"pick: index must be an int"),
    "getitem_float": (lambda W, lp: x3()[1.0], TypeError, r"x\[\.\.\.\]: index must be an int"),
    "slice_float": (lambda W, lp: x3()[0.5:2], TypeError, r"x\[a:b:s\]: index must be an int"),
    "lookup_float": (lambda W, lp: lp[1.5], TypeError, r"lookup: index must be an int"),
    "lookup_str": (lambda W, lp: dy.lookup(lp, "a"), TypeError, r"lookup"),
    "lookup_batch_float": (lambda W, lp: lp.batch([0, 1.5]), TypeError, r"lookup_batch"),
    "pnls_float": (lambda W, lp: dy.pickneglogsoftmax(x3(), 0.5), TypeError, r"pickneglogsoftmax"),
    "parameter_of_array": (lambda W, lp: dy.parameter(np.zeros(3)), TypeError, r"Parameters"),
    # values
    "backward_vector": (lambda W, lp: x3().backward(), ValueError, r"scalar"),
    "backward_matrix": (lambda W, lp: (W * 1.0).backward(), ValueError, r"\(2, 3\)"),
    "scalar_value_vector": (lambda W, lp: x3().scalar_value(), ValueError, r"scalar_value"),
    "dropout_rate": (lambda W, lp: dy.dropout(x3(), 1.5), ValueError, r"dropout"),
    "divide_by_zero": (lambda W, lp: x3() / 0, ZeroDivisionError, None),
    "nan_input": (lambda W, lp: dy.inputVector([1.0, float("nan")]), ValueError, r"NaN"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_then_graph_still_works(model, name):
    pc, W, lp = model
    fn, exc, match = ERRORS[name]
    before = W.as_array(), lp.as_array()
    dy.renew_cg()
    x3().value()       # something already computed in the graph
    n = dy.cg().num_nodes
    with pytest.raises(exc, match=match):
        fn(W, lp)
    if not name.startswith(("backward", "scalar_value")):
        # building failed: no node of the failing op was added (only its argument leaves)
        added = [dy.cg().node_info(i)[0] for i in range(n, dy.cg().num_nodes)]
        assert set(added) <= {"input", "parameter", "lookup"}, added
    check_still_works(W, lp, before)


def test_stale_expression(model):
    pc, W, lp = model
    before = W.as_array(), lp.as_array()
    dy.renew_cg()
    x = x3()
    w = W.expr()
    x.value()
    dy.renew_cg()
    assert x.is_stale() and "stale" in repr(x)
    for use in (lambda: x.value(), lambda: x.npvalue(), lambda: x.dim(), lambda: dy.tanh(x),
                lambda: x + 1, lambda: 2 * x, lambda: w * x3(), lambda: dy.esum([x3(), x]),
                lambda: x.backward(), lambda: x[0], lambda: dy.cg().forward(x)):
        with pytest.raises(dy.StaleExpressionError):
            use()
    # Parameters are re-added to the new graph, not stale
    assert not W.expr().is_stale()
    check_still_works(W, lp, before)


def test_backward_error_leaves_gradients_untouched(model):
    pc, W, lp = model
    dy.renew_cg()
    h = W * x3()
    with pytest.raises(ValueError):
        h.backward()
    assert (W.grad_as_array() == 0).all()
    dy.sum_elems(h).backward()
    np.testing.assert_allclose(W.grad_as_array(), np.tile([1.0, 2.0, 3.0], (2, 1)))


def test_bad_python_strategy_then_recover(model):
    pc, W, lp = model
    before = W.as_array(), lp.as_array()

    class Broken(dy.Strategy):
        name = "test-broken"

        def select(self, frontier):
            return 10**6

    dy.register_strategy(Broken())
    dy.renew_cg(strategy="test-broken")
    y = dy.tanh(W * x3())
    with pytest.raises(ValueError, match="chose signature"):
        y.value()
    dy.cg().set_strategy("agenda")
    np.testing.assert_allclose(y.npvalue(), np.tanh(before[0] @ [1.0, 2.0, 3.0]), rtol=1e-6)
    check_still_works(W, lp, before)


def test_unknown_strategies():
    with pytest.raises(ValueError, match="unknown strategy"):
        dy.renew_cg(strategy="no-such-strategy")
    with pytest.raises(TypeError, match="by name"):
        dy.renew_cg(strategy=1)
    with pytest.raises(TypeError, match="select"):
        dy.register_strategy(object(), name="not-a-strategy")
    dy.renew_cg(strategy="agenda")
    assert x3().value() == [1.0, 2.0, 3.0]


def test_a_value_too_large_for_one_node_is_refused():
    dy.renew_cg()
    with pytest.raises(dy.DimensionError, match="larger than one node can hold"):
        dy.zeros((50000, 50000))
    assert dy.zeros(2).value() == [0.0, 0.0]


def test_devices_other_than_the_cpu_are_refused():
    pc = dy.ParameterCollection()
    with pytest.raises(ValueError, match="CPU only"):
        pc.add_parameters(3, device="GPU:0")
    with pytest.raises(ValueError, match="CPU only"):
        pc.add_lookup_parameters((3, 2), device="GPU:0")
    dy.renew_cg()
    with pytest.raises(ValueError, match="CPU only"):
        dy.inputTensor([1.0], device="GPU:0")
    assert pc.add_parameters(2, device="CPU").shape() == (2,)
