"""The DyNet paper's own benchmark (neulab/dynet-benchmark, dynet-py/), run unchanged
under DyNet 2.2, DyNet with its autobatching, and autobatch, with the configurations
and sizes of the repository's run-tests.sh; a table of the scripts' own throughput.

    python benchmarks/dynet_benchmark.py --sources DIR [--quick] [--trials 2]
        [--tree-trials 1] [--timeout 6] [--threads 1] [--only PATTERN ...] [--dynet PYTHON]
        [--json FILE]
    python benchmarks/dynet_benchmark.py --sources DIR --profile [--only ...]

DIR is a checkout of neulab/dynet-benchmark or a git directory of it (a mirror's
`repo/.git`: its tree is extracted blob by blob, the blobs a partial snapshot lacks
skipped). Nothing is fetched at run time. The data the checkout lacks
(`data/tags/train.txt`, `data/text/train.txt`, absent or Git LFS pointers in a
snapshot) is converted from Porttinari-base (Brazilian Portuguese news, UPOS tags,
CC BY 4.0), shipped by the PyPI package dante-corpora (MIT): `pip install --no-deps
dante-corpora`, or `--corpus` its wheel or any CoNLL-U file. benchmarks/
dynet_benchmark_data.py says how each file is made; the SST trees and the dev files
of tags come from the checkout.

Each script runs in a scratch copy of the checkout (the scripts read data/... from
their working directory), byte for byte as the repository has it for DyNet, and with
only its import changed for autobatch (`import dynet as dy` -> `import autobatch as
dy`, benchmarks/dynet_programs.py's rewrite). The flags are run-tests.sh's:
`--dynet-mem 4096` for every system, read by the library at import as DyNet does, and
`--dynet-autobatch 1` for DyNet with autobatching. Every system runs with one BLAS
thread, and autobatch's engine on `--threads` (1 by default: DyNet computes on one core;
0 gives the library's default, every core). The scripts' argparse knows
`--dynet-seed`, `--dynet-mem` and `--dynet-gpus` only, so a small launcher (this file,
`--launch`) imports the library with the flags in sys.argv, as the script's own import
would, removes `--dynet-autobatch K` from sys.argv, seeds Python's `random` (the
scripts shuffle with it: every system sees the same order) and runs the script with
runpy. Each system's run is a process of its own; the systems take turns run by run,
configuration by configuration, trial by trial (the first system rotating), so that
the load of the machine falls on all alike; the table gives medians over trials.
What takes the time is fixed by the scripts, not by TIMEOUT: a tree script's epoch
(DyNet: 1-2.5 minutes on a busy 2-core machine) and rnnlm-batch's first report at
minibatch 1 (500 sentences: DyNet 3-4 minutes there); hence the defaults, 2 trials and
one of the tree scripts (about 40 minutes there, 25 with --quick).

The time budget (`--timeout`, the scripts' TIMEOUT argument): the taggers and the
language model stop at the first status report (every 500 sentences) after it; the
tree scripts check it only at the end of an epoch, so they run one epoch of the 8,544
SST trees whatever it is. The figure each script prints last is the one used:
sent_per_sec (treenn: trees per second of training, dev evaluation excluded) or
word_per_sec (taggers and language model, likewise). autobatch / best DyNet > 1 means
autobatch is faster than the faster of the two DyNet runs.

--profile runs each selected configuration once under autobatch with the engine's
profile timers on and splits a training step (install_phase_timers): build (the
script's Python and the recording of nodes until the first value()), schedule,
forward, backward (with their parts: BLAS products, operand copies, other kernels,
gradient memory, the engine's bookkeeping), the trainer's update, renew_cg and the
rest (the script's Python after backward).
"""
import argparse
import fnmatch
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# name: (script in dynet-py/, its arguments before TIMEOUT, unit); run-tests.sh's sizes
# (treenn-bulk, which run-tests.sh does not run, with treenn's). The tree scripts ("sent/s")
# train a whole epoch whatever the TIMEOUT: they get --tree-trials.
CONFIGS = {
    "treenn": ("treenn", "128 128 0", "sent/s"),
    "treenn sparse": ("treenn", "128 128 1", "sent/s"),
    "treenn-bulk": ("treenn-bulk", "128 128 0", "sent/s"),
    "bilstm-tagger": ("bilstm-tagger", "128 50 32 0", "word/s"),
    "bilstm-tagger sparse": ("bilstm-tagger", "128 50 32 1", "word/s"),
    "bilstm-tagger-withchar": ("bilstm-tagger-withchar", "20 128 50 32 0", "word/s"),
    "rnnlm-batch mb1": ("rnnlm-batch", "1 128 256 0", "word/s"),
    "rnnlm-batch mb4": ("rnnlm-batch", "4 128 256 0", "word/s"),
    "rnnlm-batch mb16": ("rnnlm-batch", "16 128 256 0", "word/s"),
    "rnnlm-batch mb64": ("rnnlm-batch", "64 128 256 0", "word/s"),
    "rnnlm-batch mb16 sparse": ("rnnlm-batch", "16 128 256 1", "word/s"),
}
FLAGS = ["--dynet-mem", "4096"]          # run-tests.sh's DYFLAGS
# system: (library, extra flags); the DyNet ones run under --dynet's interpreter
SYSTEMS = {"DyNet": ("dynet", []), "DyNet autobatch": ("dynet", ["--dynet-autobatch", "1"]),
           "autobatch": ("autobatch", [])}
THROUGHPUT = re.compile(r"(sent_per_sec|word_per_sec)=(\d+(?:\.\d*)?)")
SCRIPT_DIRS = {"dynet": "dynet-py", "autobatch": "autobatch-py"}


def strip_flags(argv, drop=("--dynet-autobatch",)):
    """argv without the given flags and their values ("--flag V" or "--flag=V")."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in drop:
            skip = True
        elif not any(a.startswith(d + "=") for d in drop):
            out.append(a)
    return out


def launch(library, script, args, seed, profile=None):
    """The child: import the library with the flags in sys.argv (it reads them, as the
    script's own import would), drop the flags the script's argparse does not know,
    run the script as __main__."""
    import importlib
    import random
    import runpy
    sys.argv = [script] + list(args)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    importlib.import_module(library)
    sys.argv = strip_flags(sys.argv)
    random.seed(seed)
    if profile is not None:
        install_phase_timers(sys.modules[library], profile)
    runpy.run_path(script, run_name="__main__")


def prepare(sources, work, corpus=None, limit=None):
    """The scratch copy in work (made anew): the checkout, its missing data made from
    the corpus, and autobatch-py/ (dynet-py/ with only the imports changed). Returns a
    report."""
    import dynet_benchmark_data as data
    from dynet_programs import to_autobatch
    shutil.rmtree(work, ignore_errors=True)
    skipped = data.checkout(sources, work)
    made = data.complete(work, data.find_corpus(corpus), limit=limit)
    src, dst = os.path.join(work, "dynet-py"), os.path.join(work, "autobatch-py")
    os.makedirs(dst, exist_ok=True)
    changed = {}
    for f in sorted(os.listdir(src)):
        if f.endswith(".py"):
            with open(os.path.join(src, f)) as fh:
                text = fh.read()
            new = to_autobatch(text)
            with open(os.path.join(dst, f), "w") as fh:
                fh.write(new)
            changed[f] = [(a, b) for a, b in zip(text.splitlines(), new.splitlines()) if a != b]
    return {"skipped": skipped, "made": made, "changed": changed}


def env_for(library, threads=1):
    """One BLAS thread for every system; autobatch's engine on `threads` threads (0: its
    default, every core the process may run on)."""
    from dynet_programs import _env
    env = _env(library == "autobatch", [])
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("AUTOBATCH_NUM_THREADS", None)
    if library == "autobatch" and threads:
        env["AUTOBATCH_NUM_THREADS"] = str(threads)
    return env


def command(python, library, config, timeout, seed, flags=(), profile=None):
    script, args, _ = CONFIGS[config]
    path = os.path.join(SCRIPT_DIRS[library], script + ".py")
    cmd = [python, os.path.abspath(__file__), "--launch", library, "--seed", str(seed)]
    if profile:
        cmd += ["--profile-out", profile]
    return cmd + ["--", path] + FLAGS + list(flags) + args.split() + [str(timeout)]


def parse(out):
    """(the last throughput the script printed, its kind) or (None, None)."""
    found = THROUGHPUT.findall(out)
    return (float(found[-1][1]), found[-1][0]) if found else (None, None)


def run(work, python, library, config, timeout, seed, flags=(), limit=900, profile=None,
        threads=1):
    t0 = time.time()
    cmd = command(python, library, config, timeout, seed, flags, profile)
    try:
        p = subprocess.run(cmd, cwd=work, env=env_for(library, threads), capture_output=True,
                           text=True, timeout=limit)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        out, err = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                    for x in (e.stdout, e.stderr)]
    value, kind = parse(out)
    lines = [l for l in err.strip().splitlines() if l.strip()]
    error = "" if rc == 0 and value else (lines[-1][:200] if lines else "rc %s" % rc)
    return {"rc": rc, "seconds": round(time.time() - t0, 1), "throughput": value,
            "kind": kind, "error": error}


def median(results):
    vals = [r["throughput"] for r in results if r["throughput"]]
    return statistics.median(vals) if vals else None


def ratio(row):
    """autobatch's median over the faster DyNet's (None without both)."""
    dys = [row[s] for s in ("DyNet", "DyNet autobatch") if row.get(s)]
    if not row.get("autobatch") or not dys:
        return None
    return row["autobatch"] / max(dys)


def table(medians, units):
    names = list(SYSTEMS)
    lines = ["| configuration | " + " | ".join(names) + " | autobatch / best DyNet |",
             "|---|" + "---:|" * (len(names) + 1)]
    for config, row in medians.items():
        r = ratio(row)
        cells = ["%.0f" % row[s] if row.get(s) else "-" for s in names]
        lines.append("| %s (%s) | %s | %s |" % (config, units[config], " | ".join(cells),
                                                "%.2f" % r if r else "-"))
    return "\n".join(lines)


def selected(patterns):
    if not patterns:
        return list(CONFIGS)
    out = [c for c in CONFIGS if any(c == p or fnmatch.fnmatch(c, p) for p in patterns)]
    if not out:
        raise SystemExit("no configuration matches %s (have: %s)" % (patterns, ", ".join(CONFIGS)))
    return out


def benchmark(a, work, configs):
    systems = [s for s in SYSTEMS if a.dynet or SYSTEMS[s][0] == "autobatch"]
    results = {c: {s: [] for s in systems} for c in configs}
    for trial in range(max(a.trials, a.tree_trials)):
        for config in configs:
            if trial >= (a.tree_trials if CONFIGS[config][2] == "sent/s" else a.trials):
                continue
            order = systems[trial % len(systems):] + systems[:trial % len(systems)]
            for system in order:
                library, flags = SYSTEMS[system]
                python = a.python if library == "autobatch" else a.dynet
                r = run(work, python, library, config, a.timeout, a.seed + trial, flags,
                        limit=a.limit, threads=a.threads)
                results[config][system].append(r)
                print("trial %d  %-24s %-16s %s" % (
                    trial + 1, config, system,
                    "%.1f %s, %.0f s" % (r["throughput"], CONFIGS[config][2], r["seconds"])
                    if r["throughput"] else "FAILED (%s): %s" % (r["rc"], r["error"])),
                    file=sys.stderr, flush=True)
    medians = {c: {s: median(results[c][s]) for s in systems} for c in configs}
    return results, medians


# ---- --profile: where autobatch's time goes ----

PARTS = ("build", "schedule", "forward", "backward", "update", "renew_cg", "rest")
ENGINE = ("gemm", "gather", "kernels", "memory", "engine")


def install_phase_timers(dy, out_path):
    """Time the training steps of an unchanged script: each graph's cg().stats() (with
    the profile timers on) is read when renew_cg starts the next one, the trainer's
    update and renew_cg are timed around the calls. A graph on which backward ran is a
    training step (dev evaluation runs forward only); a step lasts from one renew_cg's
    return to the next one's call. The sums go to out_path as JSON at exit."""
    import atexit
    import time
    from autobatch.model.trainers import Trainer
    clock = time.perf_counter
    acc = dict.fromkeys(PARTS + ENGINE + ("step", "steps", "nodes", "batches"), 0.0)
    state = {"since": None, "update": 0.0, "renew": 0.0}
    real_renew, real_update = dy.renew_cg, Trainer.update

    def renew_cg(*args, **kw):
        t0 = clock()
        s = dy.cg().stats()
        if s["backward_calls"] and state["since"] is not None:
            acc["steps"] += 1
            acc["step"] += t0 - state["since"] + state["renew"]
            acc["nodes"] += s["nodes"]
            acc["batches"] += s["batches"]
            for k in ("build", "schedule", "forward", "backward"):
                acc[k] += s["seconds"][k]
            for k in ENGINE:
                acc[k] += s["profile"][k]
            acc["update"] += state["update"]
            acc["renew_cg"] += state["renew"]
        t1 = clock()
        out = real_renew(*args, **kw)
        state.update(since=clock(), update=0.0)
        state["renew"] = state["since"] - t1
        return out

    def update(self, *args, **kw):
        t0 = clock()
        try:
            return real_update(self, *args, **kw)
        finally:
            state["update"] += clock() - t0

    def dump():
        known = sum(acc[k] for k in PARTS[:-1])
        acc["rest"] = acc["step"] - known
        with open(out_path, "w") as f:
            json.dump(acc, f)

    dy.set_profiling(True)
    dy.renew_cg = renew_cg
    Trainer.update = update
    atexit.register(dump)


def profile_lines(config, p, throughput):
    """The per-step split of one profiled run, as text."""
    n = max(p["steps"], 1)
    us = {k: 1e6 * p[k] / n for k in PARTS + ENGINE + ("step",)}
    lines = ["%s: %d training steps (graphs), %.0f nodes and %.0f batches a step; "
             "%.1f %s while profiled" % (config, p["steps"], p["nodes"] / n, p["batches"] / n,
                                         throughput or 0, CONFIGS[config][2]),
             "  %-10s %9s %6s" % ("part", "us/step", "share")]
    for k in PARTS:
        lines.append("  %-10s %9.1f %5.1f%%" % (k, us[k], 100 * us[k] / max(us["step"], 1e-9)))
    lines.append("  %-10s %9.1f" % ("step", us["step"]))
    lines.append("  forward + backward: " + ", ".join("%s %.1f" % (k, us[k]) for k in ENGINE)
                 + " us; build %.2f us a node" % (us["build"] / max(p["nodes"] / n, 1)))
    return lines


def profile(a, work, configs):
    out = {}
    for config in configs:
        path = os.path.join(work, "phases.json")
        r = run(work, a.python, "autobatch", config, a.timeout, a.seed, limit=a.limit,
                profile=path, threads=a.threads)
        if not os.path.exists(path) or not r["throughput"]:
            print("%s: no profile (%s)" % (config, r["error"]))
            continue
        with open(path) as f:
            p = json.load(f)
        os.remove(path)
        print("\n".join(profile_lines(config, p, r["throughput"])), flush=True)
        out[config] = dict(p, throughput=r["throughput"])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", help="a dynet-benchmark checkout or git directory")
    ap.add_argument("--corpus", help="the corpus for missing data: a dante-corpora wheel or "
                    "a CoNLL-U file (default: the installed dante package)")
    ap.add_argument("--work", help="keep the scratch copy in WORK/dynet-benchmark (made "
                    "anew; default: a temporary directory, removed at the end)")
    ap.add_argument("--dynet", default=os.environ.get("AUTOBATCH_DYNET_PYTHON",
                                                      "/work/venv-dynet/bin/python"),
                    help="a Python with DyNet 2.2 ('' to run autobatch only)")
    ap.add_argument("--python", default=sys.executable, help="the Python for autobatch")
    ap.add_argument("--only", nargs="*", help="configurations (names or patterns)")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--tree-trials", type=int, default=1, help="trials of the tree scripts, "
                    "which train one epoch whatever the TIMEOUT")
    ap.add_argument("--timeout", type=int, default=6, help="the scripts' TIMEOUT, seconds")
    ap.add_argument("--quick", action="store_true", help="1 trial, TIMEOUT 3")
    ap.add_argument("--limit", type=int, default=900, help="seconds before a run is killed")
    ap.add_argument("--seed", type=int, default=1, help="Python's random seed, per trial +1")
    ap.add_argument("--threads", type=int, default=1, help="autobatch's engine threads "
                    "(DyNet runs on one); 0: the library's default, every core")
    ap.add_argument("--profile", action="store_true", help="split autobatch's steps by phase")
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--launch", help=argparse.SUPPRESS)
    ap.add_argument("--profile-out", help=argparse.SUPPRESS)
    ap.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.launch:
        return launch(a.launch, a.rest[0], a.rest[1:], a.seed, a.profile_out)
    if not a.sources:
        ap.error("--sources is required")
    if a.quick:
        a.trials, a.tree_trials, a.timeout = 1, 1, 3
    configs = selected(a.only)
    scratch = a.work or tempfile.mkdtemp(prefix="dynet-benchmark-")
    work = os.path.join(scratch, "dynet-benchmark")
    try:
        info = prepare(os.path.abspath(a.sources), work, a.corpus)
        print("checkout in %s; lacked %s; made %s" % (
            work, ", ".join(info["skipped"]) or "nothing",
            ", ".join("%s (%d lines)" % kv for kv in info["made"].items()) or "nothing"),
            file=sys.stderr)
        if a.profile:
            res = {"profile": profile(a, work, configs)}
        else:
            t0 = time.time()
            results, medians = benchmark(a, work, configs)
            print(table(medians, {c: CONFIGS[c][2] for c in configs}))
            print("%d trials (tree scripts: %d), TIMEOUT %d s, autobatch on %s, %.0f s in all" % (
                a.trials, a.tree_trials, a.timeout,
                "%d engine thread(s)" % a.threads if a.threads else "its default threads",
                time.time() - t0))
            res = {"medians": medians, "ratios": {c: ratio(medians[c]) for c in configs},
                   "runs": results, "trials": a.trials, "tree_trials": a.tree_trials,
                   "timeout": a.timeout, "threads": a.threads}
        res["data"] = info["made"]
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f, indent=1)
    finally:
        if not a.work:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
