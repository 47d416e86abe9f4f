"""Peak resident memory of each system of the task benchmark, each in a process of its own

    python benchmarks/peak_rss.py [--tasks all] [--steps 4] [--batch-size 64] [--hidden 256]
        [--variant ops] [--dynet-python /path/to/dynet38-venv/bin/python] [--json out.json]

The bench's `rssMB` column is the peak of its one process, which holds every system
of the run (torch included), so it cannot say which system needs the memory. Here
every system trains the same minibatches (warm-up plus STEPS, as the bench does) in a
fresh interpreter of its own, and the figure is that process's peak resident set
(`VmHWM`): autobatch's default strategy, PyTorch hand-batched, and DyNet (its
worker process, run by `--dynet-python`; the parent that feeds it holds only the
data). Every child imports the bench's data and tasks, so each figure includes
numpy and the autobatch package; PyTorch's and DyNet's include their own libraries.
"""
import argparse
import json
import os
import subprocess
import sys

TASKS = ["tagger", "tagger-char", "treelstm", "parser", "lm"]


def vm_hwm_mb(pid="self"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/PID/status")


def child(system, task, steps, bs, hidden, variant, dynet_python):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from autobatch.bench import data
    meta, instances = data.make(task, bs * (steps + 1), 0)
    batches = [instances[k * bs:(k + 1) * bs] for k in range(steps + 1)]
    if system == "autobatch":
        from autobatch.bench.run import AutobatchSystem
        s = AutobatchSystem(task, "agenda", hidden, 0, meta, 0.1, variant)
    elif system == "torch-batched":
        import torch
        torch.set_num_threads(1)
        from autobatch.bench import torch_baselines as tb
        s = tb.System(task, "batched", hidden, 0, meta, 0.1)
    else:
        from autobatch.bench.run import DynetSystem
        s = DynetSystem(dynet_python, task, hidden, 0, batches, 0.1)
    for b in batches:
        s.step(b)
    if system == "dynet-agenda":
        mb = vm_hwm_mb(s.proc.pid)
        s.close()
    else:
        mb = vm_hwm_mb()
    print(json.dumps({"task": task, "system": system, "peak_rss_mb": mb}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default="all")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--variant", default="ops", choices=["ops", "builder"])
    ap.add_argument("--dynet-python", help="an interpreter with the dynet38 wheel")
    ap.add_argument("--json")
    a = ap.parse_args()
    tasks = TASKS if a.tasks == "all" else a.tasks.split(",")
    systems = ["autobatch", "torch-batched"] + (["dynet-agenda"] if a.dynet_python else [])
    rows = []
    print(f"peak RSS (MB), each system in its own process; batch {a.batch_size}, hidden "
          f"{a.hidden}, {a.variant} variant, warm-up + {a.steps} steps")
    print(f"{'task':12s}" + "".join(f"{s:>16s}" for s in systems) + f"{'ours / torch':>14s}")
    for task in tasks:
        got = {}
        for system in systems:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", system,
                                  task, str(a.steps), str(a.batch_size), str(a.hidden), a.variant,
                                  a.dynet_python or ""], check=True, capture_output=True,
                                 text=True, cwd="/tmp")
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            got[system] = row["peak_rss_mb"]
        print(f"{task:12s}" + "".join(f"{got[s]:16.0f}" for s in systems)
              + f"{got['autobatch'] / got['torch-batched']:14.2f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"batch_size": a.batch_size, "hidden": a.hidden, "variant": a.variant,
                       "steps": a.steps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        s, t, n, bs, h, v, dp = sys.argv[2:9]
        child(s, t, int(n), int(bs), int(h), v, dp)
    else:
        main()
