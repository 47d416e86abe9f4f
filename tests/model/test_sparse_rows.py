"""Which lookup rows a sparse update touches, as DyNet decides it: a backward
marks the rows of every trainable lookup made up to the node it starts from, on the
loss's path or not; lookups made after it, dropped by cg_revert or in a graph without
backward are not marked. Values checked against DyNet 2.2 (fixture:
tests/data/make_sparse_rows_fixture.py, cases in tests/data/sparse_rows_cases.py)."""
import json
import os
import sys

import numpy as np
import pytest

import autobatch as dy

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
sys.path.insert(0, HERE)
from sparse_rows_cases import CASES, TRAINERS, make_model, run  # noqa: E402

with open(os.path.join(HERE, "sparse_rows_dynet.json")) as _f:
    FIXTURE = json.load(_f)
WEIGHT_DECAYS = {"none": None, "0.1": 0.1}


def _check(got, want):
    for step, (g, w) in enumerate(zip(got, want)):
        for key in ("E", "F", "W"):
            np.testing.assert_allclose(g[key], w[key], rtol=1e-5, atol=1e-6,
                                       err_msg=f"step {step}, {key}")
    assert len(got) == len(want)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("trainer", sorted(TRAINERS))
@pytest.mark.parametrize("wd", sorted(WEIGHT_DECAYS))
def test_values_match_dynet(case, trainer, wd):
    _check(run(dy, case, trainer, WEIGHT_DECAYS[wd]), FIXTURE[f"{case}/{trainer}/{wd}"])


# deliberately a subset of the built-in strategies (not the shared `strategy` fixture of
# tests/conftest.py): which rows are marked must not depend on
# the schedule; the reference and two batching schedules show it
@pytest.mark.parametrize("strategy", ["none", "depth", "agenda"])
def test_marks_do_not_depend_on_the_strategy(strategy):
    before = dy.default_strategy()
    dy.set_default_strategy(strategy)
    try:
        _check(run(dy, "off_path", "adam"), FIXTURE["off_path/adam/none"])
    finally:
        dy.set_default_strategy(before)


def test_the_fixture_shows_the_rule():
    """What the fixture must show for these tests to mean anything: a row off the
    loss's path moves under momentum; a row looked up after the loss does not."""
    steps = FIXTURE["off_path/momentum/none"]
    before, after = np.array(steps[0]["E"]), np.array(steps[1]["E"])
    assert (before[2] != after[2]).all()          # off the path, before the loss
    assert (before[5] != after[5]).all()          # under nobackprop
    np.testing.assert_array_equal(before[6], after[6])    # after the loss
    np.testing.assert_array_equal(before[7], after[7])    # not looked up


def test_rows_are_marked_by_backward_not_by_lookup():
    pc, E, F, W = make_model(dy)
    dy.renew_cg()
    a, b = E[1], dy.lookup_batch(E, [2, 3])
    dy.lookup(E, 4, update=False)
    assert E.used_rows().size == 0                # looking up marks nothing
    loss = dy.sum_elems(a)
    E[5]                                          # made after the loss
    loss.value()
    assert E.used_rows().size == 0                # nor does forward
    loss.backward()
    assert E.used_rows().tolist() == [1, 2, 3]    # off the path too (b), not 4 or 5
    assert F.used_rows().size == 0
    dy.renew_cg()
    assert E.used_rows().tolist() == [1, 2, 3]    # kept until an update uses them


def test_a_later_backward_marks_more():
    pc, E, F, W = make_model(dy)
    dy.renew_cg()
    first = dy.sum_elems(E[0])
    E[1]
    second = dy.sum_elems(E[2])
    first.backward()
    assert E.used_rows().tolist() == [0]
    second.backward()
    assert E.used_rows().tolist() == [0, 1, 2]


def test_cg_revert_forgets_the_marks_of_dropped_lookups():
    pc, E, F, W = make_model(dy)
    dy.renew_cg()
    y = E[0]
    dy.cg_checkpoint()
    E[3]
    dy.lookup_batch(E, [4, 5])
    dy.parameter(F)
    dy.cg_revert()
    z = E[6]
    dy.sum_elems(y + z).backward()
    assert E.used_rows().tolist() == [0, 6]
    assert F.used_rows().size == 0


def test_update_without_backward_moves_no_row():
    pc, E, F, W = make_model(dy)
    tr = dy.MomentumSGDTrainer(pc, 0.1, 0.9)
    dy.renew_cg()
    dy.squared_norm(E[0]).backward()
    tr.update()
    mid = E.as_array()
    dy.renew_cg()
    dy.squared_norm(E[0]).value()             # looked up, no backward
    tr.update()
    np.testing.assert_array_equal(E.as_array(), mid)
    m = tr._states(E)[0]
    assert np.flatnonzero(m.any(axis=1)).tolist() == [0]


def test_update_subset_uses_and_keeps_the_marks():
    """update_subset updates the marked rows of the listed tables (also a zero-gradient
    one) and keeps the marks of the others for their own update."""
    pc, E, F, W = make_model(dy)
    tr = dy.MomentumSGDTrainer(pc, 0.1, 0.9)
    dy.renew_cg()
    (dy.sum_elems(E[0] + E[1]) + dy.sum_elems(F[2])).backward()
    tr.update()                                   # rows 0, 1 of E and 2 of F get momentum
    dy.renew_cg()
    E[1]                                          # off the path: gradient 0, marked
    (dy.sum_elems(E[0]) + dy.sum_elems(F[2])).backward()
    before_e, before_f = E.as_array(), F.as_array()
    tr.update_subset([], [0])                     # E only
    after_e = E.as_array()
    assert (after_e[1] != before_e[1]).all()      # momentum moved the zero-gradient row
    assert (after_e[0] != before_e[0]).all()
    np.testing.assert_array_equal(after_e[2:], before_e[2:])
    np.testing.assert_array_equal(F.as_array(), before_f)
    assert E.used_rows().size == 0 and F.used_rows().tolist() == [2]
    tr.update_subset([], [1])
    assert (F.as_array()[2] != before_f[2]).all() and F.used_rows().size == 0


def test_set_moves_the_mark_to_the_new_row():
    """set() of a lookup or lookup_batch: the next backward marks the new rows only
    (DyNet 2.2 does the same: with momentum, only rows 0 and 3 move here)."""
    pc, E, F, W = make_model(dy)
    dy.renew_cg()
    x, b = dy.lookup(E, 1), dy.lookup_batch(E, [2])
    loss = dy.sum_elems(x) + dy.sum_batches(dy.sum_elems(b))
    loss.value()
    x.set(0)
    b.set([3])
    loss.backward()
    assert E.used_rows().tolist() == [0, 3]
