"""Ctrl-C (here a timer's signal whose handler raises KeyboardInterrupt) during
`trainer.update()`: the step is applied completely or not at all. Values, optimizer
state, gradients, used rows, weight decay and the counters are, after an interrupted
call, either those of before it or those of the same step run without interruption
(a twin model and trainer); after "nothing", the next update() does the step once."""
import time

import numpy as np
import pytest

import autobatch as dy

TRIALS = 40


class PythonAdam(dy.AdamTrainer):
    """Adam through its numpy rule (a subclass's own rule: the Python path)."""

    def rule(self, theta, g, t, m, v):
        super().rule(theta, g, t, m, v)


def model(trainer_class, big):
    """Large dense parameters (a step takes milliseconds) and a table with sparse
    updates; weight decay, so the step also scales everything."""
    pc = dy.ParameterCollection(seed=5)
    params = [pc.add_parameters((big, 40)), pc.add_parameters((big, 20)), pc.add_parameters(big)]
    table = pc.add_lookup_parameters((400, 50))
    pc.set_weight_decay(0.01)
    tr = trainer_class(pc, 0.01)
    tr.set_clip_threshold(1.0)        # the norm exceeds it: the clip counters move too
    return pc, params, table, tr


def fill_gradients(params, table, rng):
    dy.renew_cg()
    rows = rng.choice(400, size=30, replace=False).tolist()
    dy.esum([dy.sum_elems(dy.lookup(table, r)) for r in rows]).backward()
    for p in params:
        p.grad[...] = rng.normal(size=p.shape())
    table.grad[rows] = rng.normal(size=(len(rows), table.row_size))


def state(params, table, tr):
    arrays = [p.as_array() for p in params] + [table.as_array()]
    arrays += [p.grad_as_array() for p in params] + [table.grad_as_array(), table.used_rows()]
    for _, slot in sorted(tr._state.values(), key=lambda e: e[0].name()):
        arrays += [s.copy() for s in slot.states]
    return arrays, (tr.updates, tr.clips, tr._updates_since_status, tr._clips_since_status)


def same(a, b):
    return a[1] == b[1] and len(a[0]) == len(b[0]) and all(
        x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a[0], b[0]))


@pytest.mark.parametrize("trainer_class, big, trials", [(dy.AdamTrainer, 12000, TRIALS),
                                                         (PythonAdam, 3000, TRIALS // 3)],
                         ids=["compiled", "python-rule"])
def test_an_interrupted_update_is_all_or_nothing(alarm, trainer_class, big, trials):
    _, params, table, tr = model(trainer_class, big)
    _, twin_params, twin_table, twin = model(trainer_class, big)
    rng, twin_rng = np.random.default_rng(1), np.random.default_rng(1)
    fill_gradients(params, table, rng)
    fill_gradients(twin_params, twin_table, twin_rng)
    t0 = time.perf_counter()
    twin.update()                                   # how long a step takes
    tr.update()
    seconds = time.perf_counter() - t0
    delays = np.random.default_rng(2).uniform(0, seconds, size=trials)
    interrupted = done = 0
    for delay in delays:
        fill_gradients(params, table, rng)
        fill_gradients(twin_params, twin_table, twin_rng)
        before = state(params, table, tr)
        twin.update()
        after = state(twin_params, twin_table, twin)
        try:
            alarm(max(float(delay), 1e-6))
            tr.update()
            time.sleep(30)          # (the timer fires here when the step was faster)
        except KeyboardInterrupt:
            interrupted += 1
        finally:
            alarm(0)
        now = state(params, table, tr)
        if same(now, after):
            done += 1
            continue
        assert same(now, before), "an interrupted update() left a half-applied step"
        tr.update()                                 # nothing was done: do it now, once
        assert same(state(params, table, tr), after)
    assert interrupted == trials
    assert 0 < done                  # some interrupts came during the step, not before
