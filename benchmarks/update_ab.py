"""Time this build's trainer update against the trainers of another version of autobatch
(an older commit's, whose rules ran as numpy code, say), in one process, on the bench
tasks' models: the same gradients are restored before every update and the two
trainers alternate, so machine noise hits both alike.

    PYTHONPATH=. python benchmarks/update_ab.py OTHER [--task all]
        [--trainer sgd|adam|...] [--updates 30] [--decay 0] [--clip 5] [--sparse 1]

OTHER is a trainers.py file, or a git revision of this repository: then its
autobatch/model/trainers.py, or autobatch/trainers.py for revisions from before the
subpackages (`git show REV:PATH`). The flat layout's imports in that file
(autobatch._core, autobatch._update) are read as their current modules
(autobatch.api.core, autobatch.model.update_rules).

Prints, per task, the median milliseconds of one update of each and their ratio. Both
trainers update the same parameters (the values drift; the timing does not care)."""
import argparse
import os
import statistics
import subprocess
import time
import types

import numpy as np

import autobatch as dy
from autobatch.bench import data, tasks

TRAINERS = {"sgd": "SimpleSGDTrainer", "momentum": "MomentumSGDTrainer",
            "adagrad": "AdagradTrainer", "adadelta": "AdadeltaTrainer",
            "rmsprop": "RMSPropTrainer", "adam": "AdamTrainer", "amsgrad": "AmsgradTrainer"}


# where a revision keeps the trainers: the current layout first, then the flat one
TRAINERS_PATHS = ("autobatch/model/trainers.py", "autobatch/trainers.py")
# the flat layout's imports, as the modules that hold those names now
FLAT_IMPORTS = [("from autobatch._core import", "from autobatch.api.core import"),
                ("from autobatch import _update", "from autobatch.model import update_rules as _update")]


def trainers_source(other):
    """(source, name) of OTHER: a file, or a git revision's trainers.py."""
    if os.path.isfile(other):
        with open(other) as f:
            return f.read(), other
    for path in TRAINERS_PATHS:
        shown = subprocess.run(["git", "show", f"{other}:{path}"], capture_output=True, text=True)
        if shown.returncode == 0:
            return shown.stdout, f"{other}:{path}"
    raise SystemExit(f"{other}: not a file, nor a git revision with {' or '.join(TRAINERS_PATHS)}")


def load_module(other):
    source, name = trainers_source(other)
    for flat, current in FLAT_IMPORTS:
        source = source.replace(flat, current)
    module = types.ModuleType("old_trainers")
    module.__file__ = name
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def gradients_of_one_step(task, hidden, batch_size, seed):
    """The task's model after one forward/backward: its parameters and their gradients
    (and the used-row masks of its tables), to restore before every update."""
    meta, instances = data.make(task, batch_size, seed)
    model = tasks.make(task, hidden, seed, meta, "ops")
    dy.renew_cg()
    loss = dy.esum([model.loss(inst) for inst in instances])
    loss.value()
    loss.backward()
    params = model.pc.parameters_list() + model.pc.lookup_parameters_list()
    saved = [(p._grad_flat.copy(), getattr(p, "_used_mask", None)) for p in params]
    saved = [(g, None if m is None else m.copy()) for g, m in saved]
    return model.pc, params, saved


def restore(params, saved):
    for p, (g, mask) in zip(params, saved):
        np.copyto(p._grad_flat, g)
        if mask is not None:
            np.copyto(p._used_mask, mask)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", metavar="OTHER", help="the other trainers.py: a file, or a git revision")
    ap.add_argument("--task", default="all")
    ap.add_argument("--trainer", choices=sorted(TRAINERS), default="sgd")
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--decay", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=5.0)
    ap.add_argument("--sparse", type=int, default=1,
                    help="sparse lookup updates (1, the default) or whole tables (0)")
    a = ap.parse_args()
    old = load_module(a.old)
    names = list(tasks.CLASSES) if a.task == "all" else a.task.split(",")
    print(f"{'task':12s} {'values':>10s} {'old ms':>8s} {'new ms':>8s} {'old/new':>8s}")
    for task in names:
        pc, params, saved = gradients_of_one_step(task, a.hidden, a.batch_size, 0)
        pc.set_weight_decay(a.decay)
        trainers = [getattr(m, TRAINERS[a.trainer])(pc) for m in (old, dy)]
        for tr in trainers:
            tr.set_clip_threshold(a.clip)
            tr.set_sparse_updates(bool(a.sparse))
        times = ([], [])
        for k in range(a.updates + 1):
            for j in ((0, 1) if k % 2 else (1, 0)):
                restore(params, saved)
                t0 = time.perf_counter()
                trainers[j].update()
                if k:                        # the first is a warm-up (state allocation)
                    times[j].append(time.perf_counter() - t0)
        o, n = (1e3 * statistics.median(t) for t in times)
        print(f"{task:12s} {pc.parameter_count():10d} {o:8.2f} {n:8.2f} {o / n:7.2f}x", flush=True)


if __name__ == "__main__":
    main()
