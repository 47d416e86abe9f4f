"""Smoke tests: every example trains (its loss goes down) and gives the same numbers
whether or not the engine batches (strategy "none" vs "agenda")."""
import functools
import importlib.util
import pathlib

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(name):
    name = MODULE.get(name, name)
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SMALL = {
    "xor": ["--iterations", "60"],
    "bilstm_tagger": ["--epochs", "4", "--n-train", "64", "--n-dev", "16", "--batch-size", "16",
                      "--hidden", "16", "--word-dim", "16", "--lr", "0.02"],
    "treelstm": ["--epochs", "3", "--n-train", "96", "--n-dev", "16", "--batch-size", "16",
                 "--hidden", "16", "--word-dim", "16"],
    "tagger_char": ["--char-model", "--epochs", "4", "--n-train", "64", "--n-dev", "16",
                    "--batch-size", "16", "--hidden", "16", "--word-dim", "16", "--char-dim", "8",
                    "--lr", "0.02"],
    "parser": ["--epochs", "5", "--n-train", "64", "--n-dev", "16", "--batch-size", "16",
               "--hidden", "16", "--word-dim", "16", "--pos-dim", "8", "--lr", "0.01"],
    "cnn": ["--epochs", "4", "--n-train", "600", "--n-dev", "100"],
    "lm": ["--epochs", "3", "--n-train", "96", "--n-dev", "16", "--batch-size", "16",
           "--hidden", "16", "--word-dim", "16", "--vocab-size", "40"],
}
MODULE = {"tagger_char": "bilstm_tagger"}      # runs of an example with other flags


@functools.cache
def run(name, strategy):
    """The results of one small run (each is made once per test session)."""
    return load(name).main(SMALL[name] + ["--strategy", strategy])


@pytest.fixture(scope="module", params=sorted(SMALL))
def runs(request):
    name = request.param
    return name, {s: run(name, s) for s in ("none", "agenda")}


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
    result = tagger.main(["--train", str(path), "--dev", str(path), "--epochs", "10", "--hidden", "8",
                          "--word-dim", "8"])
    assert result["accuracy"] == 1.0                        # three training words, learnt by heart


def test_conll_reader_with_char_model(tmp_path):
    tagger = load("bilstm_tagger")
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    train.write_text("the\tDET\ndog\tNOUN\n\nthe\tDET\ncat\tNOUN\n\nthe\tDET\ndog\tNOUN\n")
    dev.write_text("the\tDET\ncow\tNOUN\n")                  # "cow" is unknown: spelled out
    result = tagger.main(["--train", str(train), "--dev", str(dev), "--epochs", "10", "--hidden", "8",
                          "--word-dim", "8", "--char-model", "--rare", "2"])
    assert result["accuracy"] == 1.0 and result["unknown_accuracy"] == 1.0
    with pytest.raises(ValueError):                          # characters fill half the word vector each way
        tagger.main(["--epochs", "1", "--n-train", "4", "--n-dev", "2", "--word-dim", "7", "--char-model"])


def test_char_model_spells_rare_words():
    result, plain = run("tagger_char", "agenda"), run("bilstm_tagger", "agenda")
    # the same step with character LSTMs for the rare words has more nodes
    assert result["stats"]["agenda"]["nodes"] > plain["stats"]["agenda"]["nodes"]
    assert result["accuracy"] >= 0.5                        # 8 tags; 0.3 after 2 epochs


def test_parser_decodes_with_mid_graph_values():
    results = {s: run("parser", s) for s in ("none", "agenda")}
    for strategy in ("none", "agenda"):
        assert results[strategy]["uas"] >= 0.6 > results[strategy]["baseline_uas"] + 0.2
        decode = results[strategy]["decode_stats"][strategy]
        assert decode["forward_calls"] > 1                  # one npvalue() per transition round
    assert results["none"]["uas"] == pytest.approx(results["agenda"]["uas"], abs=0.02)
    none, agenda = (results["agenda"]["decode_stats"][s] for s in ("none", "agenda"))
    assert agenda["batches"] < none["batches"] / 2          # later nodes still batch across sentences


def test_cnn_learns_the_shapes():
    result = run("cnn", "agenda")
    assert result["accuracy"] >= 0.8            # chance is 0.2 (five shapes)
    # both convolutions of all images of the last step (600 % 32 = 24 images): two batches
    assert result["stats"]["batch_sizes"]["conv2d"] == {24: 2}


def test_lm_beats_uniform():
    result = run("lm", "agenda")
    assert 1.0 < result["perplexity"] < result["uniform_perplexity"]
    assert result["source_perplexity"] < result["uniform_perplexity"]


def test_parser_oracle_rebuilds_the_tree():
    parser = load("parser")
    for sentence in parser.synthetic_treebank(50, seed=3):
        heads = [0] + [head for _, _, head in sentence]
        config = parser.Configuration(len(sentence))
        for action, *features in parser.oracle(heads):
            assert config.legal(action) and tuple(features) == config.features()
            config.apply(action)
        assert config.done() and config.heads[1:] == heads[1:]
    with pytest.raises(ValueError):
        parser.oracle([0, 3, 4, 0, 3])                      # 1->3 crosses 2->4: not projective


CONLLU = """# sent_id = 1
# text = The dog barks.
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t3:conj\t_

1\tA\ta\tDET\tDT\t_\t3\tdet\t_\t_
2\tB\tb\tVERB\tVB\t_\t0\troot\t_\t_
3\tC\tc\tNOUN\tNN\t_\t2\tobj\t_\t_
4\tD\td\tADV\tRB\t_\t1\tadvmod\t_\t_
"""


def test_conllu_reader(tmp_path):
    parser = load("parser")
    path = tmp_path / "train.conllu"
    path.write_text(CONLLU)
    sentences = parser.read_conllu(path)
    assert sentences[0] == [("The", "DET", 2), ("dog", "NOUN", 3), ("barks", "VERB", 0), (".", "PUNCT", 3)]
    assert sentences[1] == [("do", "AUX", 3), ("n't", "PART", 3), ("go", "VERB", 0)]
    assert len(sentences) == 3
    result = parser.main(["--train", str(path), "--dev", str(path), "--epochs", "10", "--hidden", "8",
                          "--word-dim", "8", "--pos-dim", "4", "--min-count", "1", "--lr", "0.02"])
    assert result["skipped"] == 1                           # the third sentence is not projective
    assert result["uas"] >= 0.8                             # 9 of the 11 heads (0.36 untrained)
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tThe\tthe\tDET\n")
    with pytest.raises(ValueError):
        parser.read_conllu(bad)


def test_text_reader(tmp_path):
    lm = load("lm")
    path = tmp_path / "train.txt"
    path.write_text("the dog barks\n\nthe cat  sleeps\nthe dog sleeps\n")
    assert lm.read_text(path) == [["the", "dog", "barks"], ["the", "cat", "sleeps"], ["the", "dog", "sleeps"]]
    result = lm.main(["--train", str(path), "--dev", str(path), "--epochs", "2", "--hidden", "8",
                      "--word-dim", "8"])
    # the, dog, sleeps (seen twice or more) + <s>, </s>, <unk>; all but <s> can come next
    assert result["uniform_perplexity"] == 5
    assert result["source_perplexity"] is None and result["perplexity"] > 1.0
