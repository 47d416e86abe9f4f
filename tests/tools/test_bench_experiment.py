"""The strategy experiment (`python -m autobatch.bench strategies`): system specs with
fusion off, the tables' arithmetic on known rows, and one tiny run whose tables match
the graphs it ran. No timing is asserted."""
import pytest

import autobatch as dy
from autobatch.bench import data, experiment, options, run


def test_system_specs():
    assert options.parse_system("agenda") == ("agenda", 1, True, True)
    assert options.parse_system("lookahead@2:unfused") == ("lookahead", 2, False, True)
    assert options.parse_system("agenda:nolayout") == ("agenda", 1, True, False)
    assert options.parse_system("depth:unfused:nolayout") == ("depth", 1, False, False)
    with pytest.raises(ValueError, match="only :unfused, :nolayout"):
        options.parse_system("agenda:fast")
    assert experiment.systems(["agenda", "depth"], ["on", "off"]) == \
        ["agenda", "agenda:unfused", "depth", "depth:unfused"]
    assert experiment.systems(["agenda"], ["off"]) == ["agenda:unfused"]


def test_unknown_suffix_is_refused(capsys):
    with pytest.raises(SystemExit):
        run.main(["--task", "tagger", "--strategy", "agenda:fast", "--no-torch", "--steps", "1"])
    assert "only :unfused" in capsys.readouterr().err


def test_unfused_system_runs_without_fusion():
    meta, batch = data.make("treelstm", 3, 1)
    chains, losses = {}, {}
    for spec in ("agenda", "agenda:unfused"):
        system = run.AutobatchSystem("treelstm", spec, 8, 1, meta, 0.1, "ops")
        losses[spec] = system.step(batch)[0]
        chains[spec] = dy.cg().stats()["fused"]["chains"]
    assert chains["agenda"] > 0 and chains["agenda:unfused"] == 0
    assert losses["agenda"] == pytest.approx(losses["agenda:unfused"], rel=1e-5)
    rows = run.run_task("treelstm", ["agenda", "agenda:unfused"], batch_size=3, hidden=8,
                        steps=1, torch_modes=[], variants=("ops",))
    by = {r["system"]: r for r in rows}
    # one graph, one lower bound: fusion changes how its batches run, not the graph
    assert by["agenda"]["lower_bound_per_step"] == by["agenda:unfused"]["lower_bound_per_step"]


def row(task, system, blb, seconds, schedule, plb=1.0):
    return {"task": task, "system": system, "batches_over_lower_bound": blb,
            "passes_over_lower_bound": plb, "median_step_s": seconds,
            "split_s": {"schedule": schedule}}


def test_summary_arithmetic():
    rows = [row("a", "agenda", 2.0, 1.0, 0.1, 1.25), row("a", "lookahead", 1.0, 0.5, 0.1),
            row("b", "agenda", 1.5, 2.0, 0.2), row("b", "lookahead", 1.02, 4.0, 0.4)]
    cells, summary = experiment.summarise(rows)
    assert cells["a"]["lookahead"] == (1.0, 0.5, 0.2, 1.0)
    assert cells["b"]["lookahead"] == (1.02, 2.0, 0.1, 1.0)
    blb, time, fastest, near = summary["lookahead"]
    assert blb == pytest.approx((1.0 * 1.02) ** 0.5)
    assert time == pytest.approx(1.0)
    assert (fastest, near) == (1, 2)
    assert summary["agenda"][2:] == (1, 0)
    text = "\n".join(experiment.tables(cells, summary, markdown=True))
    assert "| b | 1.50 | 1.02 |" in text
    assert "| a | 1.25 | 1.00 |" in text
    assert "| a | 1.00 (10%) | 0.50 (20%) |" in text


def test_experiment_tables_match_its_rows(tmp_path, capsys):
    md = tmp_path / "t.md"
    rows = experiment.main(["--task", "treelstm,birnn", "--strategy", "agenda,lookahead",
                            "--batch-size", "3", "--hidden", "8", "--steps", "1", "--quiet",
                            "--markdown", str(md)])
    assert {r["system"] for r in rows} == {"agenda", "agenda:unfused", "lookahead",
                                           "lookahead:unfused"}
    text = md.read_text()
    for r in rows:
        assert r["batches_over_lower_bound"] >= 1.0
        assert r["task"] in text
    lookahead = next(r for r in rows if r["task"] == "birnn" and r["system"] == "lookahead:unfused")
    assert f"{lookahead['batches_over_lower_bound']:.2f}" in text
    assert "Over all workloads" in capsys.readouterr().out
