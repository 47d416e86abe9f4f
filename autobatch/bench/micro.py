"""Engine-overhead micro-benchmark: microseconds per node for a whole training step.

64 instances, each a chain of about 100 steps ``x = tanh(W*x + b)`` (lengths differ
slightly per instance), ``squared_norm`` per instance, ``esum``, forward, backward,
``SimpleSGDTrainer.update()``. Strategies are timed interleaved, step by step, so
that machine noise hits them alike; the figure is the median over steps.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

import autobatch as dy


def make_model(size, seed=0):
    pc = dy.ParameterCollection(seed=seed)
    W = pc.add_parameters((size, size), init=dy.UniformInitializer(1.0 / np.sqrt(size)))
    b = pc.add_parameters(size, init=dy.ConstInitializer(0.0))
    return pc, W, b


def make_data(size, instances, length, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(length - 5, length + 6, size=instances)
    starts = rng.normal(0, 1, size=(instances, size)).astype(np.float32)
    return list(zip(lengths.tolist(), starts))


def build_loss(W, b, data, strategy):
    """The step's graph in a new computation graph: the chains and their summed loss."""
    dy.renew_cg(strategy=strategy)
    losses = []
    for n, x0 in data:
        x = dy.inputVector(x0)
        for _ in range(n):
            x = dy.tanh(W * x + b)
        losses.append(dy.squared_norm(x))
    return dy.esum(losses)


def step(W, b, data, trainer, strategy):
    """One full training step; returns (seconds, stats)."""
    t0 = time.perf_counter()
    loss = build_loss(W, b, data, strategy)
    loss.value()
    loss.backward()
    trainer.update()
    seconds = time.perf_counter() - t0
    return seconds, dy.cg().stats()


def run(sizes=(16, 256), strategies=("none", "depth", "agenda"), instances=64, length=100,
        repeats=7, out=sys.stdout):
    results = []
    for size in sizes:
        data = make_data(size, instances, length)
        models = {s: make_model(size) for s in strategies}
        trainers = {s: dy.SimpleSGDTrainer(models[s][0], 1e-4) for s in strategies}
        times = {s: [] for s in strategies}
        stats = {}
        for rep in range(repeats + 1):          # first round is warm-up
            for s in strategies:
                _, W, b = models[s]
                sec, st = step(W, b, data, trainers[s], s)
                if rep > 0:
                    times[s].append(sec)
                stats[s] = st
        for s in strategies:
            st = stats[s]
            med = statistics.median(times[s])
            row = {
                "size": size, "strategy": s, "nodes": st["nodes"], "batches": st["batches"],
                "median_step_s": med, "us_per_node": med / st["nodes"] * 1e6,
                "split_s": st["seconds"],
            }
            results.append(row)
            sp = st["seconds"]
            print(f"size {size:4d}  {s:7s} nodes {st['nodes']:6d} batches {st['batches']:6d}  "
                  f"step {med * 1e3:8.2f} ms  {row['us_per_node']:6.3f} us/node  "
                  f"(build {sp['build'] * 1e3:.1f} sched {sp['schedule'] * 1e3:.1f} "
                  f"fwd {sp['forward'] * 1e3:.1f} bwd {sp['backward'] * 1e3:.1f} ms)", file=out)
        base = next(r for r in results if r["size"] == size and r["strategy"] == strategies[0])
        for r in results:
            if r["size"] == size:
                r["speedup_vs_" + strategies[0]] = base["median_step_s"] / r["median_step_s"]
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="16,256")
    ap.add_argument("--strategy", default="none,depth,agenda")
    ap.add_argument("--instances", type=int, default=64)
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)
    from autobatch.bench.blas import describe
    print(f"BLAS: {describe()}")
    res = run([int(s) for s in a.sizes.split(",")], a.strategy.split(","), a.instances,
              a.length, a.repeats)
    for r in res:
        if r["strategy"] != "none" and "speedup_vs_none" in r:
            print(f"size {r['size']:4d}  {r['strategy']:7s} {r['speedup_vs_none']:.2f}x faster than none")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
