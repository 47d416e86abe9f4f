"""The task benchmark: full training steps on the five tasks of BENCHMARKS.md and the
other workloads of the autobatching literature (docs/bench.md).

For every task, every chosen strategy and (when PyTorch is installed) the two PyTorch
baselines train on the same minibatches, interleaved step by step so that machine
noise hits them alike: step k of every system runs before step k+1 of any. The
first minibatch is a warm-up; the figure is the median over the timed ones.

A training step: renew the graph, one loss per instance from per-instance code
(`tasks.py`), esum, forward, backward, trainer update.

`--variant builder|ops|all`: the model variants of `tasks.py` (builder: our fused
builders; ops: cells written with ops as DyNet users write them). `--dynet` adds
DyNet itself on the ops variant, in a subprocess run by an interpreter that has the
`dynet38` wheel (`--dynet-python`), on the same data, stepped in the same loop; its
step time includes one pipe round trip (~0.1 ms).

    python -m autobatch.bench --task all --strategy all --json out.json --plot out.png
    python -m autobatch.bench --task treelstm --variant all --dynet-python /path/to/venv/bin/python
"""
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import Any

import numpy as np

import autobatch as dy
from autobatch.bench import blas, data, dynet_worker, options, tasks
from autobatch.engine import layout
from autobatch.bench.options import check_systems, parse_list, parse_system
from autobatch.progress import progress as progress_bar

TORCH_MODES = ("eager", "batched")
from autobatch.bench.profile import PROFILE_PARTS, profile_table  # noqa: F401 (re-exported)
DYNET_NAMES = {0: "dynet", 1: "dynet-agenda"}    # by DyNet's autobatch setting


# ------------------------------------------------------------------ systems --

class AutobatchSystem:
    """A task model with its own parameters and trainer, run under one strategy;
    `strategy@N` runs it on N engine threads (dy.set_num_threads), set before each step,
    `strategy:unfused` with fusion off, `strategy:nolayout` with the memory-layout pass
    off (parse_system)."""

    def __init__(self, task, strategy, hidden, seed, meta, lr, variant="builder"):
        self.name = strategy
        self.variant = variant
        self.strategy, self.threads, self.fusion, self.layout = parse_system(strategy)
        self.task = tasks.make(task, hidden, seed, meta, variant)
        self.trainer = dy.SimpleSGDTrainer(self.task.pc, lr)

    def step(self, batch):
        if dy.get_num_threads() != self.threads:
            dy.set_num_threads(self.threads)
        layout.set_layout(self.layout)
        t0 = time.perf_counter()
        dy.renew_cg(strategy=self.strategy, fusion=self.fusion)
        loss = dy.esum([self.task.loss(inst) for inst in batch])
        value = loss.value()
        loss.backward()
        t1 = time.perf_counter()
        self.trainer.update()
        t2 = time.perf_counter()
        st = dy.cg().stats()
        split = dict(st["seconds"])
        split["update"] = t2 - t1
        if "profile" in st:         # --profile: dy.set_profiling(True)
            split.update({"p_" + k: st["profile"][k] for k in PROFILE_PARTS if k in st["profile"]})
        info = {"nodes": st["nodes"], "batches": st["batches"], "passes": st["passes"],
                "arena_bytes": st["arena_bytes"] + st["grad_arena_bytes"],
                "unbatched_nodes": st["unbatched_nodes"]}
        return float(value), split, info


class DynetSystem:
    """DyNet on the ops variant of a task, in a worker process (dynet_worker.py) run by
    `python_exe`; `step` runs the next minibatch there, in order."""
    variant = "ops"

    def __init__(self, python_exe, task, hidden, seed, batches, lr, autobatch=1, mem="2048",
                 params=None):
        """`params`: an .npz of initial values (export_parameters), or None for DyNet's own."""
        self.name = DYNET_NAMES[int(autobatch)]
        self.next = 0
        self.log = tempfile.TemporaryFile(mode="w+")
        bs = len(batches[0])
        self.proc = subprocess.Popen(
            [python_exe, dynet_worker.__file__, task, str(hidden), str(seed), str(len(batches)),
             str(bs), str(lr), str(int(autobatch)), str(mem)] + ([params] if params else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        hello = self._read()
        if hello.get("checksum") != dynet_worker.checksum(batches):
            self.close()
            raise RuntimeError("DyNet worker: its minibatches differ from ours "
                               "(data.make gave other data under its numpy?)")

    def _read(self):
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.log.seek(0)
            raise RuntimeError(f"DyNet worker ended (exit {self.proc.returncode}):\n"
                               + self.log.read()[-3000:])
        return json.loads(line)

    def step(self, batch):
        self.proc.stdin.write(f"STEP {self.next}\n")
        self.proc.stdin.flush()
        self.next += 1
        r = self._read()
        return r["loss"], {k: r[k] for k in ("forward", "backward", "update")}

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("QUIT\n")
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def export_parameters(model, path):
    """The initial values of a task model, for DyNet to start from (dynet_worker.py)."""
    arrays = {f"p{k}": p.as_array() for k, p in enumerate(model.pc.parameters_list())}
    arrays.update({f"l{k}": p.as_array() for k, p in enumerate(model.pc.lookup_parameters_list())})
    np.savez(path, **arrays)


def find_dynet_python(path=None):
    """(interpreter, None) for an interpreter that imports dynet, else (None, why)."""
    candidates = [path] if path else [sys.executable]
    for exe in candidates:
        try:
            r = subprocess.run([exe, "-c", "import dynet_config, dynet"], capture_output=True,
                               text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"{exe}: {e}"
        if r.returncode == 0:
            return exe, None
        why = (r.stderr.strip().splitlines() or ["import failed"])[-1]
    return None, (f"{candidates[0]} cannot import dynet ({why}); install the dynet38 wheel "
                  "there (pip install dynet38, or autobatch[dynet]) or pass "
                  "--dynet-python PATH of an interpreter that has it")


def sgemm_gflops(n=2048, repeats=3):
    """Best-of-`repeats` GFLOP/s of one n x n x n sgemm through scipy's BLAS (the
    library the engine calls)."""
    from scipy.linalg.blas import sgemm
    rng = np.random.default_rng(0)
    a = np.asfortranarray(rng.standard_normal((n, n), dtype=np.float32))
    b = np.asfortranarray(rng.standard_normal((n, n), dtype=np.float32))
    c = np.asfortranarray(np.zeros((n, n), dtype=np.float32))
    sgemm(1.0, a, b, 0.0, c, overwrite_c=1)          # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        sgemm(1.0, a, b, 0.0, c, overwrite_c=1)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best / 1e9


def maxrss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------------- run --

def key(s):
    return (s.name, getattr(s, "variant", "-"))


def run_task(task: str, strategies: list[str], batch_size: int, hidden: int, steps: int,
             torch_modes: list[str], seed: int = 0, lr: float = 0.1, progress: Any = None,
             variants: tuple[str, ...] = ("builder",), dynet: str | None = None,
             dynet_autobatch: tuple[int, ...] = (1,), dynet_mem: str = "2048") -> list[dict[str, Any]]:
    """Rows (one per system and variant) for one task at one batch size and hidden size.
    `dynet`: an interpreter with DyNet, or None for no DyNet baseline. `progress`: a bar
    (autobatch.progress) advanced by one per training step of all the systems, or None."""
    meta, instances = data.make(task, batch_size * (steps + 1), seed)
    batches = [instances[k * batch_size:(k + 1) * batch_size] for k in range(steps + 1)]
    systems = [AutobatchSystem(task, s, hidden, seed, meta, lr, v)
               for v in variants for s in strategies]
    if torch_modes:
        from autobatch.bench import torch_baselines as tb
        systems += [tb.System(task, m, hidden, seed, meta, lr) for m in torch_modes]
    workers = []
    tmp = tempfile.TemporaryDirectory() if dynet else None
    try:
        if dynet:
            # DyNet starts from our ops variant's initial values: same model, same first loss
            params = os.path.join(tmp.name, "params.npz")
            export_parameters(tasks.make(task, hidden, seed, meta, "ops"), params)
        for ab in (dynet_autobatch if dynet else ()):
            if progress:
                progress.set_postfix_str(f"{task} h={hidden} B={batch_size}: starting DyNet "
                                         f"(autobatch={ab})")
            workers.append(DynetSystem(dynet, task, hidden, seed, batches, lr, ab, dynet_mem,
                                       params))
        systems += workers
        return _run_systems(task, systems, batches, batch_size, hidden, steps, seed, meta,
                            progress)
    finally:
        for w in workers:
            w.close()
        if tmp:
            tmp.cleanup()


def _run_systems(task, systems, batches, batch_size, hidden, steps, seed, meta, progress):
    flop_model = tasks.make(task, hidden, seed, meta)     # FLOPs are the same in every variant
    rec = {key(s): {"seconds": [], "split": [], "info": [], "loss": None, "losses": []}
           for s in systems}
    lower_bounds = {}          # per variant: the graphs differ
    for k, batch in enumerate(batches):
        for s in systems:
            if progress:
                progress.set_postfix_str(f"{task} h={hidden} B={batch_size} "
                                         f"{'warm-up' if k == 0 else f'step {k}/{steps}'} "
                                         f"{s.name}/{key(s)[1]}")
            t0 = time.perf_counter()
            out = s.step(batch)
            sec = time.perf_counter() - t0
            r = rec[key(s)]
            r["losses"].append(float(out[0]))
            if k == 0:
                r["loss"] = out[0]
                continue
            r["seconds"].append(sec)
            r["split"].append(out[1])
            if len(out) > 2:
                r["info"].append(out[2])
            if isinstance(s, AutobatchSystem):
                lb = lower_bounds.setdefault(s.variant, [])
                if len(lb) < k:
                    lb.append((dy.cg().batch_lower_bound()[0],
                               dy.cg().batch_lower_bound(passes=True)[0]))
        if progress:
            progress.update()          # one training step of every system
    flops = [sum(flop_model.flops(i) for i in b) for b in batches[1:]]
    rss = maxrss_mb()
    rows = []
    for s in systems:
        r = rec[key(s)]
        med = statistics.median(r["seconds"])
        row = {
            "task": task, "system": s.name, "variant": key(s)[1], "batch_size": batch_size, "hidden": hidden,
            "steps": steps, "first_loss": r["loss"], "losses": r["losses"],
            "instances_per_s": batch_size / med, "median_step_s": med,
            "split_s": {key: statistics.median(sp.get(key, 0.0) for sp in r["split"])
                        for key in ("build", "schedule", "forward", "backward", "update")},
            **({"profile_s": {k: statistics.median(sp["p_" + k] for sp in r["split"])
                              for k in PROFILE_PARTS}}
               if r["split"] and "p_gemm" in r["split"][0] else {}),
            "useful_gflop_per_step": statistics.mean(flops) / 1e9,
            "useful_gflops": statistics.median(f / t for f, t in zip(flops, r["seconds"])) / 1e9,
            "maxrss_mb_after_task": rss,
        }
        if r["info"]:
            info = r["info"]
            lbs = lower_bounds[s.variant]
            row.update({
                "nodes_per_step": statistics.mean(i["nodes"] for i in info),
                "batches_per_step": statistics.mean(i["batches"] for i in info),
                "lower_bound_per_step": statistics.mean(lb for lb, _ in lbs),
                "batches_over_lower_bound": statistics.mean(
                    i["batches"] / lb for i, (lb, _) in zip(info, lbs)),
                # passes: batches that are not a fused stage, against their own bound
                "passes_per_step": statistics.mean(i["passes"] for i in info),
                "pass_lower_bound_per_step": statistics.mean(plb for _, plb in lbs),
                "passes_over_lower_bound": statistics.mean(
                    i["passes"] / plb for i, (_, plb) in zip(info, lbs)),
                "unbatched_nodes_per_step": statistics.mean(i["unbatched_nodes"] for i in info),
                # memory of one step's graph: values plus its backward's gradients
                "graph_mb": max(i["arena_bytes"] for i in info) / 2 ** 20,
            })
        rows.append(row)
    for base in ("torch-batched", "torch-eager", "dynet-agenda", "dynet"):
        ref = next((r for r in rows if r["system"] == base), None)
        if ref:
            for r in rows:
                r["vs_" + base] = r["instances_per_s"] / ref["instances_per_s"]
    # ops variant / builder variant, per strategy
    by = {(r["system"], r["variant"]): r for r in rows}
    for r in rows:
        b = by.get((r["system"], "builder"))
        if r["variant"] == "ops" and b:
            r["ops_vs_builder"] = r["instances_per_s"] / b["instances_per_s"]
    return rows


def run(task_names, strategies, batch_sizes, hiddens, steps, torch_modes, seed=0, lr=0.1,
        progress=None, variants=("builder",), dynet=None, dynet_autobatch=(1,), dynet_mem="2048"):
    rows = []
    for hidden in hiddens:
        for bs in batch_sizes:
            for t in task_names:
                rows += run_task(t, strategies, bs, hidden, steps, torch_modes, seed, lr, progress,
                                 variants, dynet, dynet_autobatch, dynet_mem)
    return rows


# -------------------------------------------------------------------- output --

def table(rows, sgemm, out=None):
    out = out or sys.stdout         # looked up now: a default bound at import outlives a redirect
    cols = ("task", "system", "var", "B", "inst/s", "/dynet", "ops/b", "/torch-b", "/torch-e",
            "nodes", "batches", "b/LB", "p/PLB", "build", "sched", "fwd", "bwd", "upd", "GF/s", "%sgemm",
            "graphMB", "rssMB")
    fmt = "{:<11s} {:<13s} {:<7s} {:>4s} {:>9s} {:>6s} {:>5s} {:>8s} {:>8s} {:>7s} {:>7s} {:>5s} " \
          "{:>5s} {:>6s} {:>6s} {:>6s} {:>6s} {:>6s} {:>6s} {:>6s} {:>11s} {:>6s}"
    print(fmt.format(*cols), file=out)

    def f(v, spec):
        return "-" if v is None else format(v, spec)
    for r in rows:
        sp = r["split_s"]
        print(fmt.format(
            r["task"], r["system"], r.get("variant", "-"), str(r["batch_size"]),
            f(r["instances_per_s"], ".1f"),
            f(r.get("vs_dynet-agenda", r.get("vs_dynet")), ".2f"), f(r.get("ops_vs_builder"), ".2f"),
            f(r.get("vs_torch-batched"), ".2f"), f(r.get("vs_torch-eager"), ".2f"),
            f(r.get("nodes_per_step"), ".0f"), f(r.get("batches_per_step"), ".0f"),
            f(r.get("batches_over_lower_bound"), ".2f"), f(r.get("passes_over_lower_bound"), ".2f"),
            *(f(sp[k] * 1e3, ".1f") for k in ("build", "schedule", "forward", "backward", "update")),
            f(r["useful_gflops"], ".1f"), f(100 * r["useful_gflops"] / sgemm, ".0f"),
            f(r.get("graph_mb"), ".1f"), f(r["maxrss_mb_after_task"], ".0f")), file=out)
    print("var = model variant (builder | ops; DyNet runs ops); /dynet = inst/s over DyNet's "
          "(autobatch=1 if run, else 0) in the same run; ops/b = ops variant over builder variant, "
          "same strategy; DyNet and torch fold graph building into fwd; "
          "b/LB = batches / lower bound; p/PLB = passes (batches less fused stages) / their "
          "lower bound (docs/fusion.md); %sgemm = useful matmul FLOP rate / single-thread "
          f"sgemm rate ({sgemm:.1f} GFLOP/s); graphMB = one step's values + gradients in the "
          "engine's arenas; rssMB = ru_maxrss of the "
          "process after the task (cumulative, includes torch)", file=out)


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": model, "logical_cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def import_plugin(spec):
    """Import a module by name or a Python file by path (for strategies it registers)."""
    import importlib
    import importlib.util
    if spec.endswith(".py") or os.path.sep in spec:
        name = "autobatch_bench_plugin_" + os.path.splitext(os.path.basename(spec))[0]
        mod_spec = importlib.util.spec_from_file_location(name, spec)
        if mod_spec is None:
            raise SystemExit(f"--import: cannot load {spec}")
        mod = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = mod
        mod_spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(spec)


def main(argv=None, native_blas=False):
    ap = options.parser(__doc__)
    a = ap.parse_args(argv)
    native_blas = native_blas or a.native_blas
    if a.steps < 1:
        ap.error("--steps must be at least 1")
    plan = _prepare(ap, a)
    meta = _describe(a, argv, native_blas, plan)
    rows = _run_all(a, plan, meta)
    _report(a, rows, meta)
    return meta


def _prepare(ap, a):
    """Import the plugins; check and expand the options into what to run (the lists of
    tasks, strategies, sizes, baselines and variants); load torch and the BLAS."""
    for spec in a.imports:
        import_plugin(spec)
    plan = SimpleNamespace(task_names=tasks.expand(
        parse_list(a.task, tasks.TASKS + tuple(tasks.GROUPS), "task")))
    plan.strategies = parse_list(a.strategy, list(dy.available_strategies()), "strategy") \
        if a.strategy == "all" else parse_list(a.strategy)
    check_systems(ap, plan.strategies)
    plan.batch_sizes = [int(x) for x in parse_list(a.batch_sizes)] if a.batch_sizes else [a.batch_size]
    plan.hiddens = [int(x) for x in parse_list(a.hidden)]
    plan.torch_modes = [] if a.no_torch else parse_list(a.torch, TORCH_MODES, "torch baseline")
    if plan.torch_modes:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("PyTorch is not installed: no baselines (pip install 'autobatch[bench]')", file=sys.stderr)
            plan.torch_modes = []
    plan.variants = parse_list(a.variant, tasks.VARIANTS, "variant")
    plan.dynet_autobatch = [int(x) for x in parse_list(a.dynet_autobatch, ("0", "1"), "--dynet-autobatch")]
    plan.dynet = None
    if a.dynet or a.dynet_python:
        plan.dynet, why = find_dynet_python(a.dynet_python)
        if plan.dynet is None:
            print(f"DyNet baseline skipped: {why}", file=sys.stderr)
    if plan.torch_modes:
        from autobatch.bench import torch_baselines  # noqa: F401  (sets torch to one thread)
    import scipy.linalg.blas  # noqa: F401  (load the engine's BLAS before describing it)
    return plan


def _describe(a, argv, native_blas, plan):
    """Measure sgemm, print the machine, the BLAS (and the DyNet baseline); the run's
    metadata."""
    sgemm = sgemm_gflops()
    meta = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": "python -m autobatch.bench " + " ".join(
            (["--native-blas"] if native_blas and not a.native_blas else []) +
            list(sys.argv[1:] if argv is None else argv)),
        "machine": machine(), "blas": blas.describe(), "native_blas": native_blas,
        "threadpoolctl": blas.threadpool_kernels(),
        "blas_threads_env": {v: os.environ.get(v) for v in blas.THREAD_VARS},
        "sgemm_gflops_1thread": sgemm,
    }
    if plan.torch_modes:
        import torch
        meta["torch"] = {"version": torch.__version__, "threads": torch.get_num_threads()}
    print(f"machine: {meta['machine']['cpu']}, {meta['machine']['logical_cpus']} logical CPUs")
    print(f"BLAS: {meta['blas']}")
    print(f"single-thread sgemm (2048^3): {sgemm:.1f} GFLOP/s")
    sys.stdout.flush()

    if plan.dynet:
        meta["dynet"] = {"python": plan.dynet, "autobatch": plan.dynet_autobatch, "mem_mb": a.dynet_mem}
        print(f"DyNet baseline: {plan.dynet} (autobatch={','.join(map(str, plan.dynet_autobatch))})")
    return meta


def _run_all(a, plan, meta):
    """Run every system of the plan, with a progress bar; the rows of results."""
    meta["variants"] = plan.variants
    meta["profile"] = a.profile
    dy.set_profiling(a.profile)
    # a bar on a terminal when tqdm is installed; nothing in a log or a pipe
    steps_in_all = len(plan.hiddens) * len(plan.batch_sizes) * len(plan.task_names) * (a.steps + 1)
    with progress_bar(total=steps_in_all, desc="bench", unit="step", disable=a.quiet) as bar:
        return run(plan.task_names, plan.strategies, plan.batch_sizes, plan.hiddens, a.steps,
                   plan.torch_modes, a.seed, a.lr, bar, plan.variants, plan.dynet,
                   plan.dynet_autobatch, a.dynet_mem)


def _report(a, rows, meta):
    """Print the table (and the profile view); write the JSON and the plot if asked."""
    table(rows, meta["sgemm_gflops_1thread"])
    profile_table(rows)
    meta["rows"] = rows
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(meta, fh, indent=1)
        print(f"wrote {a.json}")
    if a.plot:
        from autobatch.bench import plot
        plot.plot(rows, a.plot)
        print(f"wrote {a.plot}")


if __name__ == "__main__":
    main()
