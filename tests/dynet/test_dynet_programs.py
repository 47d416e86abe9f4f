"""Regressions found by running public DyNet programs with `import autobatch as dy`
(docs/dynet_programs.md lists the programs; benchmarks/dynet_programs.py runs them).
Expected numbers are dynet38's (DyNet 2.2), measured with the same inputs."""
import glob
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import autobatch as dy
from autobatch.errors import DimensionError


# DyNet's MNIST examples reshape to (3136, 1), so W2 * h is a column (10, 1): DyNet's
# pickneglogsoftmax and hinge take a column as they take a vector.

def test_pickneglogsoftmax_of_a_column():
    dy.renew_cg()
    x = dy.inputTensor(np.arange(10.).reshape(10, 1))
    loss = dy.pickneglogsoftmax(x, 3)
    assert loss.dim() == ((1,), 1)
    assert loss.value() == pytest.approx(6.458629608154297, rel=1e-6)  # dynet38


def test_hinge_of_a_column():
    dy.renew_cg()
    x = dy.inputTensor(np.arange(10.).reshape(10, 1))
    assert dy.hinge(x, 3).value() == pytest.approx(27.0)  # dynet38


def test_pickneglogsoftmax_batch_of_a_column():
    dy.renew_cg()
    x = dy.inputTensor(np.ones((10, 1, 2)), batched=True)
    assert dy.pickneglogsoftmax_batch(x, [1, 2]).value() == pytest.approx([np.log(10)] * 2)


@pytest.mark.parametrize("f", [lambda x, i: dy.pickneglogsoftmax(x, i),
                               lambda x, i: dy.hinge(x, i, 0.5)], ids=["picknls", "hinge"])
def test_column_gives_the_vector_values_and_gradients(f):
    v = np.random.RandomState(0).randn(7, 3).astype(np.float32)
    grads = []
    for shape in [(7,), (7, 1)]:
        dy.renew_cg()
        xs = [dy.inputTensor(v[:, b].reshape(shape)) for b in range(3)]
        losses = [f(x, b + 2) for b, x in enumerate(xs)]
        total = dy.esum(losses)
        vals = [l.value() for l in losses]
        total.backward(full=True)
        grads.append((vals, [x.gradient().reshape(7) for x in xs]))
    (v1, g1), (v2, g2) = grads
    assert np.allclose(v1, v2)
    for a, b in zip(g1, g2):
        assert np.allclose(a, b)


def test_a_matrix_is_still_refused():
    dy.renew_cg()
    with pytest.raises(DimensionError):
        dy.pickneglogsoftmax(dy.inputTensor(np.ones((10, 2))), 1)
    with pytest.raises(DimensionError):
        dy.hinge(dy.inputTensor(np.ones((1, 10))), 1)


# benchmarks/dynet_programs.py: the runner of such programs (no DyNet needed here)

def _runner():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks", "dynet_programs.py")
    spec = importlib.util.spec_from_file_location("dynet_programs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_runner_changes_only_the_import_lines():
    r = _runner()
    src = ("import dynet as dy\nfrom dynet import *\nimport dynet\nimport dynet_config\n"
           "    import dynet as dn\nx = 'import dynet as dy'  # import dynet\n")
    assert r.to_autobatch(src) == (
        "import autobatch as dy\nfrom autobatch import *\nimport autobatch as dynet\n"
        "import autobatch.config as dynet_config\n    import autobatch as dn\n"
        "x = 'import dynet as dy'  # import dynet\n")


def test_runner_reads_the_losses_programs_print():
    r = _runner()
    assert r.losses("iter 0: train loss/sent=0.6805, time=0.10s\nloss: 0.5\n") == [0.6805, 0.5]
    assert r.losses("[lr=0.001 clips=0 updates=500] 0.25\nepoch 1 finished\n") == [0.25]
    assert r.losses("0m 5s (- 1m 3s) (5000 5%) 3.4567\n") == [3.4567]
    assert r.losses("2.5\n149.12\tczdz\nabc 3.0\n") == [2.5, 149.12]


def test_runner_runs_a_program_with_autobatch(tmp_path):
    r = _runner()
    progs = tmp_path / "src"
    progs.mkdir()
    (progs / "ex_xor.py").write_text(
        "import dynet as dy\nimport numpy as np\n"
        "m = dy.ParameterCollection()\np = m.add_parameters((1, 2), init=0)\n"
        "t = dy.SimpleSGDTrainer(m, 0.1)\n"
        "for i in range(3):\n"
        "    dy.renew_cg()\n"
        "    loss = dy.squared_norm(dy.parameter(p) * dy.inputTensor([1.0, 2.0]) - 1)\n"
        "    print('loss: %.4f' % loss.value())\n"
        "    loss.backward()\n    t.update()\n")
    res = r.run_one(str(progs), "ex_xor.py", sys.executable, True, 1)
    assert res["rc"] == 0, res
    assert res["first"] == 1.0 and res["last"] < res["first"]
    assert r.fmt(res).startswith("runs")


@pytest.mark.parametrize("kind", ["tags", "classes", "text", "trees", "chars", "mnist",
                                  "eng-fra"])
def test_runner_writes_its_synthetic_data(tmp_path, kind):
    import random
    r = _runner()
    r.write_data(kind, str(tmp_path), random.Random(0))
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all(p.stat().st_size > 0 for p in files)


def test_runner_compares_the_losses_both_printed():
    r = _runner()
    dy, ab = {"losses": [2.0, 1.0, 0.5]}, {"losses": [2.0, 1.001]}
    assert r.agreement(dy, ab) == "2 losses, max rel. diff 1.0e-03"
    assert r.agreement(dy, {"losses": []}) == ""


def test_runner_same_init_starts_from_the_same_values(tmp_path):
    """The --same-init module makes a program's parameters the generator's numbers."""
    r = _runner()
    progs = tmp_path / "src"
    progs.mkdir()
    (progs / "ex_xor.py").write_text(
        "import dynet as dy\nimport numpy as np\n"
        "m = dy.Model()\np = m.add_parameters((2, 3))\nq = m.add_parameters(4, init=0)\n"
        "rng = np.random.RandomState(0)\n"
        "s = np.sqrt(6.0 / 5)\nwant = rng.uniform(-s, s, size=(2, 3)).astype(np.float32)\n"
        "assert np.array_equal(p.as_array(), want), (p.as_array(), want)\n"
        "assert not q.as_array().any()\n"
        "print('loss: 1.0')\n")
    res = r.run_one(str(progs), "ex_xor.py", sys.executable, True, 1, same_init=True)
    assert res["rc"] == 0, res


# The repository programs (benchmarks/dynet_program_list.py): their data recipes, the
# import rewriting of a whole copy, the suite comparison, the extraction of sources.

def _data():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks",
                        "dynet_program_data.py")
    spec = importlib.util.spec_from_file_location("dynet_program_data", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_runner_rewrites_the_imports_of_every_file_of_a_copy(tmp_path):
    r = _runner()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "main.py").write_text("import dynet as dy\nimport pkg.mod\n")
    (tmp_path / "pkg" / "mod.py").write_text("if True:\n    import _dynet as dynet\n")
    (tmp_path / "pkg" / "plain.py").write_text("import numpy\n")
    (tmp_path / "notes.txt").write_text("import dynet as dy\n")
    assert sorted(r.rewrite_tree(str(tmp_path))) == ["main.py", "pkg/mod.py"]
    assert (tmp_path / "main.py").read_text() == "import autobatch as dy\nimport pkg.mod\n"
    assert (tmp_path / "pkg" / "mod.py").read_text() == "if True:\n    import autobatch as dynet\n"
    assert (tmp_path / "pkg" / "plain.py").read_text() == "import numpy\n"
    assert (tmp_path / "notes.txt").read_text() == "import dynet as dy\n"


def test_data_head_keeps_lines_or_blank_line_blocks(tmp_path):
    d = _data()
    (tmp_path / "lines.txt").write_text("".join("s%d\n" % i for i in range(10)))
    (tmp_path / "blocks.conll").write_text("1\ta\n2\tb\n\n1\tc\n\n\n1\td\n2\te\n\n")
    rng = random.Random(0)
    d.prepare(("head", "lines.txt", 3), str(tmp_path), rng)
    d.prepare(("head", "blocks.conll", 2), str(tmp_path), rng)
    d.prepare(("head_as", "lines.txt", "sub/copy.txt", 2), str(tmp_path), rng)
    assert (tmp_path / "lines.txt").read_text() == "s0\ns1\ns2\n"
    assert (tmp_path / "blocks.conll").read_text() == "1\ta\n2\tb\n\n1\tc\n\n"
    assert (tmp_path / "sub" / "copy.txt").read_text() == "s0\ns1\n"
    with pytest.raises(ValueError):
        d.prepare(("head", "lines.txt", 0), str(tmp_path), rng)
    with pytest.raises(ValueError):
        d.prepare(("no such step", "x"), str(tmp_path), rng)


def test_data_short_trees_picks_trees_by_their_words(tmp_path):
    d = _data()
    trees = ["(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat))))",
             "(TOP (S (NP (DT a) (JJ big) (JJ red) (NN dog)) (VP (VBD ran))))",
             "(TOP (NP (NN log)))", "(TOP (S (NP (NN dog)) (VP (VBD sat))))"]
    (tmp_path / "t.txt").write_text("".join(t + "\n" for t in trees))
    d.prepare(("short_trees", "t.txt", "out.txt", 1, 5, 3), str(tmp_path), random.Random(0))
    assert (tmp_path / "out.txt").read_text() == trees[2] + "\n" + trees[3] + "\n"


def _check_projective(sentence):
    rows = [l.split("\t") for l in sentence.splitlines() if l and not l.startswith("#")]
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    assert all(len(r) == 10 for r in rows)
    heads = [int(r[6]) for r in rows]
    assert heads.count(0) == 1 and all(0 <= h <= len(rows) for h in heads)
    arcs = [(min(i, h), max(i, h)) for i, h in enumerate(heads, 1) if h]
    for a, b in arcs:  # no two arcs cross
        assert not any(a < c < b < e or c < a < e < b for c, e in arcs)


def test_data_conllu_sentences_are_projective_trees(tmp_path):
    d = _data()
    d.prepare(("conllu", "data/train.conllu", 40), str(tmp_path), random.Random(3))
    text = (tmp_path / "data" / "train.conllu").read_text()
    sentences = d.records(text)
    assert len(sentences) == 40
    for s in sentences:
        _check_projective(s)


def test_data_tagged_notebook_and_mkdir(tmp_path):
    d = _data()
    d.prepare(("tagged", "data/t.tsv", 5), str(tmp_path), random.Random(0))
    blocks = d.records((tmp_path / "data" / "t.tsv").read_text())
    assert len(blocks) == 5
    assert all(len(l.split("\t")) == 2 for b in blocks for l in b.split("\n") if l)
    nb = {"cells": [{"cell_type": "markdown", "source": ["# title"]},
                    {"cell_type": "code", "source": ["%matplotlib inline\n", "x = 1\n"]},
                    {"cell_type": "code", "source": ["!ls\n", "print(x + 1)"]}]}
    (tmp_path / "a.ipynb").write_text(json.dumps(nb))
    d.prepare(("notebook", "a.ipynb", "a.ipynb.py"), str(tmp_path), random.Random(0))
    assert (tmp_path / "a.ipynb.py").read_text() == "x = 1\n\nprint(x + 1)\n"
    d.prepare(("mkdir", "out/models"), str(tmp_path), random.Random(0))
    assert (tmp_path / "out" / "models").is_dir()


def test_data_2to3_makes_python_2_source_run(tmp_path):
    pytest.importorskip("lib2to3", reason="Python 3.13 removed lib2to3")
    d = _data()
    (tmp_path / "old.py").write_text("import pickle\nfor i in xrange(2):\n    print 'n', i\n"
                                     "with open('p', 'w') as f:\n    pickle.dump(1, f)\n")
    d.prepare(("2to3", "."), str(tmp_path), random.Random(0))
    d.prepare(("replace", "old.py", "open('p', 'w')", "open('p', 'wb')"), str(tmp_path),
              random.Random(0))
    with pytest.raises(ValueError):
        d.prepare(("replace", "old.py", "no such text", ""), str(tmp_path), random.Random(0))
    out = subprocess.run([sys.executable, "old.py"], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert out == "n 0\nn 1\n"


def test_data_evalb_scores_labelled_brackets(tmp_path):
    d = _data()
    d.prepare(("evalb", "EVALB"), str(tmp_path), random.Random(0))
    gold = "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT a) (NN mat))))))"
    # predicted: the PP attached as a sibling of VP (VP spans 1 word instead of 4)
    pred = "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat)) (PP (IN on) (NP (DT a) (NN mat)))))"
    (tmp_path / "g.txt").write_text(gold + "\n")
    (tmp_path / "p.txt").write_text(pred + "\n")
    out = subprocess.run([str(tmp_path / "EVALB" / "evalb"), "-p", "COLLINS.prm", "g.txt",
                          "p.txt"], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    # gold S, NP, VP(1-5), PP, NP; predicted S, NP, VP(1-2), PP, NP: 4 of 5 match
    assert out.split() == ["Bracketing", "Recall", "=", "80.00", "Bracketing", "Precision",
                           "=", "80.00", "Bracketing", "FMeasure", "=", "80.00"]


def test_runner_says_runs_stopped_crashes_or_fails_and_the_ratio():
    r = _runner()
    ok = r._result(0, "loss 2.0\nloss 1.0\n", "", 4.0)
    assert r.status(ok) == "runs" and ok["losses"] == [2.0, 1.0]
    slow = r._result(0, "loss 2.0\n", "", 8.0)
    assert r.ratio(slow, ok) == (2.0, "time")
    limited = r._result("timeout", "loss 3.0\nloss 2.0\nloss 1.5\nloss 1.0\n", "", 10.0)
    assert r.status(limited) == "stopped"
    value, basis = r.ratio(limited, ok)          # 2.5 s per report over 2 s per report
    assert basis == "per report" and value == pytest.approx(1.25)
    crash = r._result(-11, "", "", 1.0)
    assert r.status(crash) == "crashes" and r.fmt(crash) == "crashes (signal 11)"
    err = r._result(1, "", "Traceback (most recent call last):\nValueError: bad\n", 1.0)
    assert r.status(err) == "fails" and r.fmt(err) == "fails (ValueError: bad)"
    assert "Traceback" in err["trace"]
    hung = r._result("timeout", "", "Traceback (most recent call last):\nKeyError: 1\n", 9.0)
    assert r.status(hung) == "fails"
    assert r.ratio(ok, err) == (None, "")


def test_runner_compares_the_tests_of_a_suite(tmp_path):
    r = _runner()

    def junit(path, cases):
        body = "".join('<testcase classname="test.m.C" name="%s">%s</testcase>' % c
                       for c in cases)
        path.write_text('<?xml version="1.0"?><testsuites><testsuite>%s</testsuite>'
                        '</testsuites>' % body)
        return r.read_junit(str(path))

    dy = {"tests": junit(tmp_path / "dy.xml", [
        ("t1", ""), ("t2", '<skipped message="no gpu"/>'), ("t3", '<failure message="x"/>'),
        ("t4", "")])}
    ab = {"tests": junit(tmp_path / "ab.xml", [
        ("t1", ""), ("t2", '<error message="AttributeError: vanilla_lstm_gates&#10;more"/>'),
        ("t3", '<failure message="x"/>'), ("t4", "")])}
    assert dy["tests"]["test.m.C::t2"] == ["skipped", "no gpu"]
    c = r.compare_suites(dy, ab)
    assert c["dynet"] == {"passed": 2, "skipped": 1, "failed": 1}
    assert c["autobatch"] == {"passed": 2, "skipped": 0, "failed": 2}
    assert c["fail_only_with_autobatch"] == {"test.m.C::t2": "AttributeError: vanilla_lstm_gates"}
    assert r.fmt(dict(ab, seconds=3.0)).startswith("4 tests: 2 passed, 0 skipped, 2 failed")
    assert r.read_junit(str(tmp_path / "missing.xml")) == {}


def test_runner_runs_a_repository_program_with_its_recipe(tmp_path, monkeypatch):
    r = _runner()
    src = tmp_path / "src" / "toyrepo"
    (src / "lib").mkdir(parents=True)
    (src / "lib" / "__init__.py").write_text("")
    # the dynet import sits in a module the program imports: the copy is rewritten whole
    (src / "lib" / "model.py").write_text(
        "import dynet as dy\n\n\ndef step(m, p, t, x):\n    dy.renew_cg()\n"
        "    loss = dy.squared_norm(dy.parameter(p) * dy.inputTensor(x) - 1)\n"
        "    v = loss.value()\n    loss.backward()\n    t.update()\n    return v\n")
    (src / "train.py").write_text(
        "import sys\nfrom lib.model import step, dy\n"
        "m = dy.ParameterCollection()\np = m.add_parameters((1, 2), init=0)\n"
        "t = dy.SimpleSGDTrainer(m, 0.05)\n"
        "rows = [l.split('\\t') for l in open(sys.argv[1]).read().split('\\n') if l]\n"
        "for _ in range(3):\n    for i, (w, tag) in enumerate(rows):\n"
        "        v = step(m, p, t, [1.0, float(i % 3)])\n    print('loss: %.4f' % v)\n")
    (src / "predict.py").write_text(
        "import sys\nimport dynet as dy\nm = dy.ParameterCollection()\n"
        "(p,) = dy.load('out/model', m)\nprint('loss: %.4f' % float(sys.argv[1]))\n")
    (src / "train.py").write_text((src / "train.py").read_text() + "dy.save('out/model', [p])\n")
    monkeypatch.setitem(r.REPO_PROGRAMS, "toy", dict(
        repo="toyrepo", cwd=".", argv=["train.py", "data/t.tsv"],
        then=[["predict.py", "0.125"], ["predict.py", "not a number"], ["predict.py", "9"]],
        data=[("tagged", "data/t.tsv", 4), ("mkdir", "out")], limit=120))
    res = r.run_repo(str(tmp_path / "src"), "toy", sys.executable, True, 1)
    # train, then the first predict (which loads what train saved), then the failing one
    assert r.status(res) == "fails" and res["error"].startswith("ValueError"), res
    assert res["reports"] == 4 and res["last"] == 0.125 and res["losses"][2] < res["first"]
    assert not (src / "data").exists()  # the recipe ran in a scratch copy
    assert "import dynet as dy" in (src / "lib" / "model.py").read_text()


def test_runner_brings_a_repository_at_its_commit(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("no git")
    r = _runner()
    origin = tmp_path / "mirrors" / "someone+toy" / "repo"
    (origin / "d").mkdir(parents=True)
    (origin / "d" / "a.py").write_text("first\n")
    git = ["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    (origin / "d" / "a.py").write_text("second\n")
    subprocess.run(git + ["commit", "-q", "-am", "two"], check=True)
    monkeypatch.setattr(r, "SOURCES", {"toy": ("someone/toy", commit)})
    r.bring(str(tmp_path / "mirrors"), str(tmp_path / "sources"))
    assert (tmp_path / "sources" / "toy" / "d" / "a.py").read_text() == "first\n"


def test_runner_selects_programs_by_name_or_pattern():
    r = _runner()
    names = ["nn4nlp 01-intro/bow.py", "nn4nlp 02-lm/nn-lm.py", "uuparser graph-based"]
    assert r._selected(names, None) == names
    assert r._selected(names, ["nn4nlp 02*", "uuparser graph-based"]) == names[1:]


def test_program_list_names_its_sources_and_known_steps():
    r = _runner()
    known = {"head", "head_as", "short_trees", "conllu", "tagged", "mkdir", "evalb",
             "notebook", "2to3", "replace"}
    for repo, commit in r.SOURCES.values():
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and re.fullmatch(r"[0-9a-f]{40}", commit)
    for name, spec in r.REPO_PROGRAMS.items():
        assert spec["repo"] in r.SOURCES, name
        assert spec["argv"] and spec["limit"] > 0, name
        assert all(argv for argv in spec.get("then", [])), name
        assert all(step[0] in known for step in spec["data"]), name


def test_runner_runs_autobatch_from_this_source_tree(tmp_path):
    """A built source tree is the library the autobatch runs import, not an installed
    copy (the compiled modules live in the subpackages: autobatch/api/core.*.so, ...)."""
    r = _runner()
    if not glob.glob(os.path.join(r.REPO, "autobatch", "api", "core.*.so")):
        pytest.skip("the source tree has no compiled engine (tests run against a wheel)")
    (tmp_path / "ex_xor.py").write_text(r.to_autobatch("import dynet as dy\nprint(dy.__file__)\n"))
    p = subprocess.run([sys.executable, "ex_xor.py"], cwd=tmp_path, capture_output=True,
                       text=True, env=r._env(True, []), check=True)
    assert p.stdout.strip() == os.path.join(r.REPO, "autobatch", "__init__.py")
