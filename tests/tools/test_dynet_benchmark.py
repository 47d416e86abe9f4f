"""benchmarks/dynet_benchmark.py, the DyNet paper's benchmark scripts run under DyNet and
autobatch: the data made from a CoNLL-U corpus in the scripts' formats, the checkout and
its import rewrite, the launcher's flags, the figures read from the scripts' output, the
table; and, when a git directory of neulab/dynet-benchmark is at hand
(DYNET_BENCHMARK_SOURCES, default the workplace's mirror), its bilstm-tagger.py and
rnnlm-batch.py run end to end under autobatch on converted synthetic data."""
import importlib.util
import json
import os
import random
import subprocess
import sys
import zipfile

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")
MIRROR = os.environ.get("DYNET_BENCHMARK_SOURCES",
                        "/work/.mirror/neulab+dynet-benchmark/repo/.git")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _load("dynet_benchmark")


@pytest.fixture(scope="module")
def data():
    return _load("dynet_benchmark_data")


CONLLU = """# newdoc id = d1
# sent_id = s1
# text = Eu vi 3 gatos no telhado .
1\tEu\teu\tPRON\t_\t_\t2\tnsubj\t_\t_
2\tvi\tver\tVERB\t_\t_\t0\troot\t_\t_
3\t3\t3\tNUM\t_\t_\t4\tnummod\t_\t_
4\tgatos\tgato\tNOUN\t_\t_\t2\tobj\t_\t_
5-6\tno\t_\t_\t_\t_\t_\t_\t_\t_
5\tem\tem\tADP\t_\t_\t7\tcase\t_\t_
6\to\to\tDET\t_\t_\t7\tdet\t_\t_
7\ttelhado\ttelhado\tNOUN\t_\t_\t2\tobl\t_\t_
7.1\tx\tx\tX\t_\t_\t_\t_\t_\t_
8\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_

# sent_id = s2
1\tA|B\ta\tSYM\t_\t_\t0\troot\t_\t_
2\t10 mil\t10\tNUM\t_\t_\t1\tnummod\t_\t_

"""


def test_conllu_sentences_are_the_syntactic_words(data):
    s = data.conllu_sentences(CONLLU)
    assert s == [[("Eu", "PRON"), ("vi", "VERB"), ("3", "NUM"), ("gatos", "NOUN"),
                  ("em", "ADP"), ("o", "DET"), ("telhado", "NOUN"), (".", "PUNCT")],
                 [("A|B", "SYM"), ("10 mil", "NUM")]]


def test_tags_lines_read_back_as_the_tagger_reads_them(data):
    sents = data.conllu_sentences(CONLLU)
    lines = data.tags_lines(sents)
    assert lines[0] == "Eu|PRON vi|VERB 3|NUM gatos|NOUN em|ADP o|DET telhado|NOUN .|PUNCT\n"
    # bilstm-tagger.py's read(): split on whitespace, rsplit("|", 1)
    back = [[tuple(x.rsplit("|", 1)) for x in l.strip().split()] for l in lines]
    assert back[0] == sents[0]
    assert back[1] == [("A|B", "SYM"), ("10_mil", "NUM")]


def test_text_lines_mikolov_style_and_dev_within_train_vocabulary(data):
    rng = random.Random(0)
    words = ["casa", "rio", "sol", "mar", "luz", "Casa", "RIO", "1.500", "12", "-3"]
    sents = [[(rng.choice(words), "NOUN") for _ in range(rng.randint(1, 8))] + [(".", "PUNCT")]
             for _ in range(50)]
    train, dev = data.text_lines(sents, vocab_size=4, dev_every=5)
    assert len(dev) == 10 and len(train) == 40
    toks = {w for l in train + dev for w in l.split()}
    assert "." not in toks and all(w == w.lower() for w in toks - {"N"})
    assert "N" in toks and not any(c.isdigit() for w in toks for c in w)
    assert len({w for l in train for w in l.split()}) <= 4
    # rnnlm-batch.py: w2i from train, then dev; it asserts dev added no word
    w2i = {}
    for l in train:
        for w in l.split():
            w2i.setdefault(w, len(w2i))
    n = len(w2i)
    for l in dev:
        for w in l.split():
            w2i.setdefault(w, len(w2i))
    assert len(w2i) == n


def _checkout(tmp, lfs_tags=True):
    (tmp / "dynet-py").mkdir(parents=True)
    for d in ("tags", "text", "trees"):
        (tmp / "data" / d).mkdir(parents=True)
    (tmp / "data" / "tags" / "dev.txt").write_text("the|DT cat|NN\n")
    if lfs_tags:
        (tmp / "data" / "tags" / "train.txt").write_text(
            "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n")
    (tmp / "data" / "text" / "dev.txt").write_text(" an old dev file \n")
    (tmp / "data" / "trees" / "train.txt").write_text("(3 (2 a) (2 b))\n")
    return tmp


def test_complete_makes_only_the_missing_files(tmp_path, data):
    pd = _load("dynet_program_data")
    corpus = pd.conllu(random.Random(3), 30)
    root = _checkout(tmp_path / "c")
    made = data.complete(str(root), corpus)
    assert made == {"data/tags/train.txt": 30, "data/text/train.txt": 20, "data/text/dev.txt": 10}
    assert (root / "data" / "tags" / "dev.txt").read_text() == "the|DT cat|NN\n"
    assert (root / "data" / "trees" / "train.txt").read_text() == "(3 (2 a) (2 b))\n"
    tags = (root / "data" / "tags" / "train.txt").read_text().splitlines()
    assert all(len(x.rsplit("|", 1)) == 2 for l in tags for x in l.split())
    assert "an old dev file" not in (root / "data" / "text" / "dev.txt").read_text()
    assert data.complete(str(root), None) == {}            # nothing lacking now
    with pytest.raises(FileNotFoundError, match="dante-corpora"):
        data.complete(str(_checkout(tmp_path / "d")), None)


def test_find_corpus_reads_the_wheel_or_a_file(tmp_path, data):
    wheel = tmp_path / "dante_corpora-2.0.5-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(data.CORPUS_MEMBER, CONLLU)
    assert data.find_corpus(str(wheel)) == CONLLU
    (tmp_path / "c.conllu").write_text(CONLLU)
    assert data.find_corpus(str(tmp_path / "c.conllu")) == CONLLU


def test_prepare_changes_only_the_import_line(tmp_path, bench):
    src = _checkout(tmp_path / "src", lfs_tags=False)
    (src / "data" / "tags" / "train.txt").write_text("a|X\n")
    (src / "data" / "text" / "train.txt").write_text(" an old dev file \n")
    script = ("import time\nimport dynet as dy\nimport numpy as np\n"
              "x = 'import dynet as dy'\nm = dy.Model()\n")
    (src / "dynet-py" / "s.py").write_text(script)
    info = bench.prepare(str(src), str(tmp_path / "work"))
    assert info["made"] == {}
    out = (tmp_path / "work" / "autobatch-py" / "s.py").read_text()
    assert out == script.replace("import dynet as dy\n", "import autobatch as dy\n", 1)
    assert info["changed"]["s.py"] == [("import dynet as dy", "import autobatch as dy")]
    assert (tmp_path / "work" / "dynet-py" / "s.py").read_text() == script


def test_strip_flags_and_parse(bench):
    argv = ["s.py", "--dynet-mem", "4096", "--dynet-autobatch", "1", "16",
            "--dynet-autobatch=2", "6"]
    assert bench.strip_flags(argv) == ["s.py", "--dynet-mem", "4096", "16", "6"]
    out = ("startup time: 1.2\nacc=0.2000, time=10.0000, sent_per_sec=850.1234\n"
           "acc=0.2500, time=20.0000, sent_per_sec=900.5000\n")
    assert bench.parse(out) == (900.5, "sent_per_sec")
    assert bench.parse("nll=5.1, ppl=170.2, words=99, time=6.1, word_per_sec=2710.4\n") == (
        2710.4, "word_per_sec")
    assert bench.parse("Traceback (most recent call last):\n") == (None, None)


def test_autobatch_runs_on_the_chosen_engine_threads_and_every_blas_on_one(bench, monkeypatch):
    monkeypatch.setenv("AUTOBATCH_NUM_THREADS", "7")
    one, default, dynet = (bench.env_for("autobatch"), bench.env_for("autobatch", 0),
                           bench.env_for("dynet", 2))
    assert one["AUTOBATCH_NUM_THREADS"] == "1"
    assert "AUTOBATCH_NUM_THREADS" not in default and "AUTOBATCH_NUM_THREADS" not in dynet
    assert all(e["OPENBLAS_NUM_THREADS"] == "1" for e in (one, default, dynet))


def test_ratio_is_over_the_faster_dynet_and_the_table_shows_it(bench):
    row = {"DyNet": 1000.0, "DyNet autobatch": 1250.0, "autobatch": 2500.0}
    assert bench.ratio(row) == 2.0
    assert bench.ratio({"DyNet": 1000.0, "DyNet autobatch": None, "autobatch": 1500.0}) == 1.5
    assert bench.ratio({"DyNet": None, "DyNet autobatch": None, "autobatch": 1.0}) is None
    t = bench.table({"treenn": row}, {"treenn": "sent/s"}).splitlines()
    assert t[0] == ("| configuration | DyNet | DyNet autobatch | autobatch "
                    "| autobatch / best DyNet |")
    assert t[2] == "| treenn (sent/s) | 1000 | 1250 | 2500 | 2.00 |"
    assert bench.selected(["rnnlm-batch mb1*"]) == ["rnnlm-batch mb1", "rnnlm-batch mb16",
                                                    "rnnlm-batch mb16 sparse"]
    with pytest.raises(SystemExit):
        bench.selected(["no such"])


# A script shaped as the benchmark's: argparse knows --dynet-mem (and not
# --dynet-autobatch), a positional TIMEOUT; it trains a little and prints its figure.
TOY = """import sys, random, argparse
import dynet as dy
p = argparse.ArgumentParser()
p.add_argument("--dynet-mem", default=512, type=int)
p.add_argument("SIZE", type=int)
p.add_argument("TIMEOUT", type=int)
a = p.parse_args()
m = dy.Model()
w = m.add_parameters((1, a.SIZE), init=0)
t = dy.AdamTrainer(m)
for i in range(5):
    dy.renew_cg()
    loss = dy.squared_norm(dy.parameter(w) * dy.inputTensor([1.0] * a.SIZE) - 1)
    loss.value()
    loss.backward()
    t.update()
print("strategy=%s mem=%d shuffled=%d"
      % (dy.default_strategy(), a.dynet_mem, random.random() * 1e6))
print("nll=1.0, time=1.0, word_per_sec=%.4f" % (1000.0 + a.SIZE))
"""


def test_a_script_runs_through_the_launcher_with_the_flags(tmp_path, bench, monkeypatch):
    src = _checkout(tmp_path / "src", lfs_tags=False)
    (src / "data" / "tags" / "train.txt").write_text("a|X\n")
    (src / "data" / "text" / "train.txt").write_text(" x \n")
    (src / "dynet-py" / "toy.py").write_text(TOY)
    work = tmp_path / "work"
    bench.prepare(str(src), str(work))
    monkeypatch.setitem(bench.CONFIGS, "toy", ("toy", "3", "word/s"))
    r = bench.run(str(work), sys.executable, "autobatch", "toy", 0, 5, ["--dynet-autobatch", "2"],
                  limit=120)
    assert r["rc"] == 0 and r["throughput"] == 1003.0, r
    out = subprocess.run(bench.command(sys.executable, "autobatch", "toy", 0, 5,
                                       ["--dynet-autobatch", "2"]),
                         cwd=work, env=bench.env_for("autobatch"), capture_output=True,
                         text=True).stdout
    random.seed(5)
    assert "strategy=depth mem=4096 shuffled=%d" % (random.random() * 1e6) in out
    (work / "autobatch-py" / "toy.py").write_text(
        (work / "autobatch-py" / "toy.py").read_text().replace("loss.value()", "loss.nope()"))
    bad = bench.run(str(work), sys.executable, "autobatch", "toy", 0, 5, limit=120)
    assert bad["rc"] == 1 and bad["throughput"] is None and "AttributeError" in bad["error"]


@pytest.mark.skipif(not os.path.isfile(os.path.join(MIRROR, "HEAD")),
                    reason="no git directory of neulab/dynet-benchmark at %s "
                    "(DYNET_BENCHMARK_SOURCES)" % MIRROR)
@pytest.mark.parametrize("script,args", [("bilstm-tagger", "16 8 8 0"),
                                         ("rnnlm-batch", "4 16 32 0")])
def test_the_benchmark_scripts_run_under_autobatch(tmp_path, bench, script, args, monkeypatch):
    """The repository's own script, its import changed, on the tags or text converted
    from a small synthetic CoNLL-U corpus; TIMEOUT 0 stops it at its first report."""
    corpus = tmp_path / "corpus.conllu"
    corpus.write_text(_load("dynet_program_data").conllu(random.Random(1), 60))
    work = tmp_path / "work"
    info = bench.prepare(MIRROR, str(work), str(corpus))
    assert info["changed"][script + ".py"] == [("import dynet as dy", "import autobatch as dy")]
    monkeypatch.setitem(bench.CONFIGS, "tiny", (script, args, "word/s"))
    r = bench.run(str(work), sys.executable, "autobatch", "tiny", 0, 1, limit=300)
    assert r["rc"] == 0 and r["kind"] == "word_per_sec" and r["throughput"] > 0, r


def test_profile_splits_the_training_steps(tmp_path, bench, monkeypatch):
    """--profile's timers: the graphs on which backward ran, each closed by the next
    renew_cg (the toy's fifth graph is not), their parts adding up to the step."""
    src = _checkout(tmp_path / "src", lfs_tags=False)
    (src / "data" / "tags" / "train.txt").write_text("a|X\n")
    (src / "data" / "text" / "train.txt").write_text(" x \n")
    (src / "dynet-py" / "toy.py").write_text(TOY.replace("print(\"strategy", "dy.renew_cg()\n"
                                                         "dy.esum([dy.scalarInput(1.0)]).value()\n"
                                                         "print(\"strategy"))
    work = tmp_path / "work"
    bench.prepare(str(src), str(work))
    monkeypatch.setitem(bench.CONFIGS, "toy", ("toy", "3", "word/s"))
    path = str(tmp_path / "phases.json")
    r = bench.run(str(work), sys.executable, "autobatch", "toy", 0, 5, limit=120, profile=path)
    assert r["rc"] == 0, r
    with open(path) as f:
        p = json.load(f)
    assert p["steps"] == 5 and p["nodes"] > 0 and p["update"] > 0 and p["forward"] > 0
    assert p["rest"] > -0.05 * p["step"] and p["step"] == pytest.approx(
        sum(p[k] for k in bench.PARTS), rel=1e-9)
    lines = bench.profile_lines("toy", p, r["throughput"])
    assert lines[0].startswith("toy: 5 training steps") and len(lines) == 11
