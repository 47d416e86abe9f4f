"""The built-in 'learned' strategy (autobatch/engine/learned.pyx): a policy learned per
model by Q-learning on simulations of the frontier, replayed by table lookups.

Batched == unbatched under it, its schedule invariants and its hypothesis tests run
with every built-in strategy (test_batching, test_strategy_plugins, test_scheduler_props,
test_threads); here: on the bench's workloads it needs no more batches than 'agenda'
and reaches the lower bound where 'lookahead' does, it learns once and then replays
(the same graph twice gives the same batches, with no state unknown), a fresh
strategy with the same seed gives the same schedule, unknown states fall back, and
its options."""
import pickle

import pytest

import autobatch as dy
from autobatch.bench import data, tasks
from autobatch.testing import check_batching_invariance, check_schedule

HIDDEN, N_INSTANCES, SEED = 8, 16, 3


@pytest.fixture(scope="module", params=tasks.TASKS)
def task_model(request):
    meta, inst = data.make(request.param, N_INSTANCES, seed=SEED)
    return tasks.make(request.param, hidden=HIDDEN, seed=SEED, meta=meta), inst


def schedule(model, inst, strategy, fusion=True):
    """(batches as lists of node ids, lower bound) of one forward of the summed loss."""
    dy.renew_cg(strategy=strategy, fusion=fusion)
    loss = dy.esum([model.loss(i) for i in inst])
    loss.forward()
    check_schedule([loss.vindex])
    return [ids for _op, ids in dy.cg().batches()], dy.cg().batch_lower_bound()[0]


# measured on these graphs (fused): the policy Q-learning found needs fewer batches
# than any of the built-in heuristics (treegru 203 against 251, lattice-lstm 1277
# against 1469); elsewhere it keeps the best heuristic's schedule
LEARNS_BETTER = {"treegru": 0.85, "lattice-lstm": 0.9}


@pytest.mark.parametrize("fusion", [False, True])
def test_no_more_batches_than_the_heuristics(task_model, fusion):
    """On the graph it learned on, the replay needs no more batches than agenda,
    lookahead or critical (their schedules are candidates; a candidate is kept by its
    replay, which the forward runs exactly), so it reaches the lower bound where
    lookahead does (the standard tasks)."""
    model, inst = task_model
    learned = dy.LearnedStrategy(seed=1)
    batches, lb = schedule(model, inst, learned, fusion)
    assert len(batches) == learned.info()["planned_batches"]
    heuristics = {s: len(schedule(model, inst, s, fusion)[0])
                  for s in ("agenda", "lookahead", "critical")}
    assert len(batches) <= min(heuristics.values()), heuristics
    if model.name in tasks.GROUPS["standard"] and not fusion:
        assert len(batches) == lb
    if fusion and model.name in LEARNS_BETTER:
        assert len(batches) <= LEARNS_BETTER[model.name] * min(heuristics.values())
    assert learned.info()["graphs_learned"] == 1


@pytest.mark.parametrize("fusion", [True, False])
def test_replay_is_stable_and_known(task_model, fusion):
    """After learning on a graph, the same graph runs the same batches again, nearly
    every state of it known to the policy (a state, a set of kinds, may come twice in
    an episode with two actions: the replay keeps the last), so that it does not learn
    again; a fresh strategy with the same seed learns the same policy."""
    model, inst = task_model
    learned = dy.LearnedStrategy(seed=7, episodes=10)
    first, _ = schedule(model, inst, learned, fusion)
    again, _ = schedule(model, inst, learned, fusion)
    assert again == first
    info = learned.info()
    assert info["graphs_learned"] == 1 and info["last_miss_rate"][0] < 0.02
    schedule(model, inst, learned, fusion)
    assert learned.info()["graphs_learned"] == 1
    fresh = dy.LearnedStrategy(seed=7, episodes=10)
    assert schedule(model, inst, fresh, fusion)[0] == first


def test_gradients_equal_unbatched_while_learning(task_model):
    """Every graph learns (graphs=3, an unseen model each time is not needed: the
    invariance check builds the graph once per strategy)."""
    model, inst = task_model
    params = model.pc.parameters_list() + model.pc.lookup_parameters_list()
    dy.register_strategy(dy.LearnedStrategy(name="learned-fresh", seed=2), "learned-fresh")
    stats = check_batching_invariance(lambda: [model.loss(i) for i in inst], params,
                                      strategies=["learned-fresh"], rtol=2e-4, atol=2e-5)
    assert stats["learned-fresh"]["batches"] <= stats["none"]["batches"]


def test_unknown_states_fall_back_then_learn_again():
    """A model learned on short chains meets longer ones: the replay falls back for
    states it never saw (the numbers are right), and the next graph learns again."""
    pc = dy.ParameterCollection(seed=0)
    W, U = pc.add_parameters((4, 4)), pc.add_parameters((4, 4))

    def build(lengths):
        out = []
        for n in lengths:
            h, g = dy.inputVector([0.1 * n] * 4), dy.inputVector([0.2] * 4)
            for t in range(n):
                h = dy.tanh(W * h)
                if t % 2:
                    g = dy.logistic(U * g + h)
            out.append(dy.sum_elems(h + g))
        return dy.esum(out)

    learned = dy.LearnedStrategy(seed=0, graphs=2)
    values = []
    for lengths in ([1, 2], [2, 9, 4], [2, 9, 4], [3, 8]):
        dy.renew_cg(strategy=learned)
        values.append(build(lengths).value())
        dy.renew_cg(strategy="none")
        assert values[-1] == pytest.approx(build(lengths).value(), rel=1e-5)
    info = learned.info()
    assert info["graphs_learned"] == 2 and info["models"] == 1


def test_options_and_errors():
    s = dy.LearnedStrategy("mine", episodes=3, graphs=2, seed=5, fallback="agenda")
    assert (s.name, s.episodes, s.graphs, s.seed, s.fallback) == ("mine", 3, 2, 5, "agenda")
    assert "learned" in dy.available_strategies()
    assert isinstance(dy.available_strategies()["learned"], dy.LearnedStrategy)
    with pytest.raises(ValueError, match="fallback"):
        dy.LearnedStrategy(fallback="none")
    with pytest.raises(ValueError, match="at least 1"):
        dy.LearnedStrategy(episodes=0)


def test_pickles_its_options_not_its_table():
    s = dy.LearnedStrategy("mine", episodes=3, graphs=2, seed=5, fallback="critical")
    dy.renew_cg(strategy=s)
    x = dy.inputVector([1.0, 2.0])
    dy.esum([dy.tanh(x), dy.logistic(x)]).value()
    assert s.info()["states"] > 0
    t = pickle.loads(pickle.dumps(s))
    assert (t.name, t.episodes, t.graphs, t.seed, t.fallback) == ("mine", 3, 2, 5, "critical")
    assert t.info()["states"] == 0


def test_reset_forgets():
    s = dy.LearnedStrategy(seed=3)
    dy.renew_cg(strategy=s)
    x = dy.inputVector([1.0, 2.0])
    dy.esum([dy.tanh(x), dy.tanh(x * 2)]).value()
    assert s.info()["graphs_learned"] == 1
    s.reset()
    assert s.info() == {"kinds": 0, "states": 0, "policy_states": 0, "actions": 0, "models": 0,
                        "graphs_learned": 0, "episodes": 0, "seconds_learning": 0.0,
                        "planned_batches": 0,
                        "last_miss_rate": [], "last_fallback_rate": []}


def test_training_keeps_the_model():
    """A trainer's update swaps a parameter's value buffers (runtime/param_buffers.pyx):
    the kinds, and so the model, must not change with it, or every step would learn."""
    meta, inst = data.make("treegru", 4 * 6, seed=0)
    model = tasks.make("treegru", hidden=HIDDEN, seed=0, meta=meta)
    trainer = dy.SimpleSGDTrainer(model.pc, 0.1)
    learned = dy.LearnedStrategy(seed=0, graphs=2)
    for k in range(6):
        dy.renew_cg(strategy=learned)
        loss = dy.esum([model.loss(i) for i in inst[4 * k:4 * k + 4]])
        loss.forward()
        loss.backward()
        trainer.update()
    info = learned.info()
    assert info["models"] == 1 and info["graphs_learned"] <= 2
