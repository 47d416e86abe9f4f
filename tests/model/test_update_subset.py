"""Trainer.update_subset's indices: ints (numpy's too) into the model's lists, as the
indices of the ops are; anything else is refused before anything changes.

DyNet 2.2 (measured with dynet38): strings and None are a TypeError there too; floats
are truncated ([0.9] is parameter 0) and bools read as 0 and 1, both refused here (as
select_rows([1.0]) is); DyNet's update_subset then changes nothing at all, so it never
checks the range (docs/dynet.md)."""
import numpy as np
import pytest

import autobatch as dy


def model_with_gradients():
    pc = dy.ParameterCollection()
    W, U = pc.add_parameters(2, init=1.0), pc.add_parameters(2, init=1.0)
    E = pc.add_lookup_parameters((3, 2), init=1.0)
    dy.renew_cg()
    dy.sum_elems(W + U + E[1]).backward()
    return pc, dy.SimpleSGDTrainer(pc, 0.1)


def snapshot(pc):
    ps = pc.parameters_list() + pc.lookup_parameters_list()
    return [p.as_array().copy() for p in ps] + [p.grad_as_array().copy() for p in ps]


def assert_unchanged(pc, before):
    """Every value and gradient of pc as in `before` (a snapshot)."""
    for got, want in zip(snapshot(pc), before):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("params, lookups", [
    ([0.9], []), ([1.0], []), ([np.float64(0.0)], []), (np.array([0.0]), []),
    (["1"], []), ("01", []), ("", []), (b"\x00", []),
    ([True], []), ([False], []), ([np.bool_(True)], []), (np.array([True]), []),
    ([None], []), (None, []), (1, []),
    ([0], [0.0]), ([0], ["0"]), ([0], [True]),
], ids=repr)
def test_indices_that_are_not_ints_are_refused_and_change_nothing(params, lookups):
    pc, tr = model_with_gradients()
    before = snapshot(pc)
    with pytest.raises(TypeError, match="update_subset: updated_(params|lookups) must be a list of ints"):
        tr.update_subset(params, lookups)
    assert_unchanged(pc, before)
    assert tr.updates == 0


@pytest.mark.parametrize("params, lookups", [([-1], []), ([2], []), ([0], [1]), ([2 ** 40], [])])
def test_indices_out_of_range_are_refused_and_change_nothing(params, lookups):
    pc, tr = model_with_gradients()
    before = snapshot(pc)
    with pytest.raises(IndexError, match="out of range"):
        tr.update_subset(params, lookups)
    assert_unchanged(pc, before)


@pytest.mark.parametrize("params", [[1], (1,), [np.int64(1)], [np.int32(1)], np.array([1]), range(1, 2), [1, 1]],
                         ids=repr)
def test_int_indices_of_every_kind_update_the_listed_parameter(params):
    pc, tr = model_with_gradients()
    W, U = pc.parameters_list()
    tr.update_subset(params, [])
    np.testing.assert_allclose(W.as_array(), [1, 1])
    np.testing.assert_allclose(U.as_array(), [0.9, 0.9])        # stepped once, also when listed twice
