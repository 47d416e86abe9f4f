"""The AVX2 kernel's cap on packed weight gradients (autobatch/kernels/packed.pyx,
GRAD_MAX_ELEMS_AVX2) on vs lifted, in one process, training steps interleaved (on,
off, off, on, ...); CPU time of this process (time.process_time) on one thread, wall
time on more.
OPENBLAS_NUM_THREADS=1 python benchmarks/packed_limits_ab.py STEPS TASK:VARIANT[@THREADS] ..."""
import statistics, sys, time
from autobatch.kernels import packed as _packed
from autobatch.bench import data as D
from autobatch.bench.run import AutobatchSystem
steps = int(sys.argv[1])
B, H = 64, 256
cap = _packed.set_packed_limits()[3]                  # (sets nothing: the cap in use)
for spec in sys.argv[2:]:
    task, variant = spec.split(":")
    variant, _, threads = variant.partition("@")
    strategy = "agenda@" + (threads or "1")
    meta, inst = D.make(task, B * (steps + 1), 0)
    sysm = {f: AutobatchSystem(task, strategy, H, 0, meta, 0.1, variant) for f in (False, True)}
    clock = time.perf_counter if threads else time.process_time
    t = {False: [], True: []}
    for k in range(steps + 1):
        for capped in ((True, False) if k % 2 else (False, True)):
            _packed.set_packed_limits(grad_max_elems_avx2=cap if capped else 1 << 40)
            t0 = clock()
            sysm[capped].step(inst[k * B:(k + 1) * B])
            if k:
                t[capped].append(clock() - t0)
    _packed.set_packed_limits(grad_max_elems_avx2=cap)
    ratios = [a / b for a, b in zip(t[False], t[True])]
    print(f"{spec:18s} lifted {1e3 * statistics.median(t[False]):7.1f} ms  capped "
          f"{1e3 * statistics.median(t[True]):7.1f} ms  speed capped/lifted "
          f"{statistics.median(t[False]) / statistics.median(t[True]):.3f}  per-step ratio median "
          f"{statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]", flush=True)
