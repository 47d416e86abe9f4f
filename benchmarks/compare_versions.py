#!/usr/bin/env python3
"""Compare the speed of two or more installed versions of autobatch, side by side.

Each version lives in its own virtual environment (installed non-editable, e.g.
`pip install /path/to/checkout`); this script only needs the interpreters:

    python benchmarks/compare_versions.py \\
        --python old=/work/venv-old/bin/python --python new=/work/venv-new/bin/python

For R rounds it runs, for every benchmark, one short invocation of the bench that
each interpreter has installed (`python -m autobatch.bench --task T --strategy agenda
--steps S --no-torch --json ...` for the five tasks, `python -m autobatch.bench micro
--strategy agenda ...` for the engine-overhead micro-benchmark), interpreters
alternating, so that old and new of one benchmark always run next to each other in
time. The starting interpreter rotates from round to round (old,new / new,old / ...)
so that a drift within a pair does not always favour the same side. The figure of
one invocation is the bench's own median over its timed steps (instances/s for a
task, us/node for micro); the table gives, per benchmark, the median over rounds for
each interpreter, the ratio of those medians, and the min-max of the per-round ratios.

Ratios are speed ratios: > 1 means the version is faster than the reference (the
first --python), whether the bench reports inst/s (ratio other/ref) or us/node
(ratio ref/other). The project rule: every ratio within noise (-5 %) or faster.

Nothing of the bench is duplicated here: task definitions, data, timing and the
single-thread BLAS set-up are those of the bench each interpreter has installed.
The environment is passed through as it is (OPENBLAS_CORETYPE included); only the
BLAS thread variables are set to 1, as the bench would do itself by re-executing.
Invocations run in a scratch directory, so no source tree shadows the installed
package.
"""
import argparse
import datetime
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TASKS = ("tagger", "tagger-char", "treelstm", "parser", "lm")
MICRO_SIZES = (16, 256)
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "AUTOBATCH_NUM_THREADS")

PROBE = r"""
import json, sys, platform
import numpy, scipy, autobatch
try:
    from importlib.metadata import version
    ver = version("autobatch")
except Exception:
    ver = getattr(autobatch, "__version__", "?")
print(json.dumps({"python": platform.python_version(), "executable": sys.executable,
                  "autobatch": ver, "autobatch_file": autobatch.__file__,
                  "numpy": numpy.__version__, "scipy": scipy.__version__,
                  "strategies": list(autobatch.available_strategies())}))
"""


class BenchFailed(Exception):
    pass


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", action="append", required=True, metavar="LABEL=PATH",
                    help="an interpreter with autobatch installed; repeat (2 or more). The first is "
                         "the reference of the ratios. The same path may be given under two labels "
                         "(calibration: measures the noise)")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    ap.add_argument("--steps", type=int, default=5,
                    help="timed minibatches per task invocation, after the bench's warm-up (default 5)")
    ap.add_argument("--micro-repeats", type=int, default=15,
                    help="timed steps per micro invocation (default 15)")
    ap.add_argument("--tasks", default="all",
                    help="comma list of " + ",".join(TASKS + ("micro",)) + ", or all (default)")
    ap.add_argument("--strategy", default="agenda", help="strategy to time (default agenda)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--bench-arg", action="append", default=[], metavar="ARG",
                    help="extra argument for every task invocation (e.g. --bench-arg=--native-blas); "
                         "repeatable")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="noise band for the verdict column (default 0.05 = +-5 %%)")
    ap.add_argument("--min-cpu-share", type=float, default=0.9,
                    help="an invocation whose CPU time / wall time is below this waited for the CPU "
                         "(the machine was busy): its round is left out of the 'undisturbed' column "
                         "(default 0.9)")
    ap.add_argument("--no-rotate", action="store_true",
                    help="keep the same interpreter order every round (default: rotate the start)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per invocation (default 600)")
    ap.add_argument("--json", help="write every per-round figure and the summary here")
    ap.add_argument("--out", help="also write the markdown report here")
    ap.add_argument("--keep", metavar="DIR", help="keep the bench's JSON and output of every invocation in DIR")
    a = ap.parse_args(argv)
    pythons = []
    for spec in a.python:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            ap.error(f"--python wants LABEL=PATH, got {spec!r}")
        if label in [p[0] for p in pythons]:
            ap.error(f"label {label!r} given twice")
        pythons.append((label, os.path.abspath(path) if os.sep in path else path))
    if len(pythons) < 2:
        ap.error("give at least two --python")
    a.pythons = pythons
    wanted = TASKS + ("micro",) if a.tasks == "all" else tuple(t.strip() for t in a.tasks.split(",") if t.strip())
    bad = [t for t in wanted if t not in TASKS + ("micro",)]
    if bad:
        ap.error(f"unknown task(s): {', '.join(bad)}")
    a.task_list = wanted
    if a.rounds < 1 or a.steps < 1 or a.micro_repeats < 1:
        ap.error("--rounds, --steps and --micro-repeats must be at least 1")
    return a


def child_env():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)          # the installed package, not a source tree
    env.pop("PYTHONHOME", None)
    env.update({v: "1" for v in THREAD_VARS})
    return env


def probe(python, cwd):
    try:
        out = subprocess.run([python, "-c", PROBE], cwd=cwd, env=child_env(), capture_output=True,
                             text=True, timeout=120)
    except OSError as e:
        raise SystemExit(f"{python}: {e}")
    if out.returncode:
        raise SystemExit(f"{python} cannot import autobatch:\n{out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_command(python, task, a, json_path):
    if task == "micro":
        return [python, "-m", "autobatch.bench", "micro", "--strategy", a.strategy,
                "--sizes", ",".join(map(str, MICRO_SIZES)), "--repeats", str(a.micro_repeats),
                "--json", json_path]
    return [python, "-m", "autobatch.bench", "--task", task, "--strategy", a.strategy,
            "--batch-size", str(a.batch_size), "--steps", str(a.steps), "--no-torch", "--quiet",
            "--json", json_path] + list(a.bench_arg)


def benchmarks(task_list):
    """(benchmark name, task invocation, unit) for every row of the table."""
    rows = []
    for t in task_list:
        if t == "micro":
            rows += [(f"micro-{s}", "micro", "us/node") for s in MICRO_SIZES]
        else:
            rows.append((t, t, "inst/s"))
    return rows


def run_one(python, task, a, workdir, tag):
    json_path = os.path.join(workdir, tag + ".json")
    cmd = bench_command(python, task, a, json_path)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, cwd=workdir, env=child_env(), capture_output=True, text=True,
                             timeout=a.timeout)
    except subprocess.TimeoutExpired:
        raise BenchFailed(f"timed out after {a.timeout:.0f} s: {shlex.join(cmd)}")
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # the bench is single-threaded: CPU time / wall time < 1 means it waited for the CPU
    # (other processes on the machine) or for I/O, i.e. this invocation was disturbed
    cpu_share = ((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)) / wall
    if a.keep:
        with open(os.path.join(workdir, tag + ".txt"), "w") as fh:
            fh.write(out.stdout + "\n--- stderr ---\n" + out.stderr)
    if out.returncode:
        tail = "\n".join(out.stderr.strip().splitlines()[-15:])
        raise BenchFailed(f"exit {out.returncode}: {shlex.join(cmd)}\n{tail}")
    with open(json_path) as fh:
        data = json.load(fh)
    if not a.keep:
        os.remove(json_path)
    figures = {}
    if task == "micro":
        for r in data:
            if r.get("strategy") == a.strategy and r.get("size") in MICRO_SIZES:
                figures[f"micro-{r['size']}"] = {"value": r["us_per_node"], "nodes": r.get("nodes"),
                                                 "batches": r.get("batches")}
    else:
        for r in data["rows"]:
            if r.get("system") == a.strategy and r.get("task") == task:
                ips = r.get("instances_per_s") or r["batch_size"] / r["median_step_s"]
                figures[task] = {"value": ips, "nodes": r.get("nodes_per_step"),
                                 "batches": r.get("batches_per_step"), "first_loss": r.get("first_loss")}
        figures["_blas"] = data.get("blas")
    if not any(k for k in figures if not k.startswith("_")):
        raise BenchFailed(f"no {a.strategy} row for {task} in the bench's JSON: {shlex.join(cmd)}")
    figures["_wall"] = wall
    figures["_cpu_share"] = cpu_share
    for k in list(figures):
        if not k.startswith("_"):
            figures[k]["cpu_share"] = cpu_share
    return figures


def speed_ratio(unit, value, ref):
    """> 1 when `value` is faster than `ref`."""
    return ref / value if unit == "us/node" else value / ref


def fmt(v, unit):
    if unit == "us/node":
        return f"{v:.3f} µs/node"
    return f"{v:.1f}"


def summarize(a, results, failed):
    """Markdown lines of the report."""
    labels = [p[0] for p in a.pythons]
    ref = labels[0]
    others = labels[1:]
    head = ["benchmark"] + [f"median {l}" for l in labels]
    for o in others:
        head += [f"{o} ÷ {ref} (speed)", "per-round min–max", "undisturbed rounds: median ratio (n)",
                 "verdict"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    summary = {}
    tol = a.tolerance
    for name, _, unit in benchmarks(a.task_list):
        cells = [name]
        meds = {}
        for l in labels:
            vals = [r[name]["value"] for r in results[l] if name in r]
            if (l, name) in failed or not vals:
                cells.append("failed" if (l, name) in failed else "–")
                continue
            meds[l] = statistics.median(vals)
            cells.append(fmt(meds[l], unit))
        summary[name] = {"unit": unit, "median": meds}
        for o in others:
            if ref not in meds or o not in meds:
                cells += ["–", "–", "–", "–"]
                continue
            ratio = speed_ratio(unit, meds[o], meds[ref])
            pairs = [(rr[name], ro[name]) for rr, ro in zip(results[ref], results[o])
                     if name in rr and name in ro]
            per_round = [speed_ratio(unit, po["value"], pr["value"]) for pr, po in pairs]
            clean = [speed_ratio(unit, po["value"], pr["value"]) for pr, po in pairs
                     if min(pr["cpu_share"], po["cpu_share"]) >= a.min_cpu_share]
            verdict = ("faster" if ratio >= 1 + tol else
                       f"within ±{100 * tol:.0f} %" if ratio >= 1 - tol else "**SLOWER**")
            cells += [f"{ratio:.3f}", f"{min(per_round):.3f}–{max(per_round):.3f}",
                      f"{statistics.median(clean):.3f} ({len(clean)})" if clean else "– (0)", verdict]
            summary[name][f"{o}/{ref}"] = {"ratio": ratio, "per_round": per_round,
                                           "undisturbed_median": statistics.median(clean) if clean else None,
                                           "undisturbed_rounds": len(clean)}
        lines.append("| " + " | ".join(cells) + " |")
    # sanity: the graphs built should be the same size; the first loss should agree
    sanity = []
    for name, _, unit in benchmarks(a.task_list):
        per = {}
        for l in labels:
            r = next((r[name] for r in results[l] if name in r), None)
            if r:
                per[l] = r
        if len(per) < 2:
            continue
        nodes = {l: per[l].get("nodes") for l in per}
        batches = {l: per[l].get("batches") for l in per}
        losses = {l: per[l].get("first_loss") for l in per}
        notes = []
        if len({round(v, 1) for v in nodes.values() if v is not None}) > 1:
            notes.append("nodes/step " + ", ".join(f"{l} {v:.0f}" for l, v in nodes.items()))
        if len({round(v, 1) for v in batches.values() if v is not None}) > 1:
            notes.append("batches/step " + ", ".join(f"{l} {v:.0f}" for l, v in batches.items()))
        lv = [v for v in losses.values() if v is not None]
        if lv and max(lv) - min(lv) > 1e-4 * max(1.0, abs(max(lv))):
            notes.append("first loss " + ", ".join(f"{l} {v:.6g}" for l, v in losses.items()))
        if notes:
            sanity.append(f"- {name}: " + "; ".join(notes))
    return lines, sanity, summary


def probe_all(a, workdir):
    """{label: what its interpreter has installed}; exits if one lacks the strategy."""
    labels = [p[0] for p in a.pythons]
    info = {}
    for label, py in a.pythons:
        info[label] = probe(py, workdir)
        if a.strategy not in info[label]["strategies"]:
            raise SystemExit(f"{label}: no strategy {a.strategy!r} (has {', '.join(info[label]['strategies'])})")
    for k in ("numpy", "scipy", "python"):
        if len({info[l][k] for l in labels}) > 1:
            print(f"warning: the interpreters differ in {k}: "
                  + ", ".join(f"{l} {info[l][k]}" for l in labels), file=sys.stderr)
    return info


def run_rounds(a, rows, workdir):
    """Every round: each benchmark once per interpreter, side by side. Returns
    (results[label][round][name], failed, blas, invocations, elapsed seconds)."""
    labels = [p[0] for p in a.pythons]
    # untimed warm-up: page the interpreters, numpy/scipy and the extension in
    for label, py in a.pythons:
        try:
            run_one(py, "micro", argparse.Namespace(**{**vars(a), "micro_repeats": 1}), workdir,
                    f"warmup-{label}")
        except BenchFailed as e:
            print(f"warning: warm-up of {label} failed: {e}", file=sys.stderr)

    results = {l: [] for l in labels}
    failed = {}
    blas = {}
    invocations = []         # one per bench run: label, round, task, wall, CPU share
    t_start = time.perf_counter()
    for rnd in range(a.rounds):
        for l in labels:
            results[l].append({})
        shift = 0 if a.no_rotate else rnd % len(labels)
        order = a.pythons[shift:] + a.pythons[:shift]
        for task in a.task_list:
            for label, py in order:
                names = [n for n, t, _ in rows if t == task]
                if any((label, n) in failed for n in names):
                    continue
                try:
                    figs = run_one(py, task, a, workdir, f"r{rnd:02d}-{task}-{label}")
                except BenchFailed as e:
                    print(f"FAILED {label} {task}: {e}", file=sys.stderr)
                    for n in names:
                        failed[(label, n)] = str(e)
                    continue
                invocations.append({"label": label, "round": rnd, "task": task,
                                    "wall_s": figs["_wall"], "cpu_share": figs["_cpu_share"]})
                if figs.get("_blas"):
                    blas.setdefault(label, figs["_blas"])
                for n in names:
                    if n in figs:
                        results[label][rnd][n] = figs[n]
                el = time.perf_counter() - t_start
                print(f"[{el:6.0f}s] round {rnd + 1}/{a.rounds} {task:11s} {label:8s} "
                      + "  ".join(f"{n} {fmt(figs[n]['value'], u)}" for n, _, u in rows if n in figs)
                      + f"  ({figs['_wall']:.1f} s, CPU share {figs['_cpu_share']:.2f})", file=sys.stderr)
    return results, failed, blas, invocations, time.perf_counter() - t_start


def report(a, argv_shown, info, blas, invocations, elapsed, table, sanity, failed):
    """The markdown report."""
    labels = [p[0] for p in a.pythons]
    shares = [x["cpu_share"] for x in invocations]
    md = [f"Speed comparison, {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}: "
          f"`python benchmarks/compare_versions.py {shlex.join(argv_shown)}`",
          "",
          f"strategy `{a.strategy}`, batch {a.batch_size}, {a.steps} timed steps per task invocation "
          f"(micro: {a.micro_repeats}), {a.rounds} interleaved rounds, {elapsed / 60:.1f} min. "
          f"Tasks in inst/s, micro in µs/node, medians over rounds of the bench's per-invocation "
          f"medians; ratios are speeds relative to `{labels[0]}` (> 1 = faster), verdict band ±{100 * a.tolerance:.0f} %.",
          ""]
    for l in labels:
        i = info[l]
        md.append(f"- `{l}`: {i['executable']} (autobatch {i['autobatch']} from {os.path.dirname(i['autobatch_file'])}; "
                  f"Python {i['python']}, numpy {i['numpy']}, scipy {i['scipy']}); BLAS: {blas.get(l, '?')}")
    md += ["", f"Invocations that waited for the CPU (CPU time / wall < {a.min_cpu_share}): "
               f"{sum(s < a.min_cpu_share for s in shares)} of {len(shares)}"
               + (f" (lowest share {min(shares):.2f})" if shares else "") + ".", ""]
    md += table
    if sanity:
        md += ["", "Differences in the graphs or the first loss (same code should show none):"] + sanity
    if failed:
        md += ["", "Failed:"] + [f"- {l} {n}: {msg.splitlines()[0]}" for (l, n), msg in sorted(failed.items())]
    return "\n".join(md)


def main(argv=None):
    a = parse_args(argv)
    workdir = a.keep or tempfile.mkdtemp(prefix="autobatch-compare-")
    os.makedirs(workdir, exist_ok=True)
    labels = [p[0] for p in a.pythons]
    info = probe_all(a, workdir)
    rows = benchmarks(a.task_list)
    n_inv = a.rounds * len(a.task_list) * len(labels)
    print(f"# {len(labels)} interpreters x {len(a.task_list)} benchmarks x {a.rounds} rounds "
          f"= {n_inv} invocations; scratch dir {workdir}", file=sys.stderr)
    results, failed, blas, invocations, elapsed = run_rounds(a, rows, workdir)
    table, sanity, summary = summarize(a, results, failed)
    argv_shown = sys.argv[1:] if argv is None else argv
    text = report(a, argv_shown, info, blas, invocations, elapsed, table, sanity, failed)
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text + "\n")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"argv": argv_shown, "elapsed_s": elapsed, "interpreters": info, "blas": blas,
                       "settings": {k: getattr(a, k) for k in ("rounds", "steps", "micro_repeats", "strategy",
                                                                "batch_size", "bench_arg", "tolerance")},
                       "tasks": list(a.task_list), "rounds": results, "invocations": invocations, "summary": summary,
                       "failed": {f"{l} {n}": m for (l, n), m in failed.items()}}, fh, indent=1)
    if not a.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
