"""Bad arguments are refused with the error a user expects: a float where an int is
required is a TypeError (never truncated; a size may be a whole-number float), a NaN, infinite or out-of-range
hyperparameter a ValueError; nothing is created by the call that failed."""
import math

import pytest

import autobatch as dy

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize("make", [
    lambda pc: pc.add_parameters((3.5, 2)),
    lambda pc: pc.add_parameters((True, 2)),
    lambda pc: pc.add_parameters(2.5),
    lambda pc: pc.add_lookup_parameters((10, 2.5)),
    lambda pc: pc.add_lookup_parameters(10.5),
    lambda pc: pc.add_parameters((NAN, 2)),
], ids=["float", "bool", "float-scalar", "lookup-float", "lookup-float-scalar", "nan"])
def test_sizes_that_are_not_whole_numbers_are_type_errors(make):
    # (a float that is a whole number, 3.0, is a size: tests/api/test_size_arguments.py)
    pc = dy.ParameterCollection()
    with pytest.raises(TypeError, match="sizes must be (ints|whole numbers)"):
        make(pc)
    assert pc.parameters_list() == [] and pc.lookup_parameters_list() == []


@pytest.mark.parametrize("make", [
    lambda pc: dy.SimpleSGDTrainer(pc, NAN),
    lambda pc: dy.SimpleSGDTrainer(pc, -0.1),
    lambda pc: dy.SimpleSGDTrainer(pc, INF),
    lambda pc: dy.MomentumSGDTrainer(pc, 0.1, mom=1.5),
    lambda pc: dy.AdagradTrainer(pc, 0.1, eps=0.0),
    lambda pc: dy.AdadeltaTrainer(pc, rho=NAN),
    lambda pc: dy.RMSPropTrainer(pc, eps=-1e-8),
    lambda pc: dy.AdamTrainer(pc, beta_1=1.0),
    lambda pc: dy.AdamTrainer(pc, beta_2=NAN),
    lambda pc: dy.CyclicalSGDTrainer(pc, 0.1, 0.01),
    lambda pc: dy.SimpleSGDTrainer(pc).set_learning_rate(NAN),
    lambda pc: dy.SimpleSGDTrainer(pc).set_clip_threshold(NAN),
])
def test_bad_trainer_hyperparameters_are_value_errors(make):
    pc = dy.ParameterCollection()
    pc.add_parameters(2)
    with pytest.raises(ValueError, match="finite number"):
        make(pc)


@pytest.mark.parametrize("make", [
    lambda x: dy.noise(x, NAN),
    lambda x: dy.noise(x, INF),
    lambda x: dy.noise(x, -1.0),
    lambda x: dy.dropout(x, NAN),
    lambda x: dy.elu(x, NAN),
    lambda x: dy.silu(x, beta=INF),
    lambda x: dy.scale_gradient(x, NAN),
    lambda x: dy.hinge(x, 0, NAN),
    lambda x: dy.lstm_gates(dy.concatenate([x, x, x]), 2, NAN),
])
def test_bad_op_hyperparameters_are_value_errors(make):
    dy.renew_cg()
    x = dy.inputVector([1.0, 2.0])
    n = dy.cg().num_nodes
    with pytest.raises(ValueError):
        make(x)
    assert dy.cg().num_nodes <= n + 1        # at most the concatenate of the last case
    assert x.value() == [1.0, 2.0]


class RenewingIndex:
    """An index whose __index__ renews the graph and builds another one."""

    def __index__(self):
        dy.renew_cg()
        for _ in range(10):
            dy.inputVector([1.0, 2.0, 3.0])
        return 1


@pytest.mark.parametrize("make", [
    lambda x, lp: dy.pick(x, RenewingIndex()),
    lambda x, lp: dy.pickneglogsoftmax(x, [RenewingIndex()]),
    lambda x, lp: dy.pick_range(x, RenewingIndex(), 2),
    lambda x, lp: dy.lookup_batch(lp, [0, RenewingIndex()]),
    lambda x, lp: dy.max_dim(x, RenewingIndex()),
    lambda x, lp: x[RenewingIndex()],
], ids=["pick", "picknls", "pick_range", "lookup_batch", "max_dim", "getitem"])
def test_an_index_that_changes_the_graph_is_refused(make):
    pc = dy.ParameterCollection()
    lp = pc.add_lookup_parameters((4, 3))
    dy.renew_cg()
    x = dy.inputVector([1.0, 5.0, 3.0])
    with pytest.raises(RuntimeError, match="changed the computation graph"):
        make(x, lp)
    dy.renew_cg()
    assert dy.pick(dy.inputVector([1.0, 5.0, 3.0]), 1).value() == 5.0


def test_a_lookup_table_too_large_for_one_array_is_refused_before_allocating():
    # rows x dim = 65536 x 65537 overflows a C int; it once wrapped around
    pc = dy.ParameterCollection()
    with pytest.raises(dy.DimensionError, match="2\\^31"):
        pc.add_lookup_parameters((65536, 65537))
    assert pc.lookup_parameters_list() == []
