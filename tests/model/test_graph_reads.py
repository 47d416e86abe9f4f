"""Parameters read by a graph: its nodes keep the values of when they were computed,
as DyNet's (a parameter node copies the parameter, a lookup its row). After value(),
set_value, init_row, scale, zero, clip_inplace or trainer.update() change neither that
graph's backward nor the nodes made later on the computed ones; a new lookup and a
recalculation read the new values. Numbers checked against DyNet 2.2 (fixture:
tests/data/make_graph_reads_fixture.py, cases in tests/data/graph_reads_cases.py), for
every trainer, sparse and dense lookup updates, with and without weight decay, under
every strategy; and without a copy of the parameters per step."""
import json
import os
import sys

import numpy as np
import pytest

import autobatch as dy

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
sys.path.insert(0, HERE)
import graph_reads_cases as cases

with open(os.path.join(HERE, "graph_reads_dynet.json")) as _f:
    FIXTURE = json.load(_f)


def _check(got, want, where=""):
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for k in want:
            _check(got[k], want[k], f"{where}/{k}")
    elif isinstance(want, list) and want and isinstance(want[0], dict):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _check(g, w, f"{where}[{i}]")
    else:   # (Adam's float32 rounding differs from DyNet's in the last digits)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=where)


@pytest.fixture(autouse=True)
def _default_strategy(strategy):
    before = dy.default_strategy()
    dy.set_default_strategy(strategy)
    yield
    dy.set_default_strategy(before)


def test_the_issue_example_matches_dynet():
    got = cases._matvec(dy)
    assert got["grad_X"] == [2.0, 4.0] and got["later"] == 3.0 and got["recalculated"] == 666.0
    _check(got, FIXTURE["matvec"])


def test_mutators_after_a_forward_match_dynet():
    _check(cases._mutators(dy), FIXTURE["mutators"])


def test_a_forward_reads_the_lookups_made_before_it():
    _check(cases._two_graphs_read(dy), FIXTURE["pending"])


@pytest.mark.parametrize("decay", [0.0, 0.1])
@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "dense"])
@pytest.mark.parametrize("trainer", list(cases.TRAINERS))
def test_repeated_backward_and_update_on_one_graph_match_dynet(trainer, sparse, decay):
    _check(cases._repeated(dy, trainer, sparse, decay),
           FIXTURE[f"repeated/{trainer}/{int(sparse)}/{decay}"])


def _address(p):
    return p._buf.current.ctypes.data


@pytest.mark.parametrize("trainer", list(cases.TRAINERS))
def test_the_training_loop_alternates_two_buffers_and_gives_the_same_numbers(trainer):
    """forward, backward, update, renew: the step writes into the second buffer (the
    graph still reads the first), never a new one; the numbers are bit for bit those
    of the same steps with the graph renewed before each update (in place)."""
    runs = []
    for renew_first in (False, True):
        pc = dy.ParameterCollection(seed=2)
        W, b = pc.add_parameters((6, 4)), pc.add_parameters(6)
        E = pc.add_lookup_parameters((10, 4))
        pc.set_weight_decay(0.01)
        tr = cases.TRAINERS[trainer](dy, pc)
        seen = set()
        for step in range(6):
            dy.renew_cg()
            loss = dy.sum_elems(dy.square(dy.tanh(W * (E[step] + E[step + 2]) + b)))
            loss.value()
            loss.backward()
            if renew_first:
                dy.renew_cg()
                assert not W._buf.is_read()
            else:
                assert W._buf.is_read()
            tr.update()
            seen.add(_address(W))
        assert len(seen) == (1 if renew_first else 2)
        runs.append([W.as_array(), b.as_array(), E.as_array()])
    for out_of_place, in_place in zip(*runs):
        np.testing.assert_array_equal(out_of_place, in_place)


def test_a_table_read_by_lookups_is_stepped_in_place():
    """Lookups copy their rows, so a sparse step never copies the table."""
    pc = dy.ParameterCollection(seed=2)
    E = pc.add_lookup_parameters((1000, 8))
    tr = dy.AdamTrainer(pc)
    at = _address(E)
    for step in range(3):
        dy.renew_cg()
        loss = dy.sum_elems(dy.square(E[step] + dy.lookup_batch(E, [5, 7]) * 2.0))
        loss.value()
        loss.backward()
        tr.update()
        assert not E._buf.is_read() and _address(E) == at


def test_a_whole_table_expression_keeps_the_table_it_read():
    pc = dy.ParameterCollection(seed=2)
    E = pc.add_lookup_parameters((5, 3))
    tr = dy.SimpleSGDTrainer(pc, 0.25)
    tr.set_clip_threshold(0)
    dy.renew_cg()
    whole = dy.parameter(E)
    before = whole.npvalue()
    at = _address(E)
    dy.sum_elems(dy.square(whole)).backward()
    assert E._buf.is_read()
    tr.update()                 # a sparse step of every row: the table is copied first
    assert _address(E) != at and not E._buf.is_read()
    np.testing.assert_array_equal((whole * 1.0).npvalue(), before)
    np.testing.assert_allclose(E.as_array(), before.T * 0.5, rtol=1e-6)    # x - 0.25 * 2x


def test_values_views_and_flat_writes_copy_only_what_a_graph_read():
    pc = dy.ParameterCollection(seed=2)
    W = pc.add_parameters((3, 3))
    W0 = W.as_array()
    dy.renew_cg()
    y = W * dy.inputVector([1.0, 2.0, 3.0])
    y.value()
    W.values[0, 0] = 100.0              # through the view: the graph keeps W0
    np.testing.assert_allclose((y * 1.0).npvalue(), W0 @ [1.0, 2.0, 3.0], rtol=1e-6)
    assert W.as_array()[0, 0] == 100.0
    dy.renew_cg()
    at = _address(W)
    W.values[0, 0] = 5.0                # no graph reads it: in place
    assert _address(W) == at and W.as_array()[0, 0] == 5.0


def test_a_new_graph_after_renew_reads_the_stepped_values():
    pc = dy.ParameterCollection(seed=2)
    W = pc.add_parameters((2, 2))
    tr = dy.SimpleSGDTrainer(pc, 0.1)
    dy.renew_cg()
    loss = dy.sum_elems(W * dy.inputVector([1.0, 1.0]))
    loss.value()
    loss.backward()
    tr.update()
    stepped = W.as_array()
    dy.renew_cg()
    np.testing.assert_array_equal(dy.parameter(W).npvalue(), stepped)


def test_a_reverted_graph_reads_parameters_again():
    pc = dy.ParameterCollection(seed=2)
    E = pc.add_lookup_parameters((4, 2))
    dy.renew_cg()
    kept = dy.lookup(E, 0)
    kept.value()
    dy.cg_checkpoint()
    dropped = dy.lookup(E, 1)
    dropped.value()
    dy.cg_revert()
    E.init_row(1, [7.0, 8.0])
    np.testing.assert_array_equal(dy.lookup(E, 1).npvalue(), [7.0, 8.0])
    np.testing.assert_array_equal(kept.npvalue(), E.row_as_array(0))
