"""Run DyNet programs twice, with DyNet and with autobatch, and print a table: does each
run, how long, the first and last loss it printed, DyNet's time over ours.

Two sets (docs/dynet_programs.md lists both, with the repository, path and commit of
each program):

- single-file programs (DyNet's own examples, the dynet-benchmark scripts) saved in a
  directory DIR under the names used in PROGRAMS below;
- repository programs (benchmarks/dynet_program_list.py: the nn4nlp course code, four
  parsers and taggers, xnmt's unit tests), run inside a scratch copy of their
  repository, from a directory SOURCES holding one folder per repository (`--bring`
  extracts them at the recorded commits from git mirrors or clones).

    python benchmarks/dynet_programs.py [DIR] [--sources SOURCES [--bring MIRRORS]]
        [--dynet PYTHON] [--only NAME_OR_PATTERN ...] [--jobs N] [--json OUT]

Each single-file program runs in a fresh scratch directory holding the small synthetic
data files it reads (benchmarks/dynet_program_data.py: "word|tag" lines, "tag ||| words"
lines, bracketed trees, plain text, MNIST idx files) and DIR/../support/*.py (helper
modules such as a Python 3 util.py); a repository program in a copy of its repository
whose data its recipe prepared (the repository's own data cut to a few records, or
synthetic data in the format it parses). The autobatch run is the same code with only
its import lines changed, in every .py file of the copy (`import dynet as dy` ->
`import autobatch as dy`, `import _dynet as dy` likewise, `from dynet import *` ->
`from autobatch import *`, `import dynet_config` -> `import autobatch.config as
dynet_config`). A notebook's code cells are saved as one file whose harness runs them
one by one and reports each (nb_*.py). A test suite (xnmt's) runs under pytest and its
tests' outcomes are compared one by one."""
import argparse
import concurrent.futures
import fnmatch
import functools
import glob
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from dynet_benchmark_data import extract  # noqa: E402 (after the path)
from dynet_program_data import prepare, write_data  # noqa: E402
from dynet_program_list import PROGRAMS as REPO_PROGRAMS, SOURCES  # noqa: E402

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

IMPORTS = [(re.compile(r"^(\s*)import _?dynet as (\w+)", re.M), r"\1import autobatch as \2"),
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


def _env(autobatch, extra_path):
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
    # the source tree when it holds a build (in place); else the installed package
    # (CI's fresh clone has no compiled engine: its sources would shadow the wheel)
    built = glob.glob(os.path.join(REPO, "autobatch", "**", "*.so"), recursive=True)
    path = ([REPO] if autobatch and built else []) + list(extra_path)
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    else:
        env.pop("PYTHONPATH", None)
    return env


def _text(b):
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def _execute(cmd, cwd, env, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", _text(e.stdout), _text(e.stderr)
    return rc, out, err, time.time() - t0


def _result(rc, out, err, seconds):
    lines = [l for l in (err or out).strip().splitlines() if l.strip()]
    failed = rc != 0 and (rc != "timeout" or "Traceback" in err)
    ls = losses(out + "\n" + err)
    return {"rc": rc, "seconds": round(seconds, 2), "reports": len(ls), "losses": ls,
            "first": ls[0] if ls else None, "last": ls[-1] if ls else None,
            "error": lines[-1][:160] if failed and lines else "",
            "trace": "\n".join(lines[-14:]) if failed else ""}


def run_one(prog_dir, name, python, autobatch, seed, same_init=False):
    """One single-file program of PROGRAMS, in a scratch directory of synthetic data."""
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
        extra = []
        if same_init:
            with open(os.path.join(work, "sitecustomize.py"), "w") as f:
                f.write(SAME_INIT.format(module="autobatch" if autobatch else "dynet"))
            extra.append(work)
        res = _execute([python, fname] + args, work, _env(autobatch, extra), timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _result(*res)


def rewrite_tree(root):
    """The autobatch copy of a repository: every .py file with only its imports changed.
    Returns the files changed (relative paths)."""
    changed = []
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(d, f)
            with open(path, encoding="utf-8", errors="surrogateescape") as fh:
                src = fh.read()
            new = to_autobatch(src)
            if new != src:
                with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
                    fh.write(new)
                changed.append(os.path.relpath(path, root))
    return changed


def read_junit(path):
    """test id -> [outcome, message] from a pytest --junitxml file (passed, failed,
    skipped; a collection error counts as failed)."""
    tests = {}
    if not os.path.exists(path):
        return tests
    for case in ET.parse(path).getroot().iter("testcase"):
        name = "%s::%s" % (case.get("classname", ""), case.get("name", ""))
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = "skipped" if child.tag == "skipped" else "failed"
                message = (child.get("message") or "").strip().splitlines()[:1]
                message = message[0][:200] if message else ""
                break
        tests[name] = [outcome, message]
    return tests


def run_repo(sources, name, python, autobatch, seed, scale=1.0, site=()):
    """One program of dynet_program_list.PROGRAMS in a scratch copy of its repository,
    data prepared by its recipe; for autobatch every .py file with its imports changed."""
    spec = REPO_PROGRAMS[name]
    work = tempfile.mkdtemp(prefix="dyprog-")
    try:
        copy = os.path.join(work, spec["repo"])
        shutil.copytree(os.path.join(sources, spec["repo"]), copy, symlinks=True,
                        ignore=shutil.ignore_patterns(".git"))
        rng = random.Random(seed)
        for op in spec["data"]:
            prepare(op, copy, rng)
        if autobatch:
            rewrite_tree(copy)
        junit = os.path.join(work, "junit.xml")
        cmds = [spec["argv"] + (["--junitxml", junit] if spec.get("suite") else [])]
        # then: the commands run after the first in the same copy (parse with the model
        # the first one saved); the first failure stops the sequence
        out, err, seconds = [], [], 0.0
        for argv in cmds + spec.get("then", []):
            rc, o, e, t = _execute([python] + argv, os.path.join(copy, spec["cwd"]),
                                   _env(autobatch, site), spec["limit"] * scale)
            out.append(o)
            err.append(e)
            seconds += t
            if rc != 0:
                break
        res = _result(rc, "".join(out), "".join(err), seconds)
        if spec.get("suite"):
            res["tests"] = read_junit(junit)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def status(r):
    """runs | runs (stopped at the limit) | crashes | fails."""
    if r["rc"] == 0:
        return "runs"
    if r["rc"] == "timeout" and not r["error"]:
        return "stopped"
    if isinstance(r["rc"], int) and r["rc"] < 0:
        return "crashes"
    return "fails"


def ratio(dy, ab):
    """DyNet's time over ours (> 1: autobatch faster): of whole runs when both finished,
    else of the time per loss report when both ran (one or both stopped at the limit)."""
    sd, sa = status(dy), status(ab)
    if sd == sa == "runs":
        return dy["seconds"] / max(ab["seconds"], 1e-9), "time"
    if sd in ("runs", "stopped") and sa in ("runs", "stopped") and dy["reports"] and ab["reports"]:
        return (dy["seconds"] / dy["reports"]) / (ab["seconds"] / ab["reports"]), "per report"
    return None, ""


def compare_suites(dy, ab):
    """The tests that pass or skip under DyNet but fail under autobatch, and the counts."""
    td, ta = dy.get("tests", {}), ab.get("tests", {})
    worse = {t: ta[t][1] for t in td if td[t][0] != "failed" and ta.get(t, ["failed"])[0] == "failed"}
    def count(ts, o):
        return sum(1 for v in ts.values() if v[0] == o)

    return {"dynet": {o: count(td, o) for o in ("passed", "skipped", "failed")},
            "autobatch": {o: count(ta, o) for o in ("passed", "skipped", "failed")},
            "fail_only_with_autobatch": worse}


def bring(mirrors, dest):
    """Extract each repository of SOURCES at its commit into dest/<local name>, from
    MIRRORS/<owner>+<name>/repo (the search tool's fetch), MIRRORS/<name> or any git
    directory there. Blobs the snapshot lacks (large files) are listed and skipped."""
    for local, (repo, commit) in SOURCES.items():
        cands = [os.path.join(mirrors, repo.replace("/", "+"), "repo"),
                 os.path.join(mirrors, local)]
        gits = [g for c in cands for g in (os.path.join(c, ".git"), c)
                if os.path.isdir(g) and os.path.exists(os.path.join(g, "HEAD"))]
        if not gits:
            print("%s: no git directory under %s" % (repo, mirrors))
            continue
        out = os.path.join(dest, local)
        missing = extract(gits[0], out, commit)
        print("%s @ %s -> %s (%d files the snapshot lacks: %s)" % (
            repo, commit[:10], out, len(missing), ", ".join(missing)))


def agreement(dy, ab):
    """The largest relative difference of the losses both runs printed (their common
    prefix: time-limited programs stop after different numbers of epochs)."""
    n = min(len(dy["losses"]), len(ab["losses"]))
    if n == 0:
        return ""
    worst = max(abs(a - b) / max(abs(a), 1e-3) for a, b in zip(dy["losses"], ab["losses"]))
    return "%d losses, max rel. diff %.1e" % (n, worst)


def fmt(r):
    if "tests" in r:
        n = {o: sum(1 for v in r["tests"].values() if v[0] == o)
             for o in ("passed", "skipped", "failed")}
        return "%d tests: %d passed, %d skipped, %d failed, %.0f s" % (
            len(r["tests"]), n["passed"], n["skipped"], n["failed"], r["seconds"])
    st = status(r)
    loss = "" if r["first"] is None else ", %.4g -> %.4g" % (r["first"], r["last"])
    if st == "stopped":
        return "stopped at the %d s limit after %d loss reports%s" % (
            r["seconds"], r["reports"], loss)
    if st == "crashes":
        return "crashes (signal %d)" % -r["rc"]
    if st == "fails":
        return "fails (%s)" % (r["error"] or r["rc"])
    return "runs, %.1f s%s" % (r["seconds"], loss)


def _selected(names, patterns):
    return [n for n in names if not patterns or any(n == p or fnmatch.fnmatch(n, p)
                                                    for p in patterns)]


def summary(rows):
    """How many ran under each library, and the spread of the time ratios."""
    both = [r for r in rows.values() if r.get("ratio")]
    rs = sorted(r["ratio"] for r in both)
    def ok(lib):
        return sum(1 for r in rows.values() if r[lib] and status(r[lib]) in ("runs", "stopped"))

    out = {"programs": len(rows), "run_dynet": ok("dynet"), "run_autobatch": ok("autobatch"),
           "ratios": len(rs)}
    if rs:
        out.update(median_ratio=round(statistics.median(rs), 3),
                   geomean_ratio=round(statistics.geometric_mean(rs), 3))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", help="directory holding the single-file programs")
    ap.add_argument("--sources", help="directory holding the repositories of "
                    "dynet_program_list.SOURCES, one folder each (see --bring)")
    ap.add_argument("--bring", metavar="MIRRORS", help="first extract each repository at "
                    "its commit from the git directories under MIRRORS into --sources")
    ap.add_argument("--site", help="a directory of the packages the programs need besides "
                    "DyNet, on both runs' path (default: SOURCES/site-packages if present)")
    ap.add_argument("--dynet", default=os.environ.get("AUTOBATCH_DYNET_PYTHON",
                                                      "/work/venv-dynet/bin/python"),
                    help="a Python with DyNet installed ('' to skip the DyNet runs)")
    ap.add_argument("--python", default=sys.executable, help="the Python for autobatch")
    ap.add_argument("--only", nargs="*", help="run only these programs (names or patterns)")
    ap.add_argument("--list", action="store_true", help="list the programs and stop")
    ap.add_argument("--jobs", type=int, default=1, help="runs at the same time")
    ap.add_argument("--limit-scale", type=float, default=1.0,
                    help="multiply every repository program's time limit by this")
    ap.add_argument("--seed", type=int, default=1, help="seed of the synthetic data")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--same-init", action="store_true",
                    help="start both libraries from the same parameter values (see SAME_INIT)")
    a = ap.parse_args()
    if a.bring:
        if not a.sources:
            ap.error("--bring needs --sources (where to put the repositories)")
        bring(a.bring, a.sources)
    site = a.site or (os.path.join(a.sources, "site-packages") if a.sources else "")
    site = [site] if site and os.path.isdir(site) else []
    jobs = {}  # name -> function(python, autobatch?) -> result
    if a.dir:
        for n in PROGRAMS:
            if os.path.exists(os.path.join(a.dir, PROGRAMS[n][0])):
                jobs[n] = functools.partial(run_one, a.dir, n, seed=a.seed,
                                            same_init=a.same_init)
    if a.sources:
        for n in REPO_PROGRAMS:
            if os.path.isdir(os.path.join(a.sources, REPO_PROGRAMS[n]["repo"])):
                jobs[n] = functools.partial(run_repo, a.sources, n, seed=a.seed,
                                            scale=a.limit_scale, site=site)
    names = _selected(list(jobs), a.only)
    if a.list:
        print("\n".join(names))
        return
    t0 = time.time()
    pool = concurrent.futures.ThreadPoolExecutor(max(1, a.jobs))
    # the longest first (xnmt's suite), so that the short ones fill the other workers
    longest = sorted(names, key=lambda n: -REPO_PROGRAMS.get(n, {}).get("limit", 0))
    futures = {n: (pool.submit(jobs[n], a.dynet, False) if a.dynet else None,
                   pool.submit(jobs[n], a.python, True)) for n in longest}
    rows = {}
    extra = (" same losses? |", "---|") if a.same_init else ("", "")
    print("| program | DyNet | autobatch | DyNet time / ours |" + extra[0])
    print("|---|---|---|---|" + extra[1])
    for name in names:
        dy = futures[name][0].result() if a.dynet else None
        ab = futures[name][1].result()
        r, basis = ratio(dy, ab) if dy else (None, "")
        rows[name] = {"dynet": dy, "autobatch": ab, "ratio": r and round(r, 3),
                      "ratio_of": basis}
        if "tests" in ab and dy:
            rows[name]["suites"] = compare_suites(dy, ab)
        same = " %s |" % agreement(dy, ab) if a.same_init and dy else ""
        shown = "" if r is None else "%.2f%s" % (r, " (per report)" if basis == "per report" else "")
        print("| %s | %s | %s | %s |%s" % (name, fmt(dy) if dy else "", fmt(ab), shown, same),
              flush=True)
    pool.shutdown()
    total = summary(rows)
    total["wall_seconds"] = round(time.time() - t0, 1)
    print(json.dumps(total))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": total, "programs": rows}, f, indent=1)


if __name__ == "__main__":
    main()
