"""Training runs whose lookups are partly off the loss's path, for the sparse-update
fixture (make_sparse_rows_fixture.py, run with DyNet) and tests/model/test_sparse_rows.py
(run with autobatch): the same code, given `dy`, records the values after each update.

DyNet marks a row for the trainer's sparse update when backward calls accumulate_grad
on its lookup node: every lookup node made up to the node backward starts from, on the
loss's path or not (then with a zero gradient, so momentum and Adam still move it);
not a lookup made after that node, dropped by cg_revert, or in a graph without backward.
"""
import numpy as np

E_INIT = (np.arange(24, dtype=np.float64).reshape(8, 3) - 11.0) / 10.0
F_INIT = np.array([[0.5, -1.0], [1.5, 0.25], [-0.75, 2.0], [1.0, 1.0]])
W_INIT = np.array([0.3, -0.2, 0.1])


def make_model(dy):
    pc = dy.ParameterCollection()
    E = pc.lookup_parameters_from_numpy(E_INIT)
    F = pc.lookup_parameters_from_numpy(F_INIT)
    W = pc.parameters_from_numpy(W_INIT)
    return pc, E, F, W


def _loss(dy, W, exprs):
    return dy.squared_norm(dy.esum(exprs) + dy.parameter(W))


def _all_rows(dy, E, F, W):
    """A step that gives every row of E and F a gradient (so later ones have momentum)."""
    dy.renew_cg()
    f = dy.esum([dy.sum_elems(F[i]) for i in range(4)])
    (_loss(dy, W, [E[i] for i in range(8)]) + f * f).backward()


def off_path(dy, E, F, W, step):
    """On the path: rows 0..1 rotating; off the path before the loss: a lookup, a
    lookup_batch and F's rows; under nobackprop; after the loss: not marked."""
    dy.renew_cg()
    on = [E[(step + k) % 8] for k in (0, 1)]
    off = E[(step + 2) % 8]                                    # marked, gradient 0
    off_batch = dy.lookup_batch(E, [(step + 3) % 8, (step + 4) % 8])   # marked, gradient 0
    dy.lookup(F, step % 4)                                     # marked: another table
    held = dy.nobackprop(E[(step + 5) % 8])                    # marked, gradient 0
    loss = _loss(dy, W, on + [held])
    E[(step + 6) % 8]                                          # after the loss: not marked
    loss.backward()
    return off, off_batch


def two_backwards(dy, E, F, W, step):
    """Two graphs' backwards before one update; in the second graph two backwards, the
    first from a loss made before the lookup of the second."""
    dy.renew_cg()
    _loss(dy, W, [E[step % 8]]).backward()
    dy.renew_cg()
    first = dy.sum_elems(E[(step + 1) % 8] * 2.0)
    second = _loss(dy, W, [E[(step + 2) % 8]])                 # after `first`
    first.backward()
    second.backward()
    dy.renew_cg()
    early = dy.sum_elems(E[(step + 3) % 8])
    E[(step + 4) % 8]                                          # after `early`: not marked
    early.backward()


def no_backward(dy, E, F, W, step):
    """Lookups in graphs that never run backward: only the dense W moves (step 0), or
    the rows of the graph that does (step 1); a cg_revert drops its lookups (step 2)."""
    if step == 0:
        dy.renew_cg()
        _loss(dy, W, [E[1], E[2], E[3]]).value()
    elif step == 1:
        dy.renew_cg()
        _loss(dy, W, [E[4]]).value()
        dy.renew_cg()
        _loss(dy, W, [E[5]]).backward()
    else:
        dy.renew_cg()
        y = E[6]
        y.value()
        dy.cg_checkpoint()
        E[7]
        dy.lookup_batch(E, [0, 1])
        dy.lookup(F, 2)
        dy.cg_revert()
        _loss(dy, W, [y]).backward()


def whole_table(dy, E, F, W, step):
    """F as one parameter expression under nobackprop: every row of F is marked (DyNet:
    all_updated). (A whole-table expression that no node uses is undefined behaviour
    in DyNet 2.2: its update crashed or did nothing; autobatch marks every row.)"""
    dy.renew_cg()
    held = dy.sum_elems(dy.nobackprop(dy.parameter(F)))
    (_loss(dy, W, [E[step % 8]]) + held).backward()


CASES = {"off_path": (off_path, 4), "two_backwards": (two_backwards, 3),
         "no_backward": (no_backward, 3), "whole_table": (whole_table, 3)}
TRAINERS = {"momentum": lambda dy, pc: dy.MomentumSGDTrainer(pc, 0.1, 0.9),
            "adam": lambda dy, pc: dy.AdamTrainer(pc, 0.05)}


def snapshot(dy, E, F, W):
    """The values expressions see (with weight decay DyNet's as_array() does not)."""
    dy.renew_cg()
    return {"E": [E[i].npvalue().tolist() for i in range(8)],
            "F": [F[i].npvalue().tolist() for i in range(4)],
            "W": dy.parameter(W).npvalue().tolist()}


def run(dy, case, trainer, weight_decay=None):
    """Snapshots after the first step (every row used) and after each step of `case`."""
    pc, E, F, W = make_model(dy)
    if weight_decay is not None:
        pc.set_weight_decay(weight_decay)
    tr = TRAINERS[trainer](dy, pc)
    fn, steps = CASES[case]
    _all_rows(dy, E, F, W)
    tr.update()
    out = [snapshot(dy, E, F, W)]
    for step in range(steps):
        fn(dy, E, F, W, step)
        tr.update()
        out.append(snapshot(dy, E, F, W))
    return out
