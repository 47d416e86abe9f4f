"""`python -m autobatch.bench distributed`: training throughput of 1 process against 2
MPI processes (and against 1 process with 2 BLAS threads), side by side.

Every task trains on the same minibatches of global size B (`--batch-size`) in three
set-ups, each a fresh job:

    1proc          one process, one BLAS thread, the plain trainer
    2proc          `mpiexec -n 2`, one BLAS thread each; each rank takes B/2 instances of
                   every minibatch (`split_batch`, balanced by the instances' FLOPs),
                   DistributedTrainer(reduce="sum") combines the gradients
    1proc-2blas    one process whose BLAS may use 2 threads

A run is a warm-up step plus `--steps` timed steps (a barrier before each, so a step of
2 ranks is timed from a common start to the end of its update). The runs are
interleaved (round r runs every task in every set-up, in an order rotated per round),
so that machine noise hits them alike; a figure is the median over `--rounds` runs of
the median step. Ratios are taken within a round, then their median reported.
Communication is what rank 0 and rank 1 spend combining gradients in a step: "comm" is
the smaller of the two (transfer and packing; the other rank also waited for the slower
one, "wait" = the difference), "sent" the bytes a rank puts into the collectives.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

SETUPS = ("1proc", "2proc", "1proc-2blas")


# ------------------------------------------------------------------- worker --

def worker(a):
    """One run of one task in one set-up; prints one JSON line on rank 0."""
    import autobatch as dy
    from autobatch import distributed as dist
    from autobatch.bench import data, tasks

    dist.init(timeout=600)
    meta, instances = data.make(a.task, a.batch_size * (a.steps + 1), a.seed)
    model = tasks.make(a.task, a.hidden, a.seed, meta)
    dist.broadcast_parameters(model.pc)
    trainer = dist.DistributedTrainer(dy.SimpleSGDTrainer(model.pc, a.lr), reduce="sum")
    B = a.batch_size
    seconds, comm, wait, sent, losses = [], [], [], [], []
    for k in range(a.steps + 1):
        mine = dist.split_batch(instances[k * B:(k + 1) * B], cost=model.flops)
        dist.barrier()
        t0 = time.perf_counter()
        dy.renew_cg()
        loss = dy.esum([model.loss(inst) for inst in mine])
        value = loss.value()
        loss.backward()
        trainer.update()
        sec = time.perf_counter() - t0
        last = trainer.last_step
        step_comm = last.get("seconds", 0.0)
        low, high = dist.allreduce(step_comm, "min"), dist.allreduce(step_comm, "max")
        step_sent = last.get("dense_bytes", 0) + last.get("sparse_bytes_sent", 0)
        loss_total = dist.allreduce(value)
        if k == 0:
            continue                                   # warm-up
        seconds.append(dist.allreduce(sec, "max"))
        comm.append(low)
        wait.append(high - low)
        sent.append(dist.allreduce(step_sent, "max"))
        losses.append(loss_total)
    if dist.is_main():
        print(json.dumps({"task": a.task, "ranks": dist.size(), "blas": dy.blas_info(),
                          "step_s": statistics.median(seconds), "comm_s": statistics.median(comm),
                          "wait_s": statistics.median(wait), "sent_bytes": statistics.median(sent),
                          "first_loss": losses[0]}), flush=True)


# ------------------------------------------------------------------- driver --

def launch(setup, a, task):
    """Run the worker for one set-up; returns its JSON record."""
    from autobatch import distributed as dist
    import autobatch
    env = dict(os.environ)
    threads = "2" if setup == "1proc-2blas" else "1"
    env.update({"OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads,
                "MKL_NUM_THREADS": threads, "AUTOBATCH_BLAS_THREADS": threads,
                "AUTOBATCH_NUM_THREADS": "1"})     # the engine's own threads: one in every set-up
    root = os.path.dirname(os.path.dirname(os.path.abspath(autobatch.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "autobatch.bench.scaling", "--worker", "--task", task,
           "--batch-size", str(a.batch_size), "--hidden", str(a.hidden), "--steps", str(a.steps),
           "--seed", str(a.seed), "--lr", str(a.lr)]
    if setup == "2proc":
        mpiexec = dist.find_mpiexec()
        if mpiexec is None:
            raise SystemExit("mpiexec not found: pip install 'autobatch[mpi]'")
        cmd = [mpiexec, "-n", "2"] + a.mpiexec_args.split() + cmd
    # from the directory that holds this autobatch, so that `-m` finds it and no other
    # (in a session of its own, so that a timeout ends mpiexec and every rank it started)
    with subprocess.Popen(cmd, env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise SystemExit(f"{setup} {task}: no result in {a.timeout:g} s (--timeout)") from None
    if proc.returncode != 0:
        raise SystemExit(f"{setup} {task} failed ({proc.returncode}):\n{stdout}\n{stderr}")
    return json.loads(stdout.strip().splitlines()[-1])


def summarize(runs, a, out=sys.stdout):
    """One row per task: medians over rounds, ratios taken within a round."""
    rows = []
    for task in a.tasks:
        by = {s: [r for r in runs if r["task"] == task and r["setup"] == s] for s in a.setups}
        row = {"task": task}
        for s, rs in by.items():
            row[s] = {k: statistics.median(r[k] for r in rs) for k in ("step_s", "comm_s", "wait_s", "sent_bytes")}
            row[s]["instances_per_s"] = a.batch_size / row[s]["step_s"]
            row[s]["first_loss"] = rs[0]["first_loss"]     # the same in every set-up
        for s in a.setups:
            if s != "1proc" and "1proc" in by:
                row[f"{s}_over_1proc"] = statistics.median(
                    one["step_s"] / other["step_s"] for one, other in zip(by["1proc"], by[s]))
        rows.append(row)
    fmt = "{:<11s} {:>9s} {:>9s} {:>11s} {:>8s} {:>11s} {:>9s} {:>9s} {:>10s}"
    print(fmt.format("task", "1proc", "2proc", "1proc-2blas", "2p/1p", "2blas/1p",
                     "comm ms", "wait ms", "sent KiB"), file=out)
    for row in rows:
        def ips(s):
            return f"{row[s]['instances_per_s']:.1f}" if s in row else "-"

        def ratio(s):
            return f"{row[s + '_over_1proc']:.2f}" if s + "_over_1proc" in row else "-"
        two = row.get("2proc")
        print(fmt.format(row["task"], ips("1proc"), ips("2proc"), ips("1proc-2blas"),
                         ratio("2proc"), ratio("1proc-2blas"),
                         f"{1000 * two['comm_s']:.2f}" if two else "-",
                         f"{1000 * two['wait_s']:.2f}" if two else "-",
                         f"{two['sent_bytes'] / 1024:.0f}" if two else "-"), file=out)
    print(f"instances/s at global minibatch {a.batch_size}, hidden {a.hidden}: medians of "
          f"{a.rounds} interleaved runs of {a.steps} timed steps; ratios = median of per-round "
          "ratios; comm = time a rank of 2 spends combining gradients per step (the faster "
          "one), wait = how much longer the other waited, sent = bytes one rank puts into "
          "the collectives per step", file=out)
    return rows


def parse_args(argv):
    from autobatch.bench import tasks
    ap = argparse.ArgumentParser(prog="python -m autobatch.bench distributed", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="all", help="all or a comma list of " + ",".join(tasks.TASKS))
    ap.add_argument("--setups", default=",".join(SETUPS), help="comma list of " + ",".join(SETUPS))
    ap.add_argument("--batch-size", type=int, default=64, help="the global minibatch")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per run, after one warm-up")
    ap.add_argument("--rounds", type=int, default=3, help="runs per task and set-up, interleaved")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--mpiexec-args", default="", help="extra mpiexec arguments, e.g. '-bind-to core'")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for one run")
    ap.add_argument("--json", help="write the runs and the summary here")
    ap.add_argument("--native-blas", action="store_true",
                    help="unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (done by python -m autobatch.bench "
                         "before this starts; every run inherits it)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.tasks = list(tasks.TASKS) if a.task == "all" else a.task.split(",")
    a.setups = a.setups.split(",")
    bad = [t for t in a.tasks if t not in tasks.TASKS] + [s for s in a.setups if s not in SETUPS]
    if bad:
        ap.error(f"unknown task or set-up: {', '.join(bad)}")
    if a.batch_size % 2:
        ap.error("--batch-size must be even (it is split over 2 processes)")
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.worker:
        worker(a)
        return None
    runs = []
    for rnd in range(a.rounds):
        for task in a.tasks:
            order = a.setups[rnd % len(a.setups):] + a.setups[:rnd % len(a.setups)]
            for setup in order:
                t0 = time.perf_counter()
                rec = launch(setup, a, task)
                rec.update(setup=setup, round=rnd)
                runs.append(rec)
                print(f"[round {rnd + 1}/{a.rounds}] {task:<11s} {setup:<12s} "
                      f"{a.batch_size / rec['step_s']:8.1f} inst/s  ({time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
    rows = summarize(runs, a)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"command": "python -m autobatch.bench distributed " + " ".join(argv or sys.argv[1:]),
                       "runs": runs, "rows": rows}, fh, indent=1)
        print(f"wrote {a.json}")
    return rows


if __name__ == "__main__":
    main()
