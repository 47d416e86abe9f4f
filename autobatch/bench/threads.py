"""Inference on two threads: each thread builds and computes its own graphs (forward
only) of the micro-benchmark's model, `tanh(W*x + b)` chains over 64 instances. The
same number of graphs runs on one thread and split over two, interleaved and repeated;
the figure is the ratio of the medians of the wall time. Building a graph is Python
(it holds the GIL); the kernels of a forward release it, so the gain depends on their
share of a step.
"""
import argparse
import statistics
import threading
import time

from autobatch.bench import micro


def forward_steps(model, data, steps, strategy):
    _, W, b = model
    for _ in range(steps):
        micro.build_loss(W, b, data, strategy).value()


def timed(models, data, steps, strategy):
    """Wall time of len(models) threads doing `steps` graphs each (one: no thread)."""
    t0 = time.perf_counter()
    if len(models) == 1:
        forward_steps(models[0], data, steps, strategy)
    else:
        threads = [threading.Thread(target=forward_steps, args=(m, data, steps, strategy))
                   for m in models]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="64,256")
    ap.add_argument("--strategy", default="agenda")
    ap.add_argument("--steps", type=int, default=4, help="graphs per thread and round")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    from autobatch.bench.blas import describe
    print(f"BLAS: {describe()}")
    results = []
    for size in (int(s) for s in a.sizes.split(",")):
        data = micro.make_data(size, 64, 100)
        models = [micro.make_model(size, seed=k) for k in range(2)]
        one, two = [], []
        timed(models, data, 1, a.strategy)                    # warm-up
        for _ in range(a.rounds):
            one.append(timed(models[:1], data, 2 * a.steps, a.strategy))
            two.append(timed(models, data, a.steps, a.strategy))
        gain = statistics.median(one) / statistics.median(two)
        results.append({"size": size, "one_thread_s": statistics.median(one),
                        "two_threads_s": statistics.median(two), "speedup": gain})
        print(f"size {size:4d}  {2 * a.steps} forward graphs: one thread "
              f"{statistics.median(one) * 1e3:7.1f} ms, two threads {statistics.median(two) * 1e3:7.1f} ms"
              f"  -> {gain:.2f}x")
    return results


if __name__ == "__main__":
    main()
