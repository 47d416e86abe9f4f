"""Instructions of one steady-state training step under callgrind (instruction counts
do not drift with the machine's load, wall-clock time does):

    PYTHONPATH=<tree> valgrind --tool=callgrind --instr-atstart=no \
        --callgrind-out-file=OUT python benchmarks/fusion_step.py TASK VARIANT HIDDEN FUSION

FUSION: 1 / 0 (dy.set_default_fusion), '-' (a version without fusion). The count is
the `totals:` line of OUT.
Two warm-up steps run uninstrumented; instrumentation is switched on (callgrind_control
-i on) for the third step only. Task 'micro': the micro-benchmark's step."""
import os, subprocess, sys
os.environ.setdefault("AUTOBATCH_NUM_THREADS", "1")    # one thread: counts that repeat
import autobatch as dy
task, variant, hidden, fusion = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if fusion != "-":
    dy.set_default_fusion(fusion == "1")
B = 64
if task == "micro":
    from autobatch.bench import micro
    pc, W, b = micro.make_model(hidden)
    data = micro.make_data(hidden, B, 100)
    tr = dy.SimpleSGDTrainer(pc, 0.01)
    step = lambda k: micro.step(W, b, data, tr, "agenda")
else:
    from autobatch.bench import data as D
    from autobatch.bench.run import AutobatchSystem
    meta, inst = D.make(task, B * 2, 0)
    s = AutobatchSystem(task, "agenda", hidden, 0, meta, 0.1, variant)
    step = lambda k: s.step(inst[(k % 2) * B:(k % 2 + 1) * B])
step(0); step(1)
subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True)
step(2)
subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True)
st = dy.cg().stats()
print("RESULT", task, variant, st["nodes"], st["batches"], st.get("fused", {}).get("chains"))
