"""DyNet's selections, sparse softmaxes, linear algebra and tensor ops: values and gradients against DyNet's (tests/data/dynet_ops_select_linalg.npz, made by
tests/data/make_dynet_ops_select_linalg_fixture.py with DyNet 2.2), DyNet's edge cases, clear
errors for bad input, and batching of nodes whose per-node data differ. Values,
gradients and batched == unbatched for every op are in op_cases_select.py and
op_cases_linalg.py."""
import os
import sys

import numpy as np
import pytest

import autobatch as dy

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # tests/
sys.path.insert(0, os.path.join(HERE, "data"))
from dynet_ops_select_linalg_cases import CASES, check_case  # noqa: E402

FIXTURE = np.load(os.path.join(HERE, "data", "dynet_ops_select_linalg.npz"))


@pytest.mark.parametrize("name,specs,build", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_dynet(name, specs, build):
    check_case(dy, FIXTURE, name, specs, build)


def value(e):
    return e.npvalue()


def test_dynet_edge_cases():
    dy.renew_cg()
    # kmax_pooling: ties go to the earliest, in order
    x = dy.inputTensor([[1.0, 1.0, 1.0, 1.0], [9.0, 2.0, 9.0, 9.0]])
    np.testing.assert_array_equal(value(dy.kmax_pooling(x, 2)), [[1.0, 1.0], [9.0, 9.0]])
    # a singular matrix: inverse NaN, logdet -inf; a negative determinant: NaN (as DyNet)
    assert np.isnan(value(dy.inverse(dy.inputTensor(np.ones((3, 3)))))).all()
    assert value(dy.logdet(dy.inputTensor(np.ones((3, 3))))) == -np.inf
    assert np.isnan(value(dy.logdet(dy.inputTensor([[0.0, 1.0], [1.0, 0.0]]))))
    # shapes DyNet gives: (R/n, 1) for a vector, (F, 1) for one output column
    assert dy.fold_rows(dy.inputTensor(np.arange(6.0)), 3).dim() == ((2, 1), 1)
    assert dy.filter1d_narrow(dy.inputTensor(np.ones((2, 3))), dy.inputTensor(np.ones((2, 3)))).dim() \
        == ((1, 1), 1)
    assert dy.contract3d_1d(dy.inputTensor(np.ones((2, 1, 3))), dy.inputTensor(np.ones(3))).dim() \
        == ((2, 1), 1)
    # one_hot: a list makes a batch
    h = dy.one_hot(4, [1, 3])
    assert h.dim() == ((4,), 2)
    np.testing.assert_array_equal(value(h), [[0, 0], [1, 0], [0, 0], [0, 1]])
    np.testing.assert_array_equal(value(dy.one_hot(3, 2)), [0, 0, 1])


@pytest.mark.parametrize("k,grad", [
    (1, [[0, 1, 0, 0, 0], [1, 0, 0, 0, 0]]),
    (2, [[0, 1, 1, 0, 0], [1, 1, 0, 0, 0]]),
])
def test_kmax_ties_gradient_as_dynet(k, grad):
    """DyNet 2.2's gradients (read off dynet38): ties go to the earliest positions."""
    dy.renew_cg()
    x = dy.inputTensor(np.array([[1.0, 3, 3, 2, 3], [5, 5, 0, 5, 1]]))
    loss = dy.sum_elems(dy.kmax_pooling(x, k))
    loss.value()
    loss.backward(full=True)
    np.testing.assert_array_equal(x.gradient(), grad)


def test_singular_input_is_reported_under_check_validity():
    dy.renew_cg(check_validity=True)
    with pytest.raises(FloatingPointError, match="inverse"):
        dy.inverse(dy.inputTensor(np.ones((2, 2)))).value()


def _vec(n=4):
    return dy.inputTensor(np.arange(1.0, n + 1))


def _mat(r=3, c=4):
    return dy.inputTensor(np.arange(1.0, r * c + 1).reshape(r, c))


@pytest.mark.parametrize("build,error,match", [
    (lambda: dy.select_rows(_mat(), [3]), IndexError, "out of range"),
    (lambda: dy.select_rows(_mat(), []), ValueError, "empty"),
    (lambda: dy.select_rows(_mat(), 1), TypeError, "list of ints"),
    (lambda: dy.select_rows(_mat(), [0.5]), TypeError, "int"),
    (lambda: dy.select_cols(_vec(), [0]), dy.DimensionError, "matrix"),
    (lambda: dy.select_cols(_mat(), [-1]), IndexError, "out of range"),
    (lambda: dy.strided_select(_mat(), [0], [], []), ValueError, ">= 1"),
    (lambda: dy.strided_select(_mat(), [], [2], [1]), IndexError, "range"),
    (lambda: dy.strided_select(_mat(), [1, 1, 1, 1], [], []), dy.DimensionError, "entries"),
    (lambda: dy.strided_select(_mat(), [], [], [5]), IndexError, "range"),
    (lambda: dy.kmax_pooling(_mat(), 5), ValueError, "k=5"),
    (lambda: dy.kmax_pooling(_mat(), 0), ValueError, "k=0"),
    (lambda: dy.kmax_pooling(_vec(), 1), dy.DimensionError, "d=1"),
    (lambda: dy.fold_rows(_mat(3, 4)), dy.DimensionError, "nrows=2"),
    (lambda: dy.fold_rows(dy.inputTensor(np.ones((4, 2, 2)))), dy.DimensionError, "nrows"),
    (lambda: dy.fold_rows(_mat(4, 2), 0), dy.DimensionError, "nrows=0"),
    (lambda: dy.one_hot(4, 4), IndexError, "out of range"),
    (lambda: dy.one_hot(0, 0), dy.DimensionError, "1 or more"),
    (lambda: dy.one_hot(2**40, 0), dy.DimensionError, "larger than one node"),
    (lambda: dy.sparsemax(_mat()), dy.DimensionError, "vector"),
    (lambda: dy.constrained_softmax(_vec(4), _vec(3)), dy.DimensionError, "vector of 4"),
    (lambda: dy.inverse(_mat(3, 2)), dy.DimensionError, "square"),
    (lambda: dy.inverse(_vec(3)), dy.DimensionError, "square"),
    (lambda: dy.logdet(dy.inputTensor(np.ones((2, 2, 2)))), dy.DimensionError, "square"),
    (lambda: dy.trace_of_product(_mat(3, 2), _mat(2, 3)), dy.DimensionError, "do not match"),
    (lambda: dy.trace_of_product(dy.inputTensor(np.ones((2, 2, 2))), dy.inputTensor(np.ones((2, 2, 2)))),
     dy.DimensionError, "vectors or matrices"),
    (lambda: dy.kmh_ngram(_mat(), 5), dy.DimensionError, "v=5"),
    (lambda: dy.kmh_ngram(_vec(), 1), dy.DimensionError, "matrix"),
    (lambda: dy.filter1d_narrow(_mat(3, 4), _mat(2, 2)), dy.DimensionError, "filters"),
    (lambda: dy.filter1d_narrow(_mat(3, 2), _mat(3, 3)), dy.DimensionError, "W <= C"),
    (lambda: dy.circ_conv(_vec(4), _vec(3)), dy.DimensionError, "one size"),
    (lambda: dy.circ_corr(_mat(2, 2), _mat(2, 2)), dy.DimensionError, "vectors"),
    (lambda: dy.circ_conv(dy.inputTensor(np.ones((3, 2)), batched=True),
                          dy.inputTensor(np.ones((3, 3)), batched=True)), dy.DimensionError, "batch"),
    (lambda: dy.contract3d_1d(_mat(2, 3), _vec(3)), dy.DimensionError, "3-d"),
    (lambda: dy.contract3d_1d(dy.inputTensor(np.ones((2, 3, 4))), _vec(3)), dy.DimensionError, "of 4"),
    (lambda: dy.contract3d_1d_bias(dy.inputTensor(np.ones((2, 3, 4))), _vec(4), _vec(2)),
     dy.DimensionError, "bias"),
    (lambda: dy.contract3d_1d_1d(dy.inputTensor(np.ones((2, 3, 4))), _vec(4), _vec(2)),
     dy.DimensionError, "z must be a vector of 3"),
    (lambda: dy.contract3d_1d_1d_bias(dy.inputTensor(np.ones((2, 3, 4))), _vec(4), _vec(3), _mat(2, 2)),
     dy.DimensionError, "bias"),
])
def test_bad_input_is_a_clear_error(build, error, match):
    dy.renew_cg()
    with pytest.raises(error, match=match):
        build()


def test_nodes_with_other_rows_or_ranges_batch_and_keep_their_own():
    """The index lists and ranges are per node (not in the signature): select_rows
    nodes with other rows run as one batch, each reading its own rows."""
    pc = dy.ParameterCollection(seed=0)
    p = pc.add_parameters((4, 3))
    for strategy, one_batch in (("none", False), ("agenda", True)):
        dy.renew_cg(strategy=strategy)
        x = p.expr()
        outs = [dy.select_rows(x, [k, 3 - k]) for k in range(4)] + \
               [dy.strided_select(x, [2, 1], [k % 2, 0], [4, 3]) for k in range(4)]
        loss = dy.esum([dy.sum_elems(dy.cmult(o, o)) * (k + 1) for k, o in enumerate(outs)])
        loss.value()
        ids = {o.vindex for o in outs}
        sizes = sorted(len(ids.intersection(n)) for _, n in dy.cg().batches() if ids.intersection(n))
        assert sizes == ([4, 4] if one_batch else [1] * 8)
        a = p.as_array()
        for k, o in enumerate(outs[:4]):
            np.testing.assert_array_equal(o.npvalue(), a[[k, 3 - k]])
        for k, o in enumerate(outs[4:]):
            np.testing.assert_array_equal(o.npvalue(), a[k % 2::2])


def test_non_finite_values_never_crash():
    """NaN and infinities (made by sqrt(-1) and exp(200)) through forward and backward:
    kmax_pooling fills every output position (NaN compares false), the loops of
    sparsemax and constrained_softmax end, LAPACK gets NaN."""
    pc = dy.ParameterCollection(seed=0)
    p = pc.add_parameters((3, 6))
    q = pc.add_parameters((3, 3))
    odd = np.array([[-1.0, 1, 1, -1, 1, 1], [1, 1, 1, 1, 1, 1], [-1, -1, -1, -1, -1, -1]])
    for k in range(1, 7):
        dy.renew_cg()
        x = dy.cmult(p, dy.sqrt(dy.inputTensor(odd))) + dy.exp(dy.inputTensor(np.eye(3, 6) * 200))
        outs = [dy.kmax_pooling(x, k), dy.sparsemax(dy.pick(x, 0, 0)),
                dy.constrained_softmax(dy.pick(x, 0, 0), dy.pick(x, 2, 0)),
                dy.inverse(dy.cmult(q, dy.select_cols(x, [0, 1, 2]))),
                dy.logdet(dy.cmult(q, dy.select_cols(x, [3, 4, 5])))]
        loss = dy.esum([dy.sum_elems(o) for o in outs])
        loss.value()
        loss.backward()
        assert dy.kmax_pooling(x, k).dim() == ((3, k), 1)
