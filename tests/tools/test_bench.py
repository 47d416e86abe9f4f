"""Smoke tests of the benchmark suite: every task runs one tiny minibatch under every
built-in strategy and gives the same loss, in both model variants (builder, ops); the
PyTorch baselines (if torch is installed) and the DyNet baseline (if an interpreter
with DyNet is found: AUTOBATCH_DYNET_PYTHON, or this one) run too, and without DyNet
the bench says so and goes on. No timing is asserted."""
import json
import os
import subprocess
import sys

import pytest

import autobatch as dy
from autobatch.bench import data, run, tasks

HIDDEN = 8
BATCH = 3


@pytest.fixture(scope="module")
def datasets():
    return {t: data.make(t, BATCH, seed=1) for t in tasks.TASKS}


def one_step(task, strategy, meta, batch, variant="builder", model=None):
    model = model or tasks.make(task, HIDDEN, seed=1, meta=meta, variant=variant)
    trainer = dy.SimpleSGDTrainer(model.pc, 0.1)
    dy.renew_cg(strategy=strategy)
    loss = dy.esum([model.loss(i) for i in batch])
    value = loss.value()
    loss.backward()
    trainer.update()
    return value, dy.cg().stats()


def loss_after(model, batch):
    dy.renew_cg()
    return dy.esum([model.loss(i) for i in batch]).value()


@pytest.mark.parametrize("variant", tasks.VARIANTS)
@pytest.mark.parametrize("task", tasks.TASKS)
def test_strategies_agree(task, variant, datasets, strategies):
    meta, batch = datasets[task]
    losses = {}
    for s in strategies:
        value, st = one_step(task, s, meta, batch, variant)
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


# ------------------------------------------------------------ model variants --

@pytest.mark.parametrize("task", [t for t in tasks.TASKS if t != "treelstm"])
def test_ops_variant_is_the_builder_variant_outside_the_tree(task, datasets):
    """Only the Tree-LSTM differs between the variants: elsewhere the same seed gives
    the same parameters and the same graph, so the same losses before and after a step."""
    meta, batch = datasets[task]
    got = {}
    for v in tasks.VARIANTS:
        model = tasks.make(task, HIDDEN, seed=1, meta=meta, variant=v)
        value, st = one_step(task, "agenda", meta, batch, model=model)
        got[v] = (value, st["nodes"], loss_after(model, batch))
    assert got["ops"] == got["builder"]


def test_treelstm_ops_variant_computes_the_builder_math(strategy, datasets):
    """The ops Tree-LSTM (one matrix per gate, logistic/tanh/cmult nodes) given the
    builder's parameter values (its stacked matrices cut into gate rows) gives the
    builder's loss, and after one SGD step still does (so the gradients agree too)."""
    meta, batch = datasets["treelstm"]
    builder = tasks.make("treelstm", HIDDEN, seed=1, meta=meta, variant="builder")
    ops = tasks.make("treelstm", HIDDEN, seed=2, meta=meta, variant="ops")
    assert loss_after(ops, batch) != pytest.approx(loss_after(builder, batch), rel=1e-4)
    ops.copy_builder_parameters(builder)
    vb, st_b = one_step("treelstm", strategy, meta, batch, model=builder)
    vo, st_o = one_step("treelstm", strategy, meta, batch, model=ops)
    assert vo == pytest.approx(vb, rel=1e-5)
    assert st_o["nodes"] > st_b["nodes"]           # written out: more, smaller nodes
    assert loss_after(ops, batch) == pytest.approx(loss_after(builder, batch), rel=1e-4)


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="variant"):
        tasks.make("lm", HIDDEN, seed=1, meta=None, variant="fused")
    with pytest.raises(SystemExit, match="variant"):
        run.main(["--task", "lm", "--variant", "fused", "--no-torch", "--quiet"])


def test_runner_variants_rows(tmp_path):
    meta = run.main(["--task", "treelstm", "--strategy", "agenda", "--variant", "all",
                     "--batch-size", "2", "--hidden", "8", "--steps", "1", "--no-torch",
                     "--quiet"])
    rows = {r["variant"]: r for r in meta["rows"]}
    assert set(rows) == {"builder", "ops"} and meta["variants"] == ["builder", "ops"]
    assert rows["ops"]["ops_vs_builder"] > 0 and "ops_vs_builder" not in rows["builder"]
    assert rows["ops"]["nodes_per_step"] > rows["builder"]["nodes_per_step"]
    assert rows["ops"]["batches_over_lower_bound"] >= 1.0


# ------------------------------------------------------------------- DyNet --

def has_dynet(exe):
    try:
        return subprocess.run([exe, "-c", "import dynet_config, dynet"], capture_output=True,
                              timeout=120).returncode == 0
    except OSError:
        return False


def dynet_python():
    exe = os.environ.get("AUTOBATCH_DYNET_PYTHON") or sys.executable
    return exe if has_dynet(exe) else None


def test_dynet_skipped_cleanly_without_dynet(tmp_path, capsys):
    if has_dynet(sys.executable):
        pytest.skip("this interpreter has DyNet")
    for flags in (["--dynet"], ["--dynet-python", str(tmp_path / "no-such-python")],
                  ["--dynet-python", sys.executable]):
        meta = run.main(["--task", "lm", "--strategy", "agenda", "--batch-size", "2",
                         "--hidden", "8", "--steps", "1", "--no-torch", "--quiet"] + flags)
        err = capsys.readouterr().err
        assert "DyNet baseline skipped" in err, flags
        assert [r["system"] for r in meta["rows"]] == ["agenda"] and "dynet" not in meta


def test_dynet_not_asked_for_is_not_mentioned(capsys):
    run.main(["--task", "lm", "--strategy", "agenda", "--batch-size", "2", "--hidden", "8",
              "--steps", "1", "--no-torch", "--quiet"])
    assert "DyNet" not in capsys.readouterr().err


def test_dynet_baseline_runs_the_ops_variant():
    exe = dynet_python()
    if exe is None:
        pytest.skip("no interpreter with DyNet (set AUTOBATCH_DYNET_PYTHON)")
    meta = run.main(["--task", "treelstm,parser", "--strategy", "agenda", "--variant", "ops",
                     "--batch-size", "2", "--hidden", "8", "--steps", "2", "--no-torch",
                     "--quiet", "--dynet-python", exe, "--dynet-autobatch", "0,1"])
    rows = {(r["task"], r["system"]): r for r in meta["rows"]}
    for t in ("treelstm", "parser"):
        for name in ("dynet", "dynet-agenda"):
            r = rows[(t, name)]
            assert r["variant"] == "ops" and r["instances_per_s"] > 0 and r["first_loss"] > 0
        # DyNet starts from our initial values: the same model code gives the same
        # losses, on the first minibatch and after an SGD step (same gradients)
        ours = rows[(t, "agenda")]
        assert len(ours["losses"]) == 3 and ours["vs_dynet-agenda"] > 0
        for name in ("dynet", "dynet-agenda"):
            assert rows[(t, name)]["losses"] == pytest.approx(ours["losses"], rel=1e-4)
