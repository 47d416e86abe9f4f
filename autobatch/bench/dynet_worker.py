"""The DyNet baseline of the task benchmark, run by DyNet's interpreter in its own
process (autobatch and DyNet are not imported into one process as ``dy``).

    PYTHON_WITH_DYNET dynet_worker.py TASK HIDDEN SEED N_BATCHES BATCH_SIZE LR AUTOBATCH
        MEM [PARAMS.npz]

It builds the same seeded data as the parent (``data.make``) and the ops variant of
the task from ``tasks.py``, unchanged, with ``dy`` bound to DyNet. PARAMS.npz (plain
arrays, loaded without pickle) gives it the parent's initial parameter values, ``p<k>``
and ``l<k>`` in creation order (``parameters_list``/``lookup_parameters_list``, the
same order in both libraries), so that both start from the same model. It does not import
the autobatch package (its engine needs scipy, which the DyNet environment need not
have): ``data.py`` and ``tasks.py`` are loaded from this directory by path.

Protocol, one JSON object per line: first {"ready": ..., "checksum": ...} (a hash of
the minibatches, which the parent compares with its own), then for every line
"STEP k" on stdin, one step on minibatch k and {"loss", "forward", "backward",
"update"}; "QUIT" or end of input ends it. DyNet's own output goes to stderr.
"""
import hashlib
import importlib.util
import json
import os
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def checksum(batches):
    return hashlib.sha256(repr(batches).encode()).hexdigest()[:16]


def load_bench_modules():
    """autobatch.bench.data and .tasks without running autobatch/__init__.py."""
    for name, path in (("autobatch", os.path.dirname(HERE)), ("autobatch.bench", HERE)):
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [path]
            sys.modules[name] = pkg
    mods = {}
    for short in ("data", "tasks"):
        name = "autobatch.bench." + short
        spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, short + ".py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        setattr(sys.modules["autobatch.bench"], short, mod)
        mods[short] = mod
    return mods["data"], mods["tasks"]


def set_parameters(pc, path, set_lookup):
    """`set_lookup(table, values)`: task_base's, which knows DyNet's matrix entries."""
    import numpy as np
    with np.load(path, allow_pickle=False) as arrays:
        for prefix, params in (("p", pc.parameters_list()), ("l", pc.lookup_parameters_list())):
            for k, p in enumerate(params):
                value = arrays[f"{prefix}{k}"]
                if tuple(value.shape) != tuple(p.shape()):
                    raise ValueError(f"{prefix}{k}: shape {value.shape}, the model has {p.shape()}")
                if prefix == "p":
                    p.set_value(value)
                else:
                    set_lookup(p, value)


def main(argv):
    task, hidden, seed, n_batches, batch_size, lr, autobatch, mem = argv[:8]
    hidden, seed, n_batches, batch_size = int(hidden), int(seed), int(n_batches), int(batch_size)
    out = sys.stdout
    sys.stdout = sys.stderr                  # DyNet prints; keep the protocol clean
    import dynet_config
    dynet_config.set(mem=mem, random_seed=seed + 1, autobatch=int(autobatch))
    import dynet as dy
    data, tasks = load_bench_modules()
    tasks.use(dy)
    meta, instances = data.make(task, batch_size * n_batches, seed)
    batches = [instances[k * batch_size:(k + 1) * batch_size] for k in range(n_batches)]
    model = tasks.make(task, hidden, None, meta, "ops")
    if len(argv) > 8:
        set_parameters(model.pc, argv[8], tasks.set_lookup)
    trainer = dy.SimpleSGDTrainer(model.pc, float(lr))

    def send(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    send({"ready": True, "checksum": checksum(batches), "dynet_autobatch": int(autobatch)})
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "QUIT":
            break
        batch = batches[int(cmd[1])]
        t0 = time.perf_counter()
        dy.renew_cg()
        loss = dy.esum([model.loss(inst) for inst in batch])
        value = loss.value()                 # graph building + forward (DyNet is lazy too)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        trainer.update()
        t3 = time.perf_counter()
        send({"loss": float(value), "forward": t1 - t0, "backward": t2 - t1, "update": t3 - t2})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
