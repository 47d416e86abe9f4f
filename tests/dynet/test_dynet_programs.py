"""Regressions found by running public DyNet programs with `import autobatch as dy`
(docs/dynet_programs.md lists the programs; benchmarks/dynet_programs.py runs them).
Expected numbers are dynet38's (DyNet 2.2), measured with the same inputs."""
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
