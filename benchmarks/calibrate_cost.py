#!/usr/bin/env python3
"""Measure the constants of the 'cost' strategy's time model (autobatch/engine/cost_model.pyx)
on this machine: the fixed time of one batch (`call_ns`) and the time per element of a
product's weight packed once per batch (`weight_ns`).

    OPENBLAS_NUM_THREADS=1 python benchmarks/calibrate_cost.py [--repeats 9]

call_ns: the same nodes (N tanh of 16 elements), forward and backward, as 64 chains (N / 64
batches of 64) and as one chain (N batches of one), strategy agenda, fusion off; the
difference per extra batch is the fixed time of a batch (choosing it, the kernel call,
logging, releasing, its backward). weight_ns: the same W * x products (W of H x H,
256 columns in all), as 32 batches of 8 columns (eight chains of 32 steps) and as one
batch of 256; (difference / 31 - call_ns) per batch, fitted over H (least squares
through the origin of the extra time against H^2). Medians over interleaved repeats,
process CPU time. Prints the figures and the `set_constants` call that uses them."""
import argparse
import statistics
import time

import numpy as np

import autobatch as dy
from autobatch.engine import cost_model


def timed(build, repeats):
    """Median CPU seconds of a forward and backward of build()'s loss, per variant."""
    times = {k: [] for k in build}
    for r in range(repeats + 1):
        for k in (list(build) if r % 2 else list(build)[::-1]):
            dy.renew_cg(strategy="agenda", fusion=False)
            loss = build[k]()
            t0 = time.process_time()
            loss.forward()
            loss.backward()
            if r:
                times[k].append(time.process_time() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def chains(pc, n_chains, length, step, size):
    """n_chains independent chains of `length` applications of step(h): one batch of
    n_chains nodes per step under agenda, operands in place (each batch reads the
    previous one's block). Returns a function building the loss."""
    x0 = [pc.add_parameters(size, init=dy.NormalInitializer(0, 1)) for _ in range(n_chains)]

    def build():
        outs = []
        for x in x0:
            h = dy.parameter(x)
            for _ in range(length):
                h = step(h)
            outs.append(h)
        return dy.sum_elems(dy.esum(outs))
    return build


def call_ns(n, repeats):
    """The same N tanh nodes as 64 chains (N / 64 batches) and as one chain (N batches)."""
    pc = dy.ParameterCollection(seed=0)
    t = timed({"wide": chains(pc, 64, n // 64, dy.tanh, 16),
               "long": chains(pc, 1, 64 * (n // 64), dy.tanh, 16)}, repeats)
    return 1e9 * (t["long"] - t["wide"]) / (64 * (n // 64) - n // 64)


def product_extra_ns(hidden, repeats, call):
    """256 products W * h as 32 batches of 8 columns and as 8 batches of 32: the time
    of a product batch beyond call_ns (packing W, a narrower product)."""
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((hidden, hidden), init=dy.NormalInitializer(0, 0.5 / hidden ** 0.5))

    def step(h):
        return dy.parameter(W) * h
    t = timed({"narrow": chains(pc, 8, 32, step, hidden),
               "wide": chains(pc, 32, 8, step, hidden)}, repeats)
    return 1e9 * (t["narrow"] - t["wide"]) / 24 - call


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--hidden", default="64,128,256,512")
    a = ap.parse_args(argv)
    call = call_ns(a.nodes, a.repeats)
    print(f"fixed time of a batch: {call:.0f} ns")
    hs = [int(h) for h in a.hidden.split(",")]
    extra = [product_extra_ns(h, a.repeats, call) for h in hs]
    for h, e in zip(hs, extra):
        print(f"product batch, weight {h}x{h}: {e:.0f} ns more than an elementwise batch "
              f"({e / (h * h):.3f} ns per weight element)")
    sq = np.array([h * h for h in hs], float)
    weight = max(0.0, float(np.dot(sq, extra) / np.dot(sq, sq)))
    print(f"fit: weight_ns = {weight:.3f}")
    print(f"defaults now: {cost_model.constants()}")
    print(f"use: autobatch.engine.cost_model.set_constants(call_ns={call:.0f}, weight_ns={weight:.3f})")
    return call, weight


if __name__ == "__main__":
    main()
