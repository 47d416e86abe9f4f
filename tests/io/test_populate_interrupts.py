"""Ctrl-C during `pc.populate` / `p.populate` (a KeyboardInterrupt raised wherever Python
may run a signal handler): the collection ends with every value of the file or with
none of them, never partly assigned (4 of 50 interrupted runs left 117 to 169 of 200
parameters changed). Two ways of interrupting:

- a trace function raising KeyboardInterrupt at the k-th Python event of the call, for
  every k (sampled when there are many): deterministic, and covers every point where a
  handler could run;
- a timer's signal whose handler raises KeyboardInterrupt, at random times within the
  call's duration, as a real Ctrl-C would arrive (it lands in the few microseconds
  between two parameters' assignments too rarely to be the regression test: the trace
  is; this one checks the real signal path)."""
import gc
import random
import sys
import time

import numpy as np
import pytest

import autobatch as dy

SEED = 20261204
N_PARAMS = 200
FORMATS = ["autobatch", "dynet"]


def collection(n, size, value):
    pc = dy.ParameterCollection()
    for i in range(n):
        p = pc.add_parameters(size, init=value, name=f"p{i}")
        p._grad_flat[:] = value           # a DyNet file's gradients are assigned too
    pc.add_lookup_parameters((3, size), init=value, name="E")
    return pc


def saved(tmp_path, fmt, n, size):
    """A file of `n` parameters (and a lookup table) whose values are all 1."""
    path = str(tmp_path / f"model.{fmt}")
    collection(n, size, 1.0).save(path, format=fmt)
    return path


def changed(pc):
    """How many of pc's parameters hold the file's values (1), and how many in all.
    Values and gradients must agree: a parameter half assigned counts as neither."""
    params = pc.parameters_list() + pc.lookup_parameters_list()
    new = sum(bool(np.all(p._flat == 1.0) and np.all(p._grad_flat == 0.0) or
                   np.all(p._flat == 1.0) and np.all(p._grad_flat == 1.0)) for p in params)
    old = sum(bool(np.all(p._flat == 0.0) and np.all(p._grad_flat == 0.0)) for p in params)
    return new, old, len(params)


def assert_all_or_nothing(pc, where):
    new, old, n = changed(pc)
    assert (new, old) in ((n, 0), (0, n)), f"{where}: {new} of {n} parameters assigned, {old} untouched"


class _Interrupt:
    """A trace function that raises KeyboardInterrupt at the k-th event (call, line,
    return) of Python code; counts the events when k is None."""

    def __init__(self, k=None):
        self.k, self.count = k, 0

    def __call__(self, frame, event, arg):
        self.count += 1
        if self.count == self.k:
            raise KeyboardInterrupt
        return self


def run_traced(fn, k=None):
    """(whether fn was interrupted, its events). The garbage collector is off meanwhile:
    its callbacks (hypothesis installs one) are Python code too, whose exceptions are
    ignored, and they would make the count differ from call to call."""
    tracer = _Interrupt(k)
    gc.disable()
    sys.settrace(tracer)
    try:
        fn()
        return False, tracer.count
    except KeyboardInterrupt:
        return True, tracer.count
    finally:
        sys.settrace(None)
        gc.enable()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("what", ["collection", "one-parameter"])
def test_an_interrupt_at_every_point_of_populate(tmp_path, fmt, what):
    path = saved(tmp_path, fmt, 20, 4)

    def target():
        return collection(20, 4, 0.0)

    def populate(pc):
        if what == "collection":
            pc.populate(path)
        else:
            pc.parameters_list()[7].populate(path, "/p7")
    populate(target())                   # (the first call runs code once, imports...)
    pc = target()
    _, events = run_traced(lambda: populate(pc))
    rng = random.Random(SEED)
    points = range(1, events + 1) if events <= 1500 else sorted(rng.sample(range(1, events + 1), 1500))
    interrupted = 0
    for k in points:
        pc = target()
        stopped, _ = run_traced(lambda pc=pc: populate(pc), k)
        interrupted += stopped
        if what == "collection":
            assert_all_or_nothing(pc, f"interrupted at event {k} of {events}")
        else:
            p = pc.parameters_list()[7]
            grad = 1.0 if fmt == "dynet" else 0.0   # (our format keeps the gradient)
            assert (np.all(p._flat == 0.0) and np.all(p._grad_flat == 0.0) or
                    np.all(p._flat == 1.0) and np.all(p._grad_flat == grad)), f"event {k}"
            assert all(np.all(q._flat == 0.0) for i, q in enumerate(pc.parameters_list()) if i != 7)
    # (a call's count of Python events varies by a few: a garbage collection, a cache)
    assert interrupted >= 0.95 * len(points)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_timer_interrupt_during_populate_is_all_or_nothing(tmp_path, alarm, fmt):
    path = saved(tmp_path, fmt, N_PARAMS, 64)
    durations = []
    for _ in range(3):
        pc = collection(N_PARAMS, 64, 0.0)
        start = time.perf_counter()
        pc.populate(path)
        durations.append(time.perf_counter() - start)
    duration = sorted(durations)[1]
    rng = random.Random(SEED)
    interrupted = 0
    # the collector off: a handler that runs inside a collector callback (hypothesis
    # installs one) has its KeyboardInterrupt swallowed there, and the run completes
    gc.disable()
    try:
        for run in range(50):
            pc = collection(N_PARAMS, 64, 0.0)
            try:
                # the later half of the call, where the values are written (reading and
                # checking the file come first)
                alarm(rng.uniform(0.5 * duration, duration))
                pc.populate(path)
                time.sleep(10 * duration + 0.05)     # (only when populate beat the timer)
            except KeyboardInterrupt:
                interrupted += 1
            alarm(0)
            assert_all_or_nothing(pc, f"run {run}")
    finally:
        gc.enable()
    assert interrupted >= 45
