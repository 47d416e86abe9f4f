"""N-d values as DyNet makes them: inputTensor's dims (trailing 1s kept), N-d
parameters, lookup tables with matrix / 3-D rows, value() kinds. The expected dims
and values were read off DyNet 2.1 (`import dynet`)."""
import numpy as np
import pytest

import autobatch as dy


@pytest.mark.parametrize("shape,batched,dim", [
    ((3,), False, ((3,), 1)),
    ((3, 1), False, ((3, 1), 1)),
    ((1, 3), False, ((1, 3), 1)),
    ((3, 2, 1), False, ((3, 2, 1), 1)),
    ((3, 1, 1), False, ((3, 1, 1), 1)),
    ((2, 3, 4, 5), False, ((2, 3, 4, 5), 1)),
    ((3, 2), True, ((3,), 2)),
    ((3, 2, 4), True, ((3, 2), 4)),
    ((3, 2, 1), True, ((3, 2), 1)),
    ((3, 1, 2), True, ((3, 1), 2)),
    ((2, 3, 4, 5, 2), True, ((2, 3, 4, 5), 2)),
    ((3,), True, ((1,), 3)),
])
def test_input_tensor_dims_as_dynet(shape, batched, dim):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
    dy.renew_cg()
    e = dy.inputTensor(a, batched=batched)
    assert e.dim() == dim
    np.testing.assert_array_equal(e.npvalue(), a.reshape(dim[0] + ((dim[1],) if dim[1] > 1 else ())))


def test_input_tensor_beyond_four_dims_is_a_dimension_error():
    dy.renew_cg()
    with pytest.raises(dy.DimensionError, match="1 to 4 dimensions"):
        dy.inputTensor(np.ones((2, 2, 2, 2, 2)))


def test_input_tensor_list_of_arrays_is_a_batch():
    dy.renew_cg()
    a, b = np.ones((2, 3)), np.arange(6.0).reshape(2, 3)
    e = dy.inputTensor([a, b])
    assert e.dim() == ((2, 3), 2)
    np.testing.assert_array_equal(e.npvalue()[..., 1], b)
    assert dy.inputTensor([[1.0, 2.0], [3.0, 4.0]]).dim() == ((2, 2), 1)   # nested lists: one value


def test_value_kinds_as_dynet():
    dy.renew_cg()
    assert dy.inputTensor([5.0]).value() == 5.0
    assert dy.inputTensor([1.0, 2.0, 3.0]).value() == [1.0, 2.0, 3.0]
    # a batched vector: every batch element's values, one after another
    assert dy.inputTensor(np.arange(6.0).reshape(3, 2), batched=True).value() == [0, 2, 4, 1, 3, 5]
    assert dy.inputTensor([[1.0, 2.0, 3.0]], batched=True).value() == [1.0, 2.0, 3.0]
    assert isinstance(dy.inputTensor(np.ones((3, 1))).value(), np.ndarray)
    assert dy.inputTensor(np.ones((2, 2, 2)), batched=True).value().shape == (2, 2, 2)


@pytest.mark.parametrize("shape", [(3,), (3, 2), (3, 1), (3, 2, 2), (3, 2, 1), (2, 3, 2, 2)])
def test_nd_parameters(shape):
    pc = dy.ParameterCollection(seed=0)
    p = pc.add_parameters(shape)
    v = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    p.set_value(v)
    assert p.shape() == shape and p.as_array().shape == shape
    dy.renew_cg()
    e = dy.parameter(p)
    assert e.dim() == (shape, 1)
    np.testing.assert_array_equal(e.npvalue(), v)
    dy.sum_elems(dy.cmult(e, dy.inputTensor(v))).backward()
    np.testing.assert_array_equal(p.grad_as_array(), v)


def test_parameters_beyond_four_dims_are_a_dimension_error():
    pc = dy.ParameterCollection()
    with pytest.raises(dy.DimensionError):
        pc.add_parameters((2, 2, 2, 2, 2))
    with pytest.raises(dy.DimensionError):
        pc.add_lookup_parameters((3, 2, 2, 2, 2, 2))


@pytest.mark.parametrize("shape", [(5, 3), (5, 3, 2), (5, 3, 2, 2), (5, 1), (5, 3, 1)])
def test_nd_lookup_rows(shape):
    pc = dy.ParameterCollection(seed=0)
    lp = pc.add_lookup_parameters(shape)
    table = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    lp.set_value(table)
    assert lp.shape() == shape and lp.as_array().shape == shape
    np.testing.assert_array_equal(lp.as_array(), table)
    row = shape[1:]
    dy.renew_cg()
    e, eb = dy.lookup(lp, 2), dy.lookup_batch(lp, [2, 4])
    assert e.dim() == (row, 1) and eb.dim() == (row, 2)
    np.testing.assert_array_equal(e.npvalue(), table[2])
    np.testing.assert_array_equal(eb.npvalue()[..., 1], table[4])
    assert lp.expr().dim() == (row + (5,), 1)          # DyNet: the table as row dims + (rows,)
    np.testing.assert_array_equal(np.moveaxis(lp.expr().npvalue(), -1, 0), table)
    w = np.arange(np.prod(row), dtype=np.float32).reshape(row)
    loss = dy.sum_elems(dy.cmult(e, dy.inputTensor(w))) + \
        dy.sum_batches(dy.sum_elems(dy.cmult(eb, dy.inputTensor(w))))
    loss.backward()
    g = lp.grad_as_array()
    np.testing.assert_array_equal(g[2], 2 * w)        # looked up twice: gradients add
    np.testing.assert_array_equal(g[4], w)
    assert not g[[0, 1, 3]].any()


def test_lookup_init_row_and_from_file_use_row_layout(tmp_path):
    pc = dy.ParameterCollection(seed=0)
    lp = pc.add_lookup_parameters((2, 3, 2))
    lp.init_row(1, np.arange(6.0).reshape(3, 2))
    dy.renew_cg()
    np.testing.assert_array_equal(lp[1].npvalue(), np.arange(6.0).reshape(3, 2))
    f = tmp_path / "vals.txt"
    f.write_text(" ".join(str(v) for v in range(12)))     # row after row, each column-major
    lp2 = pc.add_lookup_parameters((2, 3, 2), init=dy.FromFileInitializer(str(f)))
    np.testing.assert_array_equal(lp2.as_array()[1], np.arange(6, 12).reshape(3, 2, order="F"))


def test_nd_parameters_save_and_load(tmp_path):
    pc = dy.ParameterCollection(seed=0)
    p, lp = pc.add_parameters((2, 3, 2), name="T"), pc.add_lookup_parameters((4, 2, 3), name="E")
    pc.save(str(tmp_path / "m"))
    pc2 = dy.ParameterCollection(seed=1)
    p2, lp2 = pc2.add_parameters((2, 3, 2), name="T"), pc2.add_lookup_parameters((4, 2, 3), name="E")
    pc2.populate(str(tmp_path / "m"))
    np.testing.assert_array_equal(p2.as_array(), p.as_array())
    np.testing.assert_array_equal(lp2.as_array(), lp.as_array())


def test_power_operator():
    pc = dy.ParameterCollection(seed=0)
    p = pc.add_parameters((2, 3), init=2.0)
    dy.renew_cg()
    np.testing.assert_allclose((p.expr(True) ** 2).npvalue(), np.full((2, 3), 4.0))


# ------------------------------------------------------------ reductions ----

@pytest.mark.parametrize("f", [dy.max_dim, dy.min_dim])
def test_extreme_dim_ties_send_the_gradient_to_the_first(f):
    pc = dy.ParameterCollection()
    p = pc.add_parameters((2, 3))
    p.set_value(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]) * (1 if f is dy.max_dim else -1))
    dy.renew_cg()
    y = f(p.expr(True), 1)
    dy.sum_elems(dy.cmult(y, dy.inputTensor([1.0, 2.0]))).backward()
    np.testing.assert_array_equal(p.grad_as_array(), [[0, 1, 0], [2, 0, 0]])


def test_max_dim_positions_are_exact_past_float_precision():
    """The argmax is kept as an int: as a float, position 2^24 + 1 would round."""
    n = (1 << 24) + 2
    v = np.zeros(n, dtype=np.float32)
    v[n - 1] = 1.0
    dy.renew_cg()
    x = dy.inputTensor(v)
    y = dy.max_dim(x)
    assert y.value() == 1.0
    y.backward(full=True)
    g = x.gradient()
    assert g[n - 1] == 1.0 and g.sum() == 1.0


@pytest.mark.parametrize("call,exc,match", [
    (lambda x: dy.max_dim(x, 3), dy.DimensionError, r"max_dim: d=3 is not a dimension"),
    (lambda x: dy.min_dim(x, -1), dy.DimensionError, r"min_dim: d=-1"),
    (lambda x: dy.max_dim(x, 1.5), TypeError, r"max_dim"),
    (lambda x: dy.sum_dim(x, [3]), dy.DimensionError, r"sum_dim: d=3"),
    (lambda x: dy.sum_dim(x, [0, 0]), dy.DimensionError, r"listed twice"),
    (lambda x: dy.sum_dim(x, []), dy.DimensionError, r"nothing to reduce"),
    (lambda x: dy.mean_dim(x, [1], False, -2), ValueError, r"n: sizes must be 0 or more"),
    (lambda x: dy.sum_dim(x, ["a"]), TypeError, r"sum_dim"),
    (lambda x: dy.softmax(x, 3), dy.DimensionError, r"softmax: d=3"),
    (lambda x: dy.transpose(x), dy.DimensionError, r"transpose: dims=\[1, 0\] has 2 dimensions"),
    (lambda x: dy.transpose(x, [0, 0, 1]), dy.DimensionError, r"not a permutation"),
    (lambda x: dy.transpose(x, [0, 1, 2, 3, 4]), dy.DimensionError, r"not a permutation"),
    (lambda x: dy.transpose(x, [0, 1.5, 2]), TypeError, r"transpose"),
    (lambda x: dy.concatenate([x, x], 4), dy.DimensionError, r"concatenate: d=4"),
    (lambda x: dy.concatenate([x, dy.zeros((2, 2, 2))], 0), dy.DimensionError, r"concatenate\(d=0\)"),
    (lambda x: dy.concatenate([x, dy.zeros((2, 3))], 1), dy.DimensionError, r"concatenate\(d=1\)"),
    (lambda x: dy.concatenate([x, dy.zeros((2, 3, 2), batch_size=2)], 0).dim() and
     dy.concatenate([dy.zeros(2, batch_size=2), dy.zeros(2, batch_size=3)]),
     dy.DimensionError, r"concatenate: batch sizes 2 and 3"),
])
def test_reduction_errors(call, exc, match):
    dy.renew_cg()
    with pytest.raises(exc, match=match):
        call(dy.inputTensor(np.ones((2, 3, 2))))


def test_reductions_as_dynet():
    """Values and dims read off DyNet for x = [[1, 2, 3], [4, 5, 6]]."""
    dy.renew_cg()
    x = dy.inputTensor(np.arange(1.0, 7.0).reshape(2, 3))
    assert dy.sum_dim(x, [0]).value() == [5, 7, 9]
    assert dy.mean_dim(x, [1], False).value() == [2, 5]
    assert dy.mean_dim(x, [1], False, 6).value() == [1, 2.5]
    assert dy.sum_dim(x, [0, 1]).dim() == ((1,), 1)
    assert dy.sum_dim(dy.inputTensor(np.ones((2, 1, 1))), [0]).dim() == ((1, 1), 1)
    xb = dy.inputTensor(np.ones((2, 3, 2)), batched=True)
    assert dy.sum_dim(xb, [1]).dim() == ((2,), 2)
    assert dy.sum_dim(xb, [1], True).dim() == ((2,), 1)
    assert dy.sum_dim(xb, [], True).dim() == ((2, 3), 1)
    assert dy.max_dim(dy.inputTensor(np.ones((2, 3, 4))), 1).dim() == ((2, 4), 1)
