"""Per-step instruction counts inside ONE callgrind run

    python benchmarks/step_instructions.py TASK VARIANT BATCH HIDDEN STEPS TREE [KEEP_DIR]
    python benchmarks/step_instructions.py tagger builder 16 32 2 /path/to/tree

(TASK may be "micro": the micro-benchmark's tanh chains, BATCH instances, HIDDEN the size.)
Unlike instructions.py (a 3-step run minus a 1-step run), no start-up cost leaks in.

How: callgrind dumps its counters
each time os.getppid() is entered (--dump-before=os_getppid), and the child calls it
between steps, so every step gets its own dump (start-up, imports, .pyc writing and
directory listings of sys.path stay in the first dump)."""
import glob, os, re, subprocess, sys, tempfile

def child(task, variant, bs, hidden, steps):
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("AUTOBATCH_NUM_THREADS", "1")    # one thread: counts that repeat
    import autobatch as dy
    from autobatch.bench import data
    if task == "micro":
        from autobatch.bench import micro
        pc, W, b = micro.make_model(hidden)
        d = micro.make_data(hidden, bs, 100)
        tr = dy.SimpleSGDTrainer(pc, 1e-4)
        step = lambda k: micro.step(W, b, d, tr, "agenda")
    else:
        from autobatch.bench.run import AutobatchSystem
        meta, inst = data.make(task, bs * (max(steps, 3) + 1), 0)
        system = AutobatchSystem(task, "agenda", hidden, 0, meta, 0.1, variant)
        step = lambda k: system.step(inst[k * bs:(k + 1) * bs])
    step(0)                       # warm-up
    for k in range(1, steps + 1):
        os.getppid()
        step(k)
    os.getppid()

def main():
    task, variant, bs, hidden, steps, tree = sys.argv[1:7]
    keep = sys.argv[7] if len(sys.argv) > 7 else None
    d = keep or tempfile.mkdtemp()
    out = os.path.join(d, f"cg.{task}.{variant}")
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", PYTHONPATH=tree)
    subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=os_getppid", "--compress-strings=no",
                    f"--callgrind-out-file={out}", sys.executable, os.path.abspath(__file__),
                    "--child", task, variant, bs, hidden, steps], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=d)
    parts = []
    for f in sorted(glob.glob(out + ".*"), key=lambda f: int(f.rsplit(".", 1)[1])):
        for line in open(f):
            if line.startswith(("summary:", "totals:")):
                parts.append(int(line.split()[1])); break
    # parts[0]: start-up + warm-up; parts[1..steps]: the steps; then the exit
    per = parts[1:1 + int(steps)]
    print(f"task={task} variant={variant} tree={tree} steps={per} "
          f"instructions_per_step={sum(per) // len(per)}", flush=True)

if __name__ == "__main__":
    if sys.argv[1] == "--child":
        a = sys.argv[2:]
        child(a[0], a[1], int(a[2]), int(a[3]), int(a[4]))
    else:
        main()
