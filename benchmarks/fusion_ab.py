"""Fusion on vs off in one process, steps interleaved (on, off, off, on, ...), CPU time
of this process (time.process_time, so waiting for a busy CPU does not count).
PYTHONPATH=. OPENBLAS_NUM_THREADS=1 python benchmarks/fusion_ab.py STEPS TASK:VARIANT ... (micro:16 = the micro-benchmark at size 16)"""
import statistics, sys, time
import autobatch as dy
from autobatch.bench import data as D, micro
from autobatch.bench.run import AutobatchSystem
steps = int(sys.argv[1])
B, H = 64, 256
for spec in sys.argv[2:]:
    task, variant = spec.split(":")
    if task == "micro":
        size = int(variant)
        pc, W, b = micro.make_model(size)
        data = micro.make_data(size, B, 100)
        tr = dy.SimpleSGDTrainer(pc, 0.01)
        run = {f: (lambda k: micro.step(W, b, data, tr, "agenda")) for f in (False, True)}
    else:
        meta, inst = D.make(task, B * (steps + 1), 0)
        sysm = {f: AutobatchSystem(task, "agenda", H, 0, meta, 0.1, variant) for f in (False, True)}
        run = {f: (lambda k, f=f: sysm[f].step(inst[k * B:(k + 1) * B])) for f in (False, True)}
    t = {False: [], True: []}
    for k in range(steps + 1):
        order = (True, False) if k % 2 else (False, True)
        for f in order:
            dy.set_default_fusion(f)
            t0 = time.process_time()
            run[f](k)
            if k:
                t[f].append(time.process_time() - t0)
    ratios = [a / b for a, b in zip(t[False], t[True])]
    print(f"{spec:22s} off {1e3*statistics.median(t[False]):8.2f} ms  on {1e3*statistics.median(t[True]):8.2f} ms"
          f"  speed on/off {statistics.median(t[False]) / statistics.median(t[True]):.3f}"
          f"  per-step ratio median {statistics.median(ratios):.3f} min {min(ratios):.3f} max {max(ratios):.3f}", flush=True)
