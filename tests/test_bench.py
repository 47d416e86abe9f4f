"""Smoke tests of the benchmark suite: every task runs one tiny minibatch under every
built-in strategy and gives the same loss; the PyTorch baselines (if torch is
installed) run too. No timing is asserted."""
import json

import pytest

import autobatch as dy
from autobatch.bench import data, run, tasks

BUILTIN = ("none", "depth", "agenda", "critical")
HIDDEN = 8
BATCH = 3


@pytest.fixture(scope="module")
def datasets():
    return {t: data.make(t, BATCH, seed=1) for t in tasks.TASKS}


def one_step(task, strategy, meta, batch):
    model = tasks.make(task, HIDDEN, seed=1, meta=meta)
    trainer = dy.SimpleSGDTrainer(model.pc, 0.1)
    dy.renew_cg(strategy=strategy)
    loss = dy.esum([model.loss(i) for i in batch])
    value = loss.value()
    loss.backward()
    trainer.update()
    return value, dy.cg().stats()


@pytest.mark.parametrize("task", tasks.TASKS)
def test_strategies_agree(task, datasets):
    meta, batch = datasets[task]
    losses = {}
    for s in BUILTIN:
        value, st = one_step(task, s, meta, batch)
        assert st["nodes"] > 0 and 0 < st["batches"] <= st["nodes"]
        losses[s] = value
    ref = losses["none"]
    assert ref > 0
    for s, v in losses.items():
        assert v == pytest.approx(ref, rel=1e-4), (s, losses)


def test_batching_happens(datasets):
    meta, batch = datasets["tagger"]
    _, st_none = one_step("tagger", "none", meta, batch)
    _, st_agenda = one_step("tagger", "agenda", meta, batch)
    assert st_agenda["batches"] < st_none["batches"]
    lb, _ = dy.cg().batch_lower_bound()
    assert 0 < lb <= st_agenda["batches"]


def test_data_is_deterministic():
    assert data.make("parser", 4, seed=3) == data.make("parser", 4, seed=3)
    assert data.make("lm", 4, seed=3) != data.make("lm", 4, seed=4)
    _, trees = data.make("treelstm", 4, seed=3)
    assert trees == data.make("treelstm", 4, seed=3)[1]


def test_oracle_rebuilds_the_tree():
    import numpy as np
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 17, 40):
        heads = data.random_projective_heads(rng, n)
        oracle = data.arc_standard_oracle(heads)
        assert len(oracle) == 2 * n
        stack, buf, got = [0], 1, [None] * (n + 1)
        for a, s1, s0, b0 in oracle:
            assert s0 == stack[-1] and b0 == (buf if buf <= n else -1)
            if a == data.SHIFT:
                stack.append(buf)
                buf += 1
            elif a == data.LEFT:
                got[stack[-2]] = stack[-1]
                del stack[-2]
            else:
                got[stack[-1]] = stack[-2]
                stack.pop()
        assert got[1:] == heads[1:]


def test_runner_json_and_plugin_strategy(tmp_path):
    plugin = tmp_path / "plug.py"
    plugin.write_text(
        "import autobatch as dy\n"
        "class Biggest(dy.Strategy):\n"
        "    name = 'bench-test-biggest'\n"
        "    def select(self, frontier):\n"
        "        return max(frontier.signatures(), key=lambda s: len(frontier.nodes(s)))\n"
        "dy.register_strategy(Biggest())\n")
    out = tmp_path / "r.json"
    meta = run.main(["--task", "treelstm,lm", "--strategy", "agenda,bench-test-biggest",
                     "--import", str(plugin), "--batch-size", "2", "--hidden", "8",
                     "--steps", "1", "--no-torch", "--quiet", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 4 and rows == meta["rows"]
    for r in rows:
        assert r["instances_per_s"] > 0 and r["batches_over_lower_bound"] >= 1.0
    by = {(r["task"], r["system"]): r["first_loss"] for r in rows}
    for t in ("treelstm", "lm"):
        assert by[(t, "bench-test-biggest")] == pytest.approx(by[(t, "agenda")], rel=1e-4)


@pytest.mark.parametrize("task", tasks.TASKS)
def test_torch_baselines(task, datasets):
    pytest.importorskip("torch")
    from autobatch.bench import torch_baselines as tb
    meta, batch = datasets[task]
    losses = []
    for mode in tb.MODES:
        system = tb.System(task, mode, HIDDEN, seed=1, meta=meta)
        loss, split = system.step(batch)
        assert loss > 0 and set(split) == {"forward", "backward", "update"}
        losses.append(loss)
    # same initialisation, same data: per-instance and hand-batched code agree
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)
