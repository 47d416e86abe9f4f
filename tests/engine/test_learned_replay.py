"""The learned strategy's replay (autobatch/engine/learned.pyx) and the frontier by kind
it keeps (engine/kind_frontier.pyx): the state, each kind's signature and the
fallback's choice, kept up to date as batches are taken and released, equal those of
a pass over the ready signatures at every pick, while learning and replaying, on the
bench's workloads and on random graphs; and a forward prepares what its fallback
reads, so that the fallback chooses as the strategy of that name does."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import autobatch as dy
from autobatch.bench import data, tasks
from autobatch.engine import kind_frontier
from autobatch.engine.learned import FALLBACKS
from autobatch.testing import build_program, check_schedule, program_parameters, random_program

HIDDEN, PER_GRAPH = 8, 8

programs = st.builds(
    lambda seed, n, steps, shared: random_program(np.random.default_rng(seed), n_instances=n,
                                                  max_steps=steps, n_shared=shared),
    st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 8), st.integers(0, 3))


@pytest.fixture
def checked():
    """Every pick of the learned strategy compared with a pass over the frontier; yields
    the number of checks done before."""
    old = kind_frontier.set_checks(True)
    try:
        yield kind_frontier.checks_done()
    finally:
        kind_frontier.set_checks(old)


def forward(build, strategy, fusion=True):
    """A new graph from build(), forwarded; its batches (node ids)."""
    dy.renew_cg(strategy=strategy, fusion=fusion)
    loss = build()
    loss.forward()
    check_schedule([loss.vindex])
    return [ids for _op, ids in dy.cg().batches()]


@pytest.mark.parametrize("fallback", ["lookahead", "agenda"])
@pytest.mark.parametrize("task", tasks.TASKS)
def test_kept_frontier_equals_a_pass_on_the_workloads(task, fallback, checked):
    """Three graphs: the first learned on, the others replayed (with unknown states,
    relearning, fusion off on one); every pick checked."""
    meta, inst = data.make(task, 3 * PER_GRAPH, seed=1)
    model = tasks.make(task, hidden=HIDDEN, seed=1, meta=meta)
    learned = dy.LearnedStrategy(seed=0, episodes=5, fallback=fallback)
    for k, fusion in enumerate((True, True, False)):
        part = inst[k * PER_GRAPH:(k + 1) * PER_GRAPH]
        forward(lambda: dy.esum([model.loss(i) for i in part]), learned, fusion)
    assert learned.info()["graphs_learned"] >= 1
    assert kind_frontier.checks_done() > checked


@settings(max_examples=40, deadline=None)
@given(programs, st.sampled_from(sorted(FALLBACKS)), st.booleans(), st.data())
def test_kept_frontier_equals_a_pass_on_random_graphs(program, fallback, fusion, data):
    """Learning on one graph, replaying it, then a forward of some outputs first and of
    all of them after (two forwards of one graph, the second over what is left)."""
    params = program_parameters(program, dy.ParameterCollection(seed=0))
    learned = dy.LearnedStrategy(seed=0, episodes=3, fallback=fallback)
    old = kind_frontier.set_checks(True)
    try:
        for _ in range(2):
            forward(lambda: dy.esum(build_program(program, params)), learned, fusion)
        dy.renew_cg(strategy=learned, fusion=fusion)
        outs = build_program(program, params)
        for k in data.draw(st.lists(st.sampled_from(range(len(outs))), max_size=2)):
            outs[k].value()
        total = dy.esum(outs)
        total.value()
        check_schedule([total.vindex])
    finally:
        kind_frontier.set_checks(old)


def learning_graph(W, U):
    """One instance, one node ready at a time: every state of it is a single kind."""
    h = dy.tanh(W * dy.inputVector([0.1, 0.2, 0.3, 0.4]))
    return dy.sum_elems(dy.logistic(U * h))


def mixed_graph(W, U, lengths=(1, 3, 5, 2, 7)):
    """Chains of several lengths, two products feeding a sum at every step (lookahead
    runs the feeders first), then tails the longer the shorter the chain (critical runs
    the long ways first); every op has one shape, so every kind one signature."""
    out = []
    for n in lengths:
        h = g = dy.inputVector([0.1 * n, 0.2, 0.3, 0.4])
        for _ in range(n):
            h = dy.tanh(W * h + U * g)
            g = dy.logistic(U * h)
        for _ in range(8 - n):
            h = dy.rectify(W * h)
        out.append(dy.sum_elems(h + g))
    return dy.esum(out)


def test_each_fallback_chooses_as_its_strategy():
    """A model learned on a graph whose states are single kinds meets a graph whose
    states mix kinds, all unknown: its schedule there is its fallback's, which reads
    heights (critical) or feeder lists too (lookahead) that the forward prepares only
    for those. The three schedules differ, so a fallback that read what was not
    prepared would show."""
    pc = dy.ParameterCollection(seed=0)
    W, U = pc.add_parameters((4, 4)), pc.add_parameters((4, 4))
    alone = {f: forward(lambda: mixed_graph(W, U), f) for f in ("agenda", "critical", "lookahead")}
    assert len({repr(b) for b in alone.values()}) == 3, {f: len(b) for f, b in alone.items()}
    for fallback, batches in alone.items():
        learned = dy.LearnedStrategy(seed=0, episodes=3, fallback=fallback)
        forward(lambda: learning_graph(W, U), learned)
        assert forward(lambda: mixed_graph(W, U), learned) == batches, fallback
        info = learned.info()
        assert info["models"] == 1 and info["graphs_learned"] == 1
        assert info["last_miss_rate"][0] > 0.5
