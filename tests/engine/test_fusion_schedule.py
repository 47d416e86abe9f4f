"""Fusion and the strategies' schedules (docs/fusion.md, "Fusion and the schedule";
docs/strategies.md, "The cost strategy").

Two counts judge a schedule with fusion on: `batches` (every batch of the log, a fused
stage included) against batch_lower_bound(), and `passes` (batches that are not a
fused stage: a stage runs in its producer's pass) against batch_lower_bound(passes=True),
which does not count the nodes fusion may run as a stage. On the bench's workloads
(small: 16 instances) this checks that both bounds hold under every fusion mode, that
the levels reached do not get worse than measured (LEVELS), and that deferral and the
'cost' strategy give the unbatched values and gradients."""
import pytest

import autobatch as dy
from autobatch.bench import data, tasks
from autobatch.engine import cost_model, fusion as engine_fusion
from autobatch.testing import check_batching_invariance, check_schedule

from strategy_names import BATCHING_STRATEGIES

HIDDEN, N_INSTANCES, SEED = 8, 16, 3
WORKLOADS = tasks.expand(["standard", "literature"])
# fusion modes: off, on (a stage fuses whenever the chain allows), on with deferral
MODES = {"off": (False, False), "fused": (True, False), "deferred": (True, True)}

# measured on these graphs: (strategy, mode, count) -> {task: count / its bound}; a
# task not listed is at the bound within 5 %
LEVELS = {
    ("lookahead", "fused", "passes"): {"treegru": 2.526, "typed-treenn": 1.947,
                                       "lattice-lstm": 1.871, "lattice-gru": 1.508},
    ("cost", "fused", "passes"): {"treegru": 1.611, "typed-treenn": 1.564,
                                  "lattice-lstm": 1.614, "lattice-gru": 1.766},
    ("lookahead", "deferred", "batches"): {"treegru": 1.135, "typed-treenn": 1.375,
                                           "lattice-lstm": 1.267, "lattice-gru": 1.178},
    ("cost", "off", "batches"): {"treegru": 1.135, "typed-treenn": 1.316,
                                 "lattice-lstm": 1.499, "lattice-gru": 1.515},
}


@pytest.fixture(scope="module", params=WORKLOADS)
def workload(request):
    meta, inst = data.make(request.param, N_INSTANCES, seed=SEED)
    return tasks.make(request.param, hidden=HIDDEN, seed=SEED, meta=meta, variant="ops"), inst


def schedule(model, inst, strategy, mode):
    """stats() and the two bounds of one forward of the summed loss."""
    fuse, defer = MODES[mode]
    old = engine_fusion.set_deferral(defer)
    try:
        dy.renew_cg(strategy=strategy, fusion=fuse)
        loss = dy.esum([model.loss(i) for i in inst])
        loss.forward()
    finally:
        engine_fusion.set_deferral(old)
    check_schedule([loss.vindex])
    g = dy.cg()
    return g.stats(), g.batch_lower_bound()[0], g.batch_lower_bound(passes=True)[0]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("strategy", ["agenda", "lookahead", "cost"])
def test_both_bounds_hold(workload, strategy, mode):
    st, lb, plb = schedule(*workload, strategy, mode)
    assert 0 < plb <= lb <= st["batches"]
    assert plb <= st["passes"] == st["batches"] - st["fused"]["batches"]
    if mode == "off":
        assert st["passes"] == st["batches"]


@pytest.mark.parametrize("key", list(LEVELS))
def test_levels_reached(workload, key):
    strategy, mode, count = key
    model, inst = workload
    st, lb, plb = schedule(model, inst, strategy, mode)
    level = st[count] / (plb if count == "passes" else lb)
    assert level <= LEVELS[key].get(model.name, 1.05) + 1e-9, (key, model.name, level)


def test_deferral_fuses_less_but_splits_no_signature(workload):
    """With deferral a stage waits for the nodes of its signature that could join it:
    never more batches than without fusion (lookahead), never fewer passes than
    fusing whenever possible."""
    model, inst = workload
    off, lb, _ = schedule(model, inst, "lookahead", "off")
    fused, _, _ = schedule(model, inst, "lookahead", "fused")
    deferred, _, _ = schedule(model, inst, "lookahead", "deferred")
    assert deferred["fused"]["batches"] <= fused["fused"]["batches"]
    assert deferred["batches"] <= max(off["batches"], fused["batches"])


def test_deferred_fusion_equals_unbatched(workload):
    model, inst = workload
    params = model.pc.parameters_list() + model.pc.lookup_parameters_list()
    old = engine_fusion.set_deferral(True)
    try:
        check_batching_invariance(lambda: [model.loss(i) for i in inst], params,
                                  strategies=BATCHING_STRATEGIES, rtol=2e-4, atol=2e-5)
    finally:
        engine_fusion.set_deferral(old)


def test_cost_schedule_is_deterministic(workload):
    model, inst = workload
    runs = []
    for _ in range(2):
        schedule(model, inst, "cost", "fused")
        runs.append(dy.cg().batches())
    assert runs[0] == runs[1]


def test_cost_constants_change_its_choice_not_its_numbers():
    """set_constants takes new times and gives them back; the numbers stay those of
    the unbatched graph whatever the constants."""
    before = cost_model.constants()
    assert set(before) == {"call_ns", "weight_ns"}
    with pytest.raises(ValueError):
        cost_model.set_constants(call_ns=-1)
    assert cost_model.constants() == before
    meta, inst = data.make("treelstm", 6, seed=SEED)
    model = tasks.make("treelstm", hidden=HIDDEN, seed=SEED, meta=meta, variant="ops")
    params = model.pc.parameters_list() + model.pc.lookup_parameters_list()
    try:
        assert cost_model.set_constants(call_ns=0, weight_ns=1e6) == {"call_ns": 0.0,
                                                                      "weight_ns": 1e6}
        check_batching_invariance(lambda: [model.loss(i) for i in inst], params,
                                  strategies=["cost"], rtol=2e-4, atol=2e-5)
    finally:
        cost_model.set_constants(**before)
    assert cost_model.constants() == before


@pytest.mark.parametrize("first", ["tanh", "logistic"])
def test_cost_runs_a_complete_signature_before_splitting_one(first):
    """W * tanh(tanh(x)) and W * logistic(tanh(x)): the two products are at one depth, so
    when one is ready the other could still join it; 'cost' runs the complete signature
    (the other activation) first, and the products run as one batch, whichever
    activation is created (and so chosen on ties) first."""
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((3, 3))
    dy.renew_cg(strategy="cost", fusion=False)
    x = dy.tanh(dy.inputVector([0.1, 0.2, 0.3]))
    acts = {"tanh": lambda: dy.tanh(x), "logistic": lambda: dy.logistic(x)}
    p = acts[first]()
    q = acts["logistic" if first == "tanh" else "tanh"]()
    loss = dy.sum_elems(W * p) + dy.sum_elems(W * q)
    loss.forward()
    products = [ids for op, ids in dy.cg().batches() if op == "matmul"]
    assert [len(ids) for ids in products] == [2]
