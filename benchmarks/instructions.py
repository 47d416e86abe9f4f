"""Instruction counts of a steady-state training step, with callgrind.

Wall-clock time on a shared machine is noisy; instruction counts are not (the bench's
data and models are seeded, and PYTHONHASHSEED is fixed here). Each configuration runs
twice under `valgrind --tool=callgrind`: one warm-up step plus 1 step, and one warm-up
step plus 3 steps, on the same minibatches; the difference of the two totals, halved,
is the cost of one steady-state step (start-up and the warm-up cancel). Per function
group (the scheduler's functions, gemm, memset ...) the same difference of inclusive
counts is reported.

    python benchmarks/instructions.py --task treelstm --variant ops \\
        --strategy agenda,critical,lookahead --batch-size 64 --hidden 32

Under callgrind a configuration takes minutes (mostly Python's start-up).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# (regular expression on callgrind's function names, inclusive?): the scheduler's
# entry points inclusive (they do not call each other); BLAS and libc by their own
# (self) cost, so that nested functions are not counted twice
GROUPS = {
    "schedule": (r"_scheduler_sched_(prepare|push_initial|release|collect)$|"
                 r"_strategies_pick_batch$", True),
    "pick": (r"_strategies_pick_batch$", True),
    "blas": (r"^(scipy_)?s(gemm|gemv|ger|axpy|scal|copy)|^(scipy_)?openblas|^blas_", False),
    "memset": (r"memset", False),
    "memcpy": (r"mem(cpy|move)", False),
}


def child(a):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("AUTOBATCH_NUM_THREADS", "1")    # one thread: counts that repeat
    import autobatch as dy
    from autobatch.bench import data
    from autobatch.bench.run import AutobatchSystem
    if a.profile:
        dy.set_profiling(True)
    if a.task == "micro":       # the micro-benchmark's step (tanh chains), --hidden as size
        from autobatch.bench import micro
        pc, W, b = micro.make_model(a.hidden)
        data_ = micro.make_data(a.hidden, a.batch_size, 100)
        trainer = dy.SimpleSGDTrainer(pc, 1e-4)
        for k in range(a.steps + 1):
            micro.step(W, b, data_, trainer, a.strategy)
        return
    # the same data for every number of steps (some tasks draw their instances
    # differently when asked for more), so that runs of 1 and 3 steps share minibatches
    meta, inst = data.make(a.task, a.batch_size * (max(a.steps, 3) + 1), a.seed)
    system = AutobatchSystem(a.task, a.strategy, a.hidden, a.seed, meta, 0.1, a.variant)
    for k in range(a.steps + 1):
        batch = inst[k * a.batch_size:(k + 1) * a.batch_size]
        if a.forward_only:      # build and forward only: no backward, no update
            dy.renew_cg(strategy=a.strategy)
            dy.esum([system.task.loss(i) for i in batch]).value()
        else:
            system.step(batch)


def callgrind(a, steps, workdir):
    tag = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = os.path.join(workdir, f"cg.{tag}.{a.task}.{a.variant}.{a.strategy}.h{a.hidden}"
                                f"{'.prof' if a.profile else ''}.{steps}")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
           os.path.abspath(__file__), "--child", "--task", a.task, "--variant", a.variant,
           "--strategy", a.strategy, "--batch-size", str(a.batch_size), "--hidden",
           str(a.hidden), "--seed", str(a.seed), "--steps", str(steps)] + \
        (["--profile"] if a.profile else []) + (["--forward-only"] if a.forward_only else [])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", AUTOBATCH_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    total = None
    cost = {}
    for inclusive in (True, False):
        ann = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
                              "--threshold=100", out],
                             check=True, capture_output=True, text=True).stdout
        cost[inclusive] = {}
        for line in ann.splitlines():
            m = re.match(r"\s*([\d,]+) \(.*\)\s+PROGRAM TOTALS", line)
            if m:
                total = int(m.group(1).replace(",", ""))
                continue
            m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\*?\s*(\S+?):(\S+)", line)
            if m:
                f = m.group(3).split(" ")[0]
                c = int(m.group(1).replace(",", ""))
                # a function listed under several files: self costs add up, inclusive
                # ones would count the same calls twice
                old = cost[inclusive].get(f, 0)
                cost[inclusive][f] = max(old, c) if inclusive else old + c
    if a.keep:
        os.replace(out, os.path.join(a.keep, os.path.basename(out)))
    else:
        os.unlink(out)
    groups = {}
    for g, (pat, inclusive) in GROUPS.items():
        groups[g] = sum(c for f, c in cost[inclusive].items() if re.search(pat, f))
    return total, groups


def measure(a):
    with tempfile.TemporaryDirectory() as d:
        if a.quick:             # one run: the warm-up and one step, halved
            t1, g1 = 0, {g: 0 for g in GROUPS}
            t3, g3 = callgrind(a, 1, d)
            t3 = None
        else:
            t1, g1 = callgrind(a, 1, d)
            t3, g3 = callgrind(a, 3, d)
    row = {"task": a.task, "variant": a.variant, "strategy": a.strategy,
           "batch_size": a.batch_size, "hidden": a.hidden, "profile": a.profile,
           "forward_only": a.forward_only,
           "root": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
           "instructions_per_step": None if t3 is None else (t3 - t1) // 2, "quick": a.quick}
    row.update({f"{g}_per_step": (g3[g] - g1[g]) // 2 for g in GROUPS})
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="treelstm")
    ap.add_argument("--variant", default="ops")
    ap.add_argument("--strategy", default="agenda")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--quick", action="store_true",
                    help="one run (warm-up + 1 step): function groups only, averaged over the "
                         "warm-up and the step (the functions run only in steps); no total")
    ap.add_argument("--profile", action="store_true", help="with dy.set_profiling(True)")
    ap.add_argument("--keep", metavar="DIR", help="keep callgrind's output files here")
    ap.add_argument("--forward-only", action="store_true",
                    help="steps of graph building and forward only (no backward, no update)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="append the rows (one JSON object a line) here")
    a = ap.parse_args(argv)
    if a.child:
        return child(a)
    rows = []
    for task in a.task.split(","):
        for variant in a.variant.split(","):
            for strategy in a.strategy.split(","):
                b = argparse.Namespace(**{**vars(a), "task": task, "variant": variant,
                                          "strategy": strategy})
                row = measure(b)
                rows.append(row)
                print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
                if a.json:
                    with open(a.json, "a") as f:
                        f.write(json.dumps(row) + "\n")
    return rows


if __name__ == "__main__":
    main()
