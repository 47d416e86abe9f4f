"""Run a local directory of DyNet programs twice, with DyNet and with autobatch, and print
a table: does each run, how long, the first and last loss it printed.

Fetches nothing. The programs are DyNet's own examples and the dynet-benchmark scripts
(their sources, repository, path and commit, are listed in docs/dynet_programs.md); save
them in a directory under the names used in PROGRAMS below, then:

    python benchmarks/dynet_programs.py DIR [--dynet PYTHON] [--only NAME ...] [--json OUT]

Each program runs in a fresh scratch directory holding the small synthetic data files it
reads (made here, in the formats the programs parse: "word|tag" lines, "tag ||| words"
lines, bracketed trees, plain text, MNIST idx files) and DIR/../support/*.py (helper
modules such as a Python 3 util.py). The autobatch run is the same file with only its
import lines changed (`import dynet as dy` -> `import autobatch as dy`,
`from dynet import *` -> `from autobatch import *`, `import dynet_config` ->
`import autobatch.config as dynet_config`). A notebook's code cells are saved as one
file whose harness runs them one by one and reports each (nb_*.py)."""
import argparse
import glob
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# label: (file, arguments, data sets it reads, seconds allowed per run)
PROGRAMS = {
    "bench_bilstm-tagger.py":
        ("bench_bilstm-tagger.py", ["16", "16", "16", "0", "600"], ["tags"], 900),
    "bench_bilstm-tagger-sparse.py":
        ("bench_bilstm-tagger.py", ["16", "16", "16", "1", "600"], ["tags"], 900),
    "bench_bow.py": ("bench_bow.py", [], ["classes"], 900),
    "bench_rnnlm-batch.py":
        ("bench_rnnlm-batch.py", ["4", "16", "32", "0", "600"], ["text"], 900),
    "bench_treenn.py": ("bench_treenn.py", ["16", "16", "0", "3"], ["trees"], 900),
    "bench_treenn-bulk.py": ("bench_treenn-bulk.py", ["16", "16", "0", "3"], ["trees"], 900),
    "ex_xor.py": ("ex_xor.py", [], [], 600),
    "ex_xor2.py": ("ex_xor2.py", [], [], 600),
    "ex_attention.py": ("ex_attention.py", [], [], 900),
    "ex_rnnlm.py": ("ex_rnnlm.py", ["chars.txt"], ["chars"], 900),
    "ex_rnnlm-batch.py": ("ex_rnnlm-batch.py", ["chars.txt"], ["chars"], 900),
    "ex_rnnlm_transduce.py": ("ex_rnnlm_transduce.py", ["chars.txt"], ["chars"], 900),
    "nb_API.py": ("nb_API.py", [], [], 300),
    "nb_RNNs.py": ("nb_RNNs.py", [], [], 600),
    "ex_seq2seq_dynet.py": ("ex_seq2seq_dynet.py", [], ["eng-fra"], 120),
    "ex_minibatch.py": ("ex_minibatch.py", [], [], 300),
    "ex_mnist_dynet_minibatch.py":
        ("ex_mnist_dynet_minibatch.py", ["--epochs", "2", "--batch-size", "16"], ["mnist"], 900),
    "ex_mnist_dynet_autobatch.py":
        ("ex_mnist_dynet_autobatch.py", ["--epochs", "2", "--batch-size", "16"], ["mnist"], 900),
}

WORDS = "the a cat dog sat ran on under mat log big small red blue fast slow".split()
TAGS = {"the": "DT", "a": "DT", "cat": "NN", "dog": "NN", "mat": "NN", "log": "NN",
        "sat": "VB", "ran": "VB", "on": "IN", "under": "IN", "big": "JJ", "small": "JJ",
        "red": "JJ", "blue": "JJ", "fast": "RB", "slow": "RB"}


def _sentences(rng, n, lo=3, hi=9):
    return [[rng.choice(WORDS) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def _tree(rng, words):
    """A binary tree in the Stanford sentiment format: preterminals over each word."""
    nodes = ["(%d %s)" % (rng.randint(0, 4), w) for w in words]
    while len(nodes) > 1:
        i = rng.randrange(len(nodes) - 1)
        nodes[i:i + 2] = ["(%d %s %s)" % (rng.randint(0, 4), nodes[i], nodes[i + 1])]
    return nodes[0]


def _idx(path, magic, dims, data):
    with open(path, "wb") as f:
        f.write(struct.pack(">I" + "I" * len(dims), magic, *dims))
        f.write(bytes(data))


def write_data(kind, d, rng):
    if kind == "tags":
        os.makedirs(os.path.join(d, "data/tags"), exist_ok=True)
        for name, n in (("train", 400), ("dev", 40)):
            with open(os.path.join(d, "data/tags", name + ".txt"), "w") as f:
                for s in _sentences(rng, n):
                    f.write(" ".join("%s|%s" % (w, TAGS[w]) for w in s) + "\n")
    elif kind == "classes":
        os.makedirs(os.path.join(d, "data/classes"), exist_ok=True)
        for name, n in (("train", 60), ("test", 20)):
            with open(os.path.join(d, "data/classes", name + ".txt"), "w") as f:
                for s in _sentences(rng, n):
                    tag = "pos" if ("big" in s or "fast" in s) else "neg"
                    f.write("%s ||| %s\n" % (tag, " ".join(s)))
    elif kind == "text":
        os.makedirs(os.path.join(d, "data/text"), exist_ok=True)
        for name, n in (("train", 200), ("dev", 40)):
            with open(os.path.join(d, "data/text", name + ".txt"), "w") as f:
                f.writelines(" ".join(s) + "\n" for s in _sentences(rng, n))
    elif kind == "trees":
        os.makedirs(os.path.join(d, "data/trees"), exist_ok=True)
        for name, n in (("train", 300), ("dev", 50)):
            with open(os.path.join(d, "data/trees", name + ".txt"), "w") as f:
                f.writelines(_tree(rng, s) + "\n" for s in _sentences(rng, n, 2, 7))
    elif kind == "chars":
        with open(os.path.join(d, "chars.txt"), "w") as f:
            f.writelines(" ".join(s)[:24] + "\n" for s in _sentences(rng, 6, 2, 5))
    elif kind == "eng-fra":
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        subjects = [("i am", "je suis"), ("he is", "il est"), ("she is", "elle est"),
                    ("we are", "nous sommes"), ("they are", "ils sont")]
        states = [("tired", "fatigue"), ("happy", "content"), ("here", "ici"),
                  ("late", "en retard"), ("ready", "pret")]
        with open(os.path.join(d, "data/eng-fra.txt"), "w") as f:
            for _ in range(60):
                (e1, f1), (e2, f2) = rng.choice(subjects), rng.choice(states)
                f.write("%s %s .\t%s %s .\n" % (e1, e2, f1, f2))
    elif kind == "mnist":
        for prefix, n in (("train", 64), ("t10k", 32)):
            labels = [rng.randrange(10) for _ in range(n)]
            pixels = [rng.randrange(256) if rng.random() < 0.2 else 0
                      for _ in range(n * 28 * 28)]
            _idx(os.path.join(d, prefix + "-labels.idx1-ubyte"), 2049, [n], labels)
            _idx(os.path.join(d, prefix + "-images.idx3-ubyte"), 2051, [n, 28, 28], pixels)
    else:
        raise ValueError("unknown data set %r" % kind)


IMPORTS = [(re.compile(r"^(\s*)import dynet as (\w+)", re.M), r"\1import autobatch as \2"),
           (re.compile(r"^(\s*)from dynet import ", re.M), r"\1from autobatch import "),
           (re.compile(r"^(\s*)import dynet\s*$", re.M), r"\1import autobatch as dynet"),
           (re.compile(r"^(\s*)import dynet_config\s*$", re.M),
            r"\1import autobatch.config as dynet_config")]


def to_autobatch(source):
    for pattern, repl in IMPORTS:
        source = pattern.sub(repl, source)
    return source


FLOAT = r"(-?\d+\.\d+(?:e-?\d+)?)"
LABELLED = re.compile(r"(?:loss[^0-9\n-]*|^\[lr=[^]]*\] |%\) )" + FLOAT, re.I | re.M)
BARE = re.compile(r"^\s*" + FLOAT + r"(?:\s*$|\t)", re.M)


def losses(text):
    """The numbers a program printed as its loss: those after the word "loss" or after
    trainer.status()'s "[lr=...]" or a progress "(n p%)" if it printed any, else the lines
    that start with a number alone or before a tab."""
    return [float(x) for x in (LABELLED.findall(text) or BARE.findall(text))]


# --same-init: both libraries start from the same numbers. A sitecustomize module (run
# before the program) seeds Python's random and replaces ParameterCollection/Model by a
# subclass whose add_parameters/add_lookup_parameters without an init set values drawn
# from a numpy generator. Parameters that builders create inside DyNet's C++ are not
# reached, nor are dropout and noise: only programs without them can match exactly.
SAME_INIT = """
import random
import numpy as np
random.seed(0)
import {module} as _dy
_base = _dy.ParameterCollection
_rng = np.random.RandomState(0)


def _values(shape):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    s = np.sqrt(3.0 * len(shape) / sum(shape))
    return _rng.uniform(-s, s, size=shape).astype(np.float32)


class _SameInit(_base):
    def add_parameters(self, dim, *args, **kw):
        p = _base.add_parameters(self, dim, *args, **kw)
        if not args and kw.get("init") is None:
            p.set_value(_values(dim))
        return p

    def add_lookup_parameters(self, dim, *args, **kw):
        p = _base.add_lookup_parameters(self, dim, *args, **kw)
        if not args and kw.get("init") is None:
            p.init_from_array(_values(dim))
        return p


_dy.ParameterCollection = _dy.Model = _SameInit
"""


def run_one(prog_dir, name, python, autobatch, seed, same_init=False):
    fname, args, data, timeout = PROGRAMS[name]
    work = tempfile.mkdtemp(prefix="dyprog-")
    try:
        rng = random.Random(seed)
        for kind in data:
            write_data(kind, work, rng)
        support = os.path.join(os.path.dirname(os.path.abspath(prog_dir)), "support")
        if os.path.isdir(support):
            for f in os.listdir(support):
                shutil.copy(os.path.join(support, f), work)
        source = open(os.path.join(prog_dir, fname)).read()
        with open(os.path.join(work, fname), "w") as f:
            f.write(to_autobatch(source) if autobatch else source)
        env = dict(os.environ, PYTHONHASHSEED="0")
        # the source tree when it holds a build (in place); else the installed package
        # (CI's fresh clone has no compiled engine: its sources would shadow the wheel)
        built = glob.glob(os.path.join(REPO, "autobatch", "_core.*.so"))
        path = [REPO] if autobatch and built else []
        if same_init:
            with open(os.path.join(work, "sitecustomize.py"), "w") as f:
                f.write(SAME_INIT.format(module="autobatch" if autobatch else "dynet"))
            path.append(work)
        if path:
            env["PYTHONPATH"] = os.pathsep.join(path)
        t0 = time.time()
        try:
            p = subprocess.run([python, fname] + args, cwd=work, env=env, timeout=timeout,
                               capture_output=True, text=True)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout", (e.stdout or b"").decode(), (e.stderr or b"").decode()
        seconds = time.time() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    last_err = [l for l in (err or out).strip().splitlines() if l.strip()][-1:] if rc != 0 else []
    ls = losses(out + "\n" + err)
    return {"rc": rc, "seconds": round(seconds, 2), "reports": len(ls), "losses": ls,
            "first": ls[0] if ls else None,
            "last": ls[-1] if ls else None, "error": last_err[0][:160] if last_err else ""}


def agreement(dy, ab):
    """The largest relative difference of the losses both runs printed (their common
    prefix: time-limited programs stop after different numbers of epochs)."""
    n = min(len(dy["losses"]), len(ab["losses"]))
    if n == 0:
        return ""
    worst = max(abs(a - b) / max(abs(a), 1e-3) for a, b in zip(dy["losses"], ab["losses"]))
    return "%d losses, max rel. diff %.1e" % (n, worst)


def fmt(r):
    if r["rc"] == "timeout" and r["first"] is not None:
        return "stopped at the %d s limit after %d loss reports, %.4g -> %.4g" % (
            r["seconds"], r["reports"], r["first"], r["last"])
    if r["rc"] != 0:
        return "fails (%s)" % (r["error"] or r["rc"])
    loss = "" if r["first"] is None else " %.4g -> %.4g" % (r["first"], r["last"])
    return "runs, %.1f s%s" % (r["seconds"], loss)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="directory holding the programs")
    ap.add_argument("--dynet", default="/work/venv-dynet/bin/python",
                    help="a Python with DyNet installed ('' to skip the DyNet runs)")
    ap.add_argument("--python", default=sys.executable, help="the Python for autobatch")
    ap.add_argument("--only", nargs="*", help="run only these programs")
    ap.add_argument("--seed", type=int, default=1, help="seed of the synthetic data")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--same-init", action="store_true",
                    help="start both libraries from the same parameter values (see SAME_INIT)")
    a = ap.parse_args()
    names = [n for n in PROGRAMS if os.path.exists(os.path.join(a.dir, PROGRAMS[n][0]))]
    if a.only:
        names = [n for n in names if n in a.only]
    rows = {}
    extra = (" same losses? |", "---|") if a.same_init else ("", "")
    print("| program | DyNet | autobatch | time ratio |" + extra[0])
    print("|---|---|---|---|" + extra[1])
    for name in names:
        dy = run_one(a.dir, name, a.dynet, False, a.seed, a.same_init) if a.dynet else None
        ab = run_one(a.dir, name, a.python, True, a.seed, a.same_init)
        ratio = ("%.2f" % (dy["seconds"] / ab["seconds"])
                 if dy and dy["rc"] == 0 and ab["rc"] == 0 else "")
        rows[name] = {"dynet": dy, "autobatch": ab}
        same = " %s |" % agreement(dy, ab) if a.same_init and dy else ""
        print("| %s | %s | %s | %s |%s" % (name, fmt(dy) if dy else "", fmt(ab), ratio, same),
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
