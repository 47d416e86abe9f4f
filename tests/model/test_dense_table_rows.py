"""A dense update of a lookup table reads the gradient of the marked rows only, when
nothing but backward wrote it (backward marks every row it adds into): the other rows
go through each rule's loop on a known +0 gradient (model/update_rules.h), which must
give the numbers of the whole pass bit for bit, and the table must say when its
gradient may be nonzero off the marks (`_grad_off_marks`: written from Python, loaded,
marks cleared with the gradient kept)."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.model import update_rules as _update
from autobatch.runtime import param_buffers

from test_update_bits import (CLIP_DECAY, TRAINERS, arrays, assert_same_bits, hyper,
                              level)  # noqa: F401  (level: a fixture)

MASK = np.array([1, 0, 0, 1, 1, 0, 1, 0, 0, 0], dtype=np.uint8)


class Table:
    """What a Slot's owner tells the step: whether the gradient may be nonzero off the
    marked rows."""
    def __init__(self, off_marks):
        self._grad_off_marks = off_marks


def table_step(name, row_size, scale, keep, off_marks, grad_fill):
    """One dense step (in place) of a 10-row table whose marked rows have a gradient and
    whose other rows hold `grad_fill`; returns (values, states, gradient, the owner).
    (Out of place, into the other buffer: training, below, where a live graph read
    the values.)"""
    n_rows = MASK.size
    buf = param_buffers.ValueBuffers(n_rows * row_size)
    theta, grad, states = arrays(name, n_rows * row_size, seed=row_size + 3)
    buf.current[...] = theta
    shaped = [a.reshape(n_rows, row_size) for a in [grad] + states]
    shaped[0][MASK == 0] = grad_fill
    owner = Table(off_marks)
    sl = _update.Slot(buf, shaped[0], shaped[1:], MASK.copy(), row_size, owner=owner)
    _update.step(None, _update.RULES[name], [sl], [], [], [], 0, None, **hyper(name, scale, keep))
    return buf.current.copy(), [s.copy() for s in states], shaped[0], owner


@pytest.mark.parametrize("scale,keep", CLIP_DECAY, ids=["plain", "clip", "decay", "clip+decay"])
@pytest.mark.parametrize("row_size", [1, 7, 16, 33, 128])
@pytest.mark.parametrize("name", list(TRAINERS))
def test_rows_off_the_marks_step_as_in_the_whole_pass(name, row_size, scale, keep, level):
    want, want_states, _, _ = table_step(name, row_size, scale, keep, True, 0.0)
    # a NaN where the gradient is known +0: read, it would spread into the values
    got, got_states, grad, owner = table_step(name, row_size, scale, keep, False, np.nan)
    assert_same_bits(got, want)
    for s, w in zip(got_states, want_states):
        assert_same_bits(s, w)
    assert not grad[MASK == 1].any()
    assert np.isnan(grad[MASK == 0]).all()          # neither read nor zeroed
    assert owner._grad_off_marks is False


def test_a_table_whose_gradient_may_be_off_the_marks_reads_every_row():
    got, _, grad, owner = table_step("sgd", 4, 1.0, 1.0, True, 0.5)
    want, _, _, _ = table_step("sgd", 4, 1.0, 1.0, True, 0.0)
    assert not np.array_equal(got, want)            # the unmarked rows' 0.5 was applied
    assert not grad.any() and owner._grad_off_marks is False


@pytest.mark.parametrize("n_rows,row_size", [(10, 1), (10, 7), (10, 16), (9, 13), (5, 128)])
def test_clipping_norm_over_the_marked_rows_is_the_whole_sum(n_rows, row_size, level):
    rng = np.random.default_rng(row_size)
    mask = (rng.random(n_rows) < 0.5).astype(np.uint8)
    mask[-1] = 1                                     # the tail of the whole sum too
    grad = (rng.normal(size=(n_rows, row_size)) * 3).astype(np.float32)
    grad[mask == 0] = 0
    buf = param_buffers.ValueBuffers(n_rows * row_size)
    whole = _update.Slot(buf, grad, [], mask, row_size, owner=Table(True))
    rows = _update.Slot(buf, grad, [], mask, row_size, owner=Table(False))
    assert _update.squared_norm([rows], []) == _update.squared_norm([whole], []) \
        == _update.sum_of_squares(grad.reshape(-1))


def model(seed=3):
    pc = dy.ParameterCollection()
    E = pc.add_lookup_parameters((50, 8), init=dy.NormalInitializer(0, 1))
    W = pc.add_parameters((3, 8))
    rng = np.random.default_rng(seed)
    E.set_value(rng.normal(size=(50, 8)).astype(np.float32))
    W.set_value(rng.normal(size=(3, 8)).astype(np.float32))
    return pc, E, W


def train(force_whole_pass, name, steps=4, clip=0.5, decay=0.0):
    """A few steps of a model with a table; the graph is live at each update, so the
    table steps into its other buffer (out of place)."""
    pc, E, W = model()
    if decay:
        pc.set_weight_decay(decay)
    cls, kw = TRAINERS[name]
    tr = cls(pc, **kw)
    tr.set_clip_threshold(clip)
    tr.set_sparse_updates(False)
    for step in range(steps):
        dy.renew_cg()
        loss = dy.esum([dy.pickneglogsoftmax(W * dy.tanh(E[(7 * step + k) % 50]), k % 3)
                        for k in range(5)])
        loss.backward()
        if force_whole_pass:
            E._grad_off_marks = True
        else:
            assert E._grad_off_marks is False        # backward alone wrote the gradient
        tr.update()
    return E.as_array(), W.as_array()


@pytest.mark.parametrize("clip,decay", [(0.5, 0.0), (-1.0, 0.01)], ids=["clip", "decay"])
@pytest.mark.parametrize("name", list(TRAINERS))
def test_training_reads_the_marked_rows_and_gets_the_whole_pass_numbers(name, clip, decay,
                                                                        level):
    for got, want in zip(train(False, name, clip=clip, decay=decay),
                         train(True, name, clip=clip, decay=decay)):
        assert_same_bits(got, want)


def test_what_marks_a_table_gradient_as_written_off_the_marks():
    pc, E, W = model()
    tr = dy.SimpleSGDTrainer(pc, 0.1)
    tr.set_sparse_updates(False)
    assert E._grad_off_marks is False
    E.grad[3, 0] = 1.0                                 # through the writable view
    assert E._grad_off_marks is True
    tr.update()                                        # the whole pass applies and zeroes it
    assert E._grad_off_marks is False and not E.grad_as_array().any()
    E.scale_gradient(2.0)
    assert E._grad_off_marks is False
    with np.errstate(invalid="ignore"):
        E.scale_gradient(float("inf"))
    assert E._grad_off_marks is True
    pc.reset_gradient()
    assert E._grad_off_marks is False
    E.clear_used()
    assert E._grad_off_marks is True
    tr.update()
    dy.renew_cg()
    dy.sum_elems(E[4]).backward()
    E.set_updated(False)                               # its marks are cleared, gradient kept
    tr.update()
    assert E._grad_off_marks is True and E.grad_as_array()[4].any()
    E.set_updated(True)
    before = E.as_array()
    tr.update()                                        # the kept row is applied now
    assert not np.array_equal(E.as_array()[4], before[4])
    assert not E.grad_as_array().any() and E._grad_off_marks is False


def test_a_gradient_loaded_from_a_dynet_file_counts_as_written_off_the_marks(tmp_path):
    pc, E, W = model()
    dy.renew_cg()
    dy.sum_elems(E[2]).backward()
    path = str(tmp_path / "m.txt")
    pc.save(path, format="dynet")
    pc2, E2, W2 = model(seed=4)
    pc2.populate(path)
    assert E2.grad_as_array()[2].any() and E2._grad_off_marks is True
    values = E2.as_array()
    tr = dy.SimpleSGDTrainer(pc2, 0.5)
    tr.set_sparse_updates(False)
    tr.update()
    assert not np.array_equal(E2.as_array()[2], values[2])
