"""Smoke tests: every example trains (its loss goes down) and gives the same numbers
whether or not the engine batches (strategy "none" vs "agenda")."""
import importlib.util
import pathlib

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SMALL = {
    "xor": ["--iterations", "60"],
    "bilstm_tagger": ["--epochs", "2", "--n-train", "64", "--n-dev", "16", "--batch-size", "16",
                      "--hidden", "16", "--word-dim", "16"],
    "treelstm": ["--epochs", "3", "--n-train", "96", "--n-dev", "16", "--batch-size", "16",
                 "--hidden", "16", "--word-dim", "16"],
}


@pytest.fixture(scope="module", params=sorted(SMALL))
def runs(request):
    name = request.param
    module = load(name)
    return name, {s: module.main(SMALL[name] + ["--strategy", s]) for s in ("none", "agenda")}


def test_loss_goes_down(runs):
    name, results = runs
    losses = results["agenda"]["losses"]
    assert losses[-1] < losses[0], f"{name}: losses {losses}"


def test_same_losses_with_and_without_batching(runs):
    name, results = runs
    for a, b in zip(results["none"]["losses"], results["agenda"]["losses"]):
        assert a == pytest.approx(b, rel=1e-4), name


def test_agenda_batches(runs):
    name, results = runs
    stats = results["agenda"]["stats"]
    stats = stats.get("agenda", stats)          # the tagger and tree examples report both
    assert stats["batches"] < stats["nodes"] / 2, f"{name}: {stats['nodes']} nodes, {stats['batches']} batches"


def test_tree_reader():
    treelstm = load("treelstm")
    tree = treelstm.parse_ptb("(3 (2 good) (4 (2 very) (4 (4 fine)))) ")
    assert str(tree) == "(3 (2 good) (4 (2 very) (4 fine)))"
    assert tree.leaves() == ["good", "very", "fine"]
    with pytest.raises(ValueError):
        treelstm.parse_ptb("(3 (2 a) (2 b) (2 c))")


def test_conll_reader(tmp_path):
    tagger = load("bilstm_tagger")
    path = tmp_path / "train.tsv"
    path.write_text("the\tDET\ndog\tNOUN\n\n\nruns\tVERB\n")
    assert tagger.read_conll(path) == [[("the", "DET"), ("dog", "NOUN")], [("runs", "VERB")]]
    result = tagger.main(["--train", str(path), "--dev", str(path), "--epochs", "2", "--hidden", "8",
                          "--word-dim", "8"])
    assert 0.0 <= result["accuracy"] <= 1.0
