"""Every strategy, built in or plugged in from Python, on the graphs of the five
benchmark tasks (tiny sizes): batched equals unbatched (values and parameter
gradients), and the scheduler invariants hold (every needed node runs exactly once,
one signature per batch, arguments before their users). A strategy that returns an
invalid choice gets a clear error, and the graph stays usable. The guide
docs/strategies.md is run too."""
import importlib.util
import pathlib
import re

import numpy as np
import pytest

import autobatch as dy
from autobatch.bench import data, run, tasks
from autobatch.testing import check_batching_invariance
from autobatch.testing import check_schedule as schedule_invariants

from strategy_names import BATCHING_STRATEGIES, BUILTIN_STRATEGIES

ROOT = pathlib.Path(__file__).resolve().parents[2]
HIDDEN, N_INSTANCES, SEED = 8, 3, 1


def load_example():
    spec = importlib.util.spec_from_file_location("example_strategy_lookahead",
                                                  ROOT / "examples" / "strategy_lookahead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)          # registers "lookahead-py"
    return module


lookahead = load_example()


class Adversarial(dy.Strategy):
    """Any valid choice, at random: a random ready signature, and half of the time a
    random non-empty subset of its ready nodes (as numpy ints, in random order). The
    draws are seeded by the graph version, so a failure reproduces."""
    name = "test-adversarial"

    def __init__(self):
        self._version, self._rng = None, None

    def select(self, frontier):
        if dy.cg_version() != self._version:
            self._version = dy.cg_version()
            self._rng = np.random.default_rng(self._version)
        rng = self._rng
        sigs = frontier.signatures()
        s = sigs[rng.integers(len(sigs))]
        if rng.random() < 0.5:
            return s
        nodes = np.array(frontier.nodes(s))
        k = int(rng.integers(1, len(nodes) + 1))
        return s, rng.permutation(nodes)[:k]


dy.register_strategy(Adversarial())

# the built-in ones, the example's Python lookahead and the adversarial one above
PLUGGED_IN = [lookahead.Lookahead.name, Adversarial.name]
STRATEGIES = BUILTIN_STRATEGIES + PLUGGED_IN


@pytest.fixture(scope="module")
def models():
    """task -> (model, instances): tiny models on a few instances of the task's data."""
    out = {}
    for t in tasks.TASKS:
        meta, inst = data.make(t, N_INSTANCES, seed=SEED)
        out[t] = tasks.make(t, hidden=HIDDEN, seed=SEED, meta=meta), inst
    return out


def params_of(model):
    return model.pc.parameters_list() + model.pc.lookup_parameters_list()


def check_schedule(strategy, targets):
    """The invariants on the batches run so far in the current graph."""
    return schedule_invariants(targets, one_node_per_batch=strategy == "none")


# ------------------------------------------------------------ every strategy ----

@pytest.mark.parametrize("task", tasks.TASKS)
def test_batched_equals_unbatched(task, models):
    model, inst = models[task]
    stats = check_batching_invariance(lambda: [model.loss(i) for i in inst], params_of(model),
                                      strategies=BATCHING_STRATEGIES + PLUGGED_IN, rtol=2e-4, atol=2e-5)
    nodes = stats["none"]["nodes_run"]
    for s, st in stats.items():
        assert st["strategy"] == s
        assert st["nodes_run"] == nodes, s
        assert st["batches"] <= stats["none"]["batches"], s
    if task not in tasks.GROUPS["standard"]:
        return      # on lattices depth batching is poor, on tiny MV-RNNs critical: no bar
    for s in ("depth", "agenda", "critical", "lookahead", "cost", "lookahead-py"):
        assert stats[s]["batches"] < stats["none"]["batches"] / 2, f"{s} hardly batches {task}"


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("task", tasks.TASKS)
def test_schedule_invariants(task, strategy, models):
    model, inst = models[task]
    dy.renew_cg(strategy=strategy)
    loss = dy.esum([model.loss(i) for i in inst])
    loss.forward()
    batches = check_schedule(strategy, [loss.vindex])
    lb, per_sig = dy.cg().batch_lower_bound()
    assert 0 < lb <= len(batches)
    loss.backward()                     # runs over these batches


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("task", ["tagger-char", "parser"])
def test_incremental_forward(task, strategy, models):
    """value() of the first instance's loss while the graph is still being built (a
    parser reading its scores), then of everything: the lookahead's per-graph cache
    must follow the graph as it grows; nothing runs twice."""
    model, inst = models[task]
    dy.renew_cg(strategy=strategy)
    first = model.loss(inst[0])
    v_first = first.value()
    loss = dy.esum([first] + [model.loss(i) for i in inst[1:]])
    v = loss.value()
    check_schedule(strategy, [first.vindex, loss.vindex])
    dy.renew_cg(strategy="none")
    ref = [model.loss(i) for i in inst]
    assert v_first == pytest.approx(ref[0].value(), rel=1e-5)
    assert v == pytest.approx(dy.esum(ref).value(), rel=1e-4)


def test_lookahead_cache_is_per_graph(models):
    """The same strategy object over many graphs (of different sizes) stays correct."""
    for task in ("treelstm", "tagger", "treelstm"):
        model, inst = models[task]
        dy.renew_cg(strategy="lookahead-py")
        loss = dy.esum([model.loss(i) for i in inst])
        loss.forward()
        check_schedule("lookahead-py", [loss.vindex])


# ---------------------------------------------------------- invalid choices ----

class Misbehaving(dy.Strategy):
    """Valid ('agenda'-like) choices for the first `after` batches, then `bad(frontier)`
    (or a valid choice again while `bad` returns NotImplemented: no chance yet)."""
    name = "test-misbehaving"

    def __init__(self, bad, after):
        self.bad, self.after, self.calls = bad, after, 0

    def select(self, frontier):
        self.calls += 1
        if self.calls > self.after:
            choice = self.bad(frontier)
            if choice is not NotImplemented:
                return choice
        return min(frontier.signatures(), key=lambda s: (frontier.average_depth(s), s))


def _sig_without_ready_node(f):
    ready = set(f.signatures())
    return next(s for s in sorted(dy.cg().signature_nodes()) if s not in ready)


def _node_not_ready(f):
    """A node of a ready signature that is not ready itself (still waiting, or done)."""
    g = dy.cg()
    for s in f.signatures():
        ready = set(f.nodes(s))
        other = [i for i in range(g.num_nodes) if g.node_info(i)[3] == s and i not in ready]
        if other:
            return s, other[:1]
    return NotImplemented       # every node of every ready signature is ready: later


def _nodes_of_another_signature(f):
    s, t = f.signatures()[:2]
    return s, f.nodes(t)[:1]


def _ready_plus_foreign(f):
    s, t = f.signatures()[:2]
    return s, f.nodes(s) + f.nodes(t)


class Oops(Exception):
    pass


def _raises(f):
    raise Oops("the strategy's own error")


INVALID = {
    "unknown signature": (lambda f: 10 ** 6, ValueError, "chose signature 1000000, which has no ready node"),
    "negative signature": (lambda f: -1, ValueError, "chose signature -1, which has no ready node"),
    "signature with no ready node": (_sig_without_ready_node, ValueError, "which has no ready node"),
    "node not ready": (_node_not_ready, ValueError, "chose nodes that are not ready or do not have signature"),
    "node of another signature": (_nodes_of_another_signature, ValueError,
                                  "chose nodes that are not ready or do not have signature"),
    "ready nodes plus a foreign one": (_ready_plus_foreign, ValueError,
                                       "chose nodes that are not ready or do not have signature"),
    "node id out of range": (lambda f: (f.signatures()[0], [10 ** 9]), ValueError, "not ready"),
    "empty list": (lambda f: (f.signatures()[0], []), ValueError, "chose no node"),
    "not a signature": (lambda f: None, TypeError, "must return a signature id"),
    "select raises": (_raises, Oops, "own error"),
}


@pytest.mark.parametrize("after", [0, 5])
@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_choice_raises_and_graph_recovers(case, after, models):
    model, inst = models["tagger"]
    dy.renew_cg(strategy="none")
    ref = dy.esum([model.loss(i) for i in inst]).value()

    bad, exc, match = INVALID[case]
    dy.renew_cg(strategy=Misbehaving(bad, after))
    loss = dy.esum([model.loss(i) for i in inst])
    with pytest.raises(exc, match=match):
        loss.forward()
    assert len(dy.cg().batches()) >= after          # the valid batches before it ran
    # the same graph finishes under another strategy, from where it stopped ...
    dy.cg().set_strategy("agenda")
    assert loss.value() == pytest.approx(ref, rel=1e-5)
    check_schedule("agenda", [loss.vindex])
    loss.backward()
    # ... and a new graph computes the same numbers
    dy.renew_cg(strategy="lookahead-py")
    assert dy.esum([model.loss(i) for i in inst]).value() == pytest.approx(ref, rel=1e-5)


# ------------------------------------------------- registering and comparing ----

def test_register_by_name_and_compare_in_the_bench():
    mod = run.import_plugin(str(ROOT / "examples" / "strategy_lookahead.py"))
    assert dy.available_strategies()["lookahead-py"] is mod.LOOKAHEAD
    rows = run.run_task("treelstm", ["critical", "lookahead-py"], N_INSTANCES, HIDDEN, 1, [], seed=SEED)
    assert [r["system"] for r in rows] == ["critical", "lookahead-py"]
    for r in rows:
        assert r["batches_over_lower_bound"] >= 1.0
    assert rows[0]["first_loss"] == pytest.approx(rows[1]["first_loss"], rel=1e-5)


def test_example_script_prints_a_table(capsys):
    rows = lookahead.main(["--task", "lm,treelstm", "--strategy", "agenda,lookahead-py",
                           "--batch-size", "3", "--hidden", "8", "--steps", "1"])
    out = capsys.readouterr().out
    assert "b/LB" in out and "lookahead-py" in out
    assert len(rows) == 4


def test_guide_code_runs():
    """The Python blocks of docs/strategies.md, run in order in one namespace."""
    text = (ROOT / "docs" / "strategies.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 3
    namespace = {}
    for block in blocks:
        exec(compile(block, "docs/strategies.md", "exec"), namespace)


def test_float_signature_is_rejected_not_truncated():
    class FloatSig(dy.Strategy):
        name = "float-sig"

        def select(self, frontier):
            return frontier.signatures()[0] + 0.7
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((3, 3))
    dy.renew_cg(strategy=FloatSig())
    x = dy.inputVector([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="must return a signature id"):
        dy.sum_elems(dy.tanh(W * x)).value()


def test_frontier_kept_after_select_raised_is_invalid():
    kept = []

    class Keeper(dy.Strategy):
        name = "keeper"

        def select(self, frontier):
            kept.append(frontier)
            raise KeyError("boom")
    dy.renew_cg(strategy=Keeper())
    with pytest.raises(KeyError):
        dy.tanh(dy.inputVector([1.0, 2.0])).value()
    with pytest.raises(RuntimeError, match="only valid during select"):
        kept[0].signatures()


def test_select_cannot_build_or_compute_the_graph():
    # reading computed values is fine; building nodes or computing pending ones is not
    class Meddler(dy.Strategy):
        name = "meddler"

        def __init__(self, action):
            self.action = action

        def select(self, frontier):
            self.action()
            return frontier.signatures()[0]
    held = {}
    for action in (lambda: dy.tanh(held["x"]), lambda: held["pending"].value(),
                   lambda: dy.inputVector([1.0])):
        dy.renew_cg(strategy=Meddler(action))
        held["x"] = dy.inputVector([0.5, 0.25])
        held["pending"] = dy.exp(held["x"])
        y = dy.tanh(held["x"])
        with pytest.raises(RuntimeError, match="inside a strategy's select"):
            y.value()
        dy.cg().set_strategy("agenda")
        assert y.value() == pytest.approx(list(np.tanh([0.5, 0.25])), rel=1e-6)
        assert held["pending"].value() == pytest.approx(list(np.exp([0.5, 0.25])), rel=1e-6)
