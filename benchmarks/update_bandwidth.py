"""The trainers' update rules against the memory limit: each rule's dense update on a
parameter too large for the caches, as GB/s of the bytes it must stream (values,
gradient and optimizer state, each read and written), beside the machine's own
bandwidth (numpy copy and add on arrays of the same size), with 1 and 2 engine threads;
where splitting a parameter over 2 threads pays off; and, given a build of the rules
from before (--before), the rules and a treenn-sized Adam step side by side.

    PYTHONPATH=. python benchmarks/update_bandwidth.py [--sizes 2048000 4194304]
        [--reps 21] [--levels] [--split] [--before DIR]

--levels also times every SIMD level of the rules (update_rules.set_simd_level).
--split times Adam on 4K to 4M elements with 1 and 2 threads, the split forced at every
size (to see where it pays off; the engine splits from update_rules' SPLIT_MIN).
--before DIR: DIR holds update_rules_before*.so, the rules' module of another revision
built under that name (the same setup.py flags); its Slot and apply are timed against
this build's, interleaved, on the same arrays.

Every figure is a median of --reps runs; before each run the gradient is refilled and
a 64 MB buffer is streamed, so that nothing of the parameter is in the caches. GB/s
counts the bytes the rule must move (4 bytes x elements x streams), as STREAM does:
write-allocate traffic is not counted (copy and add pay it, a rule and the in-place
scale do not: they write only lines they read, so the scale is the rules' ceiling).
The 2-thread probe runs two Python threads, which a busy machine may not run at once:
its figures are a floor, the 1-thread ones the reference. Compare figures of one run only: the machine is
shared."""
import argparse
import glob
import importlib.util
import os
import statistics
import threading
import time

import numpy as np

import autobatch as dy
from autobatch.model import update_rules as rules

HYPER = {"sgd": {"lr": 0.01}, "momentum": {"lr": 0.01, "mom": 0.9},
         "adagrad": {"lr": 0.1, "eps": 1e-20}, "adadelta": {"rho": 0.95, "eps": 1e-6},
         "rmsprop": {"lr": 0.001, "rho": 0.9, "eps": 1e-8},
         "adam": {"lr": 0.001, "beta_1": 0.9, "beta_2": 0.999, "eps": 1e-8},
         "amsgrad": {"lr": 0.001, "beta_1": 0.9, "beta_2": 0.999, "eps": 1e-8}}
STATES = {"sgd": 0, "momentum": 1, "adagrad": 1, "adadelta": 2, "rmsprop": 1, "adam": 2, "amsgrad": 3}
FLUSH = np.ones(16 << 20, dtype=np.float32)       # 64 MB: twice the L3 of this machine


def flush():
    FLUSH.sum()


class Param:
    """A parameter's arrays for one rule: values, gradient (refilled before each run
    from `fresh`), state (second moments positive)."""

    def __init__(self, name, n, rng):
        self.values = rng.normal(size=n).astype(np.float32)
        self.fresh = (rng.normal(size=n) * 0.1).astype(np.float32)
        self.grad = self.fresh.copy()
        self.states = [np.abs(rng.normal(size=n)).astype(np.float32) * 0.01
                       for _ in range(STATES[name])]

    def streams(self):
        return 2 * (2 + len(self.states))


def median_time(run, reps, prepare):
    times = []
    for _ in range(reps):
        prepare()
        flush()
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def with_threads(threads, work, *args):
    old = dy.get_num_threads()
    dy.set_num_threads(threads)
    try:
        return work(*args)
    finally:
        dy.set_num_threads(old)


def probe(n, threads, reps):
    """numpy copy (2 streams), add (3) and an in-place scale (a *= s: 2 streams, each
    line read then written, as every stream of a rule) on n floats, the arrays in
    `threads` parts run by as many Python threads (numpy releases the GIL): their GB/s."""
    a, b, c = (np.full(n, 1.5, dtype=np.float32) for _ in range(3))
    parts = [slice(k * n // threads, (k + 1) * n // threads) for k in range(threads)]

    def run(op):
        if threads == 1:
            op(parts[0])
            return
        ts = [threading.Thread(target=op, args=(p,)) for p in parts]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    def copy(p):
        np.copyto(b[p], a[p])

    def add(p):
        np.add(a[p], b[p], out=c[p])

    def scale(p):
        np.multiply(a[p], np.float32(1.0), out=a[p])
    t_copy = median_time(lambda: run(copy), reps, lambda: None)
    t_add = median_time(lambda: run(add), reps, lambda: None)
    t_scale = median_time(lambda: run(scale), reps, lambda: None)
    return 8 * n / t_copy / 1e9, 12 * n / t_add / 1e9, 8 * n / t_scale / 1e9


def rule_time(name, p, reps):
    rule = rules.RULES[name]

    def run():
        rules.rule_on_arrays(rule, p.values, p.values, p.grad, p.states, **HYPER[name])
    return median_time(run, reps, lambda: np.copyto(p.grad, p.fresh))


def bandwidth_table(sizes, reps, levels):
    rng = np.random.default_rng(0)
    for n in sizes:
        for threads in (1, 2):
            copy, add, scale = probe(n, threads, reps)
            print(f"\nn = {n:,} floats, {threads} thread(s): numpy copy {copy:.1f} GB/s, "
                  f"add {add:.1f} GB/s, in-place scale {scale:.1f} GB/s")
            for name in rules.RULES:
                p = Param(name, n, rng)
                cells = []
                for level in (rules.simd_levels() if levels else [rules.simd_level()]):
                    old = rules.set_simd_level(level)
                    t = with_threads(threads, rule_time, name, p, reps)
                    rules.set_simd_level(old)
                    cells.append(f"{level} {p.streams() * 4 * n / t / 1e9:5.1f} GB/s "
                                 f"({1e3 * t:6.2f} ms, {p.streams() * 4 * n / t / 1e9 / scale:4.2f} of scale)")
                print(f"  {name:9s} {p.streams()} streams: " + "   ".join(cells))


def split_table(reps):
    """Adam, 1 thread against 2 (the split forced at every size)."""
    rng = np.random.default_rng(1)
    print("\nAdam on n elements, in place: 1 thread / 2 threads (median times; > 1: the split pays)")
    for n in [4096, 16384, 32768, 65536, 131072, 262144, 1 << 20, 1 << 22]:
        p = Param("adam", n, rng)
        one = with_threads(1, rule_time, "adam", p, reps)
        two = with_threads(2, forced_split, rule_time, "adam", p, reps)
        print(f"  n = {n:>9,}: 1 thread {1e6 * one:8.1f} us, 2 threads {1e6 * two:8.1f} us, ratio {one / two:4.2f}")


def forced_split(work, *args):
    old = rules.set_split_min(1)
    try:
        return work(*args)
    finally:
        rules.set_split_min(old)


def load_before(where):
    found = glob.glob(os.path.join(where, "update_rules_before*.so"))
    if not found:
        raise SystemExit(f"--before: no update_rules_before*.so in {where}")
    spec = importlib.util.spec_from_file_location("update_rules_before", found[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def interleaved(runs, reps, prepare):
    """Median time of each of `runs`, run in turn `reps` times."""
    times = [[] for _ in runs]
    for _ in range(reps):
        for k, run in enumerate(runs):
            prepare()
            flush()
            t0 = time.perf_counter()
            run()
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def compare(before, sizes, reps):
    """This build's apply against the other's, on the same arrays (1 thread)."""
    rng = np.random.default_rng(2)
    print(f"\nbefore ({before.__file__}) / now, dense update, 1 thread (> 1: now is faster)")
    for n in sizes:
        for name in rules.RULES:
            p = Param(name, n, rng)
            slots = [m.Slot(p.values, p.grad, p.states) for m in (rules, before)]
            runs = [lambda m=m, s=s, name=name: m.apply(m.RULES[name], [s], [], **HYPER[name])
                    for m, s in zip((rules, before), slots)]
            now, old = with_threads(1, interleaved, runs, reps,
                                    lambda p=p: np.copyto(p.grad, p.fresh))
            print(f"  n = {n:>9,} {name:9s}: before {1e3 * old:6.2f} ms, now {1e3 * now:6.2f} ms, ratio {old / now:4.2f}")
    # treenn at one tree per update: Adam over the word table and the weights
    shapes = [(16000 * 128,)] + [(128 * 256,)] * 4 + [(128,)] * 4
    params = [Param("adam", int(np.prod(s)), rng) for s in shapes]
    for threads in (1, 2):
        runs = []
        for m in (rules, before):
            slots = [m.Slot(p.values, p.grad, p.states) for p in params]
            runs.append(lambda m=m, slots=slots: m.apply(m.RULES["adam"], slots, [], **HYPER["adam"]))

        def refill():
            for p in params:
                np.copyto(p.grad, p.fresh)
        now, old = with_threads(threads, interleaved, runs, reps, refill)
        print(f"  treenn-sized Adam (16000x128 table, 4 of 128x256, 4 of 128), {threads} thread(s): "
              f"before {1e3 * old:6.2f} ms, now {1e3 * now:6.2f} ms, ratio {old / now:4.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16000 * 128, 1 << 22])
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--levels", action="store_true", help="time every SIMD level")
    ap.add_argument("--split", action="store_true", help="where the 2-thread split pays off")
    ap.add_argument("--before", help="a folder with update_rules_before*.so to compare with")
    a = ap.parse_args()
    print(f"update rules SIMD level {rules.simd_level()} (of {', '.join(rules.simd_levels())}), "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')!r}")
    bandwidth_table(a.sizes, a.reps, a.levels)
    if a.split:
        split_table(a.reps)
    if a.before:
        compare(load_before(a.before), a.sizes, a.reps)


if __name__ == "__main__":
    main()
