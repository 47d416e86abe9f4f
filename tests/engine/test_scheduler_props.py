"""Scheduler invariants on random multi-instance graphs (hypothesis): every node runs
exactly once, a batch has one signature, arguments run before their consumers, and
every strategy computes the same values and gradients."""
import numpy as np
from hypothesis import given, settings, strategies as st

import autobatch as dy
from autobatch.testing import (build_program, check_batching_invariance, check_schedule,
                               program_parameters, random_program)

from python_strategies import PYTHON_STRATEGIES
from strategy_names import BATCHING_STRATEGIES, BUILTIN_STRATEGIES

STRATEGIES = BUILTIN_STRATEGIES + PYTHON_STRATEGIES       # the built-in ones and two in Python

programs = st.builds(
    lambda seed, n, steps, shared: random_program(np.random.default_rng(seed), n_instances=n,
                                                  max_steps=steps, n_shared=shared),
    st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 8), st.integers(0, 3))


def run(program, params, strategy):
    """Build and forward a program; returns (batches, id of the forwarded node)."""
    dy.renew_cg(strategy=strategy)
    total = dy.esum(build_program(program, params))
    total.forward()
    return dy.cg().batches(), total.vindex


@settings(max_examples=40, deadline=None)
@given(programs, st.sampled_from(STRATEGIES))
def test_schedule_invariants(program, strategy):
    params = program_parameters(program, dy.ParameterCollection(seed=0))
    batches, target = run(program, params, strategy)
    # lazy: exactly the non-leaf ancestors of the forwarded node run (unused shared
    # values do not)
    check_schedule([target], one_node_per_batch=strategy == "none")


@settings(max_examples=30, deadline=None)
@given(programs)
def test_strategies_agree(program):
    params = program_parameters(program, dy.ParameterCollection(seed=0))
    stats = check_batching_invariance(lambda: build_program(program, params), params,
                                      strategies=BATCHING_STRATEGIES + PYTHON_STRATEGIES, rtol=1e-5, atol=1e-5)
    nodes = stats["none"]["nodes_run"]
    assert all(s["nodes_run"] == nodes for s in stats.values())
    assert all(s["batches"] <= stats["none"]["batches"] for s in stats.values())


@settings(max_examples=30, deadline=None)
@given(programs, st.sampled_from(STRATEGIES), st.data())
def test_incremental_forward_runs_each_node_once(program, strategy, data):
    """value() on some outputs first, then on everything: nothing runs twice."""
    params = program_parameters(program, dy.ParameterCollection(seed=0))
    dy.renew_cg(strategy=strategy)
    outs = build_program(program, params)
    first = data.draw(st.lists(st.sampled_from(range(len(outs))), max_size=3))
    early = {k: outs[k].value() for k in first}
    total = dy.esum(outs)
    total.value()
    ran = [i for _, nodes in dy.cg().batches() for i in nodes]
    assert len(ran) == len(set(ran))
    for k, v in early.items():
        assert outs[k].value() == v


def test_collect_below_a_long_gap_of_unneeded_nodes():
    """The needed nodes are found by one pass down the ids while they are dense, and
    breadth-first once they turn sparse (a pending node far below thousands of
    unneeded ones): either way exactly the needed nodes run, once, in order."""
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((8, 8))
    E = pc.add_lookup_parameters((50, 8))
    dy.renew_cg()
    pending = dy.tanh(W * E[0])                             # needed only at the end
    side = [dy.logistic(W * E[k % 50]) for k in range(3000)]  # never needed
    h, targets, values = E[1], [], []
    for k in range(5):                                      # a parser's steps: value() each
        h = dy.tanh(W * h + E[k])
        s = dy.sum_elems(h)
        values.append(s.value())
        targets.append(s.vindex)
    last = dy.sum_elems(h + pending)
    values.append(last.value())
    targets.append(last.vindex)
    check_schedule(targets)
    ran = {i for _, nodes in dy.cg().batches() for i in nodes}
    assert not ran & {x.vindex for x in side}
    Wv, Ev = W.as_array(), E.as_array()
    hv = Ev[1]
    for k in range(5):
        hv = np.tanh(Wv @ hv + Ev[k])
        np.testing.assert_allclose(values[k], hv.sum(), rtol=1e-5)
    np.testing.assert_allclose(values[-1], (hv + np.tanh(Wv @ Ev[0])).sum(), rtol=1e-5)
