"""Per-sentence training: one graph, one loss and one update per tree or sentence, as in
the DyNet paper's benchmark scripts (neulab/dynet-benchmark, dynet-py/treenn.py and
dynet-py/bilstm-tagger.py), with the time of a step split by phase.

    python benchmarks/per_sentence.py --data DIR                  # autobatch, every config
    python benchmarks/per_sentence.py --data DIR --compare /work/venv-new/bin/python
    python benchmarks/per_sentence.py --data DIR --callgrind --config treenn-adam-dense
    python benchmarks/per_sentence.py --data DIR --baseline OTHER_TREE     # before/after

DIR holds the benchmark's data (data/trees/{train,dev}.txt, data/tags/{train,dev}.txt):
``git --git-dir=<mirror of neulab/dynet-benchmark> archive HEAD | tar -x -C DIR``. A
missing data/tags/train.txt is replaced by data/tags/dev.txt.

Configurations: treenn (SST trees, embed 128, hidden 128) and tagger (BiLSTM, embed 128,
hidden 50, MLP 32), as run-tests.sh sizes them, each with Adam or SGD and dense or sparse
updates (``treenn-adam-dense`` ...). The phases of a step:

    renew_cg   dy.renew_cg()
    parameter  dy.parameter(p) for the graph's parameters (once per graph here; treenn.py
               calls it at every tree node)
    initial    builder.initial_state() (tagger)
    add_input  the lookups and the recurrent steps (tagger: transduce)
    ops        the rest of the graph: the tree's cells, the MLP, the losses, esum
    value      the first value()/scalar_value(): scheduling and forward
    backward   loss.backward()
    update     trainer.update()

--compare runs the same code under another interpreter with DyNet (``import dynet as
dy``, without and with its autobatch), each library in a worker process of its own; the
rounds are interleaved (autobatch, DyNet, DyNet autobatch, autobatch, ...) and the
figures are medians over rounds of the per-step mean, so that the ratios are side by
side. --callgrind runs one worker under valgrind and counts the instructions of each
phase: the worker calls os.getppid() at each phase boundary and callgrind dumps its
counters there (--dump-before=os_getppid).
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

PHASES = ("renew_cg", "parameter", "initial", "add_input", "ops", "value", "backward",
          "update")
CONFIGS = [f"{model}-{trainer}-{update}" for model in ("treenn", "tagger")
           for trainer in ("adam", "sgd") for update in ("dense", "sparse")]
dy = None                           # the library under test, bound by the worker


# ---- data, read as the scripts read it ----

def tree_tokens(line):
    return [t for t in re.findall(r" +|[()]|[^ ()]+", line) if t[0] != " "]


def read_tree(toks):
    """(label, children) for a bracket; a leaf is (word, None)."""
    label = next(toks)
    children = []
    for tok in toks:
        if tok == "(":
            children.append(read_tree(toks))
        elif tok == ")":
            return label, children
        else:
            children.append((tok, None))
    raise ValueError("unbalanced tree")


def read_trees(path):
    trees = []
    with open(path) as f:
        for line in f:
            toks = iter(tree_tokens(line.strip()))
            assert next(toks) == "("
            trees.append(read_tree(toks))
    return trees


def nonterms(tree, out):
    out.append(tree)
    for child in tree[1]:
        if child[1] is not None:
            nonterms(child, out)
    return out


def leaves(tree, out):
    for child in tree[1]:
        if child[1] is None:
            out.append(child[0])
        else:
            leaves(child, out)
    return out


def read_tagged(path):
    with open(path) as f:
        return [[tuple(x.rsplit("|", 1)) for x in line.split()] for line in f if line.strip()]


# ---- the models, in DyNet's style ----

class TreeNN:
    """treenn.py's Tree-LSTM: i, o, u at the leaves; i, o, f1, f2, u at internal nodes;
    a softmax loss at every internal node."""

    def __init__(self, pc, trees, wdim, hdim):
        labels, words = Counter(), Counter()
        for t in trees:
            labels.update(n[0] for n in nonterms(t, []))
            words.update(leaves(t, []))
        self.l2i = {lab: i for i, lab in enumerate(labels)}
        self.w2i = {w: i for i, w in enumerate(["_UNK_"] + list(words))}
        self.WS = [pc.add_parameters((hdim, wdim)) for _ in "iou"]
        self.US = [pc.add_parameters((hdim, 2 * hdim)) for _ in "iou"]
        self.UFS = [pc.add_parameters((hdim, hdim)) for _ in "ff"]
        self.BS = [pc.add_parameters(hdim) for _ in "iouf"]
        self.E = pc.add_lookup_parameters((len(self.w2i), wdim))
        self.W_ = pc.add_parameters((len(self.l2i), hdim))

    def parameters(self):
        return [[dy.parameter(p) for p in ps]
                for ps in (self.WS, self.US, self.UFS, self.BS, [self.W_])]

    def cell(self, tree, ps, out):
        (Wi, Wo, Wu), (Ui, Uo, Uu), (Uf1, Uf2), (bi, bo, bu, bf), _ = ps
        if len(tree[1]) == 1:
            emb = self.E[self.w2i.get(tree[1][0][0], 0)]
            i = dy.logistic(dy.affine_transform([bi, Wi, emb]))
            o = dy.logistic(dy.affine_transform([bo, Wo, emb]))
            u = dy.tanh(dy.affine_transform([bu, Wu, emb]))
            c = dy.cmult(i, u)
            h = dy.cmult(o, dy.tanh(c))
        else:
            e1, c1 = self.cell(tree[1][0], ps, out)
            e2, c2 = self.cell(tree[1][1], ps, out)
            e = dy.concatenate([e1, e2])
            i = dy.logistic(dy.affine_transform([bi, Ui, e]))
            o = dy.logistic(dy.affine_transform([bo, Uo, e]))
            f1 = dy.logistic(dy.affine_transform([bf, Uf1, e1]))
            f2 = dy.logistic(dy.affine_transform([bf, Uf2, e2]))
            u = dy.tanh(dy.affine_transform([bu, Uu, e]))
            c = dy.cmult(i, u) + dy.cmult(f1, c1) + dy.cmult(f2, c2)
            h = dy.cmult(o, dy.tanh(c))
        out.append((h, tree[0]))
        return h, c

    def step(self, tree, trainer, mark):
        dy.renew_cg()
        mark(0)
        ps = self.parameters()
        mark(1)
        mark(2)
        mark(3)
        hs = []
        self.cell(tree, ps, hs)
        W = ps[4][0]
        loss = dy.esum([dy.pickneglogsoftmax(W * h, self.l2i[lab]) for h, lab in hs])
        mark(4)
        value = loss.value()
        mark(5)
        loss.backward()
        mark(6)
        trainer.update()
        mark(7)
        return value


class Tagger:
    """bilstm-tagger.py: word lookups (UNK for words seen 5 times or fewer), forward and
    backward VanillaLSTMBuilder, O * tanh(H * [f; b]) per word, a softmax loss per tag."""

    def __init__(self, pc, sents, wdim, hdim, mlp):
        wc = Counter(w for s in sents for w, _ in s)
        words = list(dict.fromkeys([w for s in sents for w, _ in s] + ["_UNK_"]))
        tags = list(dict.fromkeys(t for s in sents for _, t in s))
        self.w2i = {w: i for i, w in enumerate(words)}
        self.t2i = {t: i for i, t in enumerate(tags)}
        self.unk = self.w2i["_UNK_"]
        self.wc = wc
        self.E = pc.add_lookup_parameters((len(words), wdim))
        self.pH = pc.add_parameters((mlp, hdim * 2))
        self.pO = pc.add_parameters((len(tags), mlp))
        self.fwd = dy.VanillaLSTMBuilder(1, wdim, hdim, pc)
        self.bwd = dy.VanillaLSTMBuilder(1, wdim, hdim, pc)

    def step(self, sent, trainer, mark):
        dy.renew_cg()
        mark(0)
        H = dy.parameter(self.pH)
        O = dy.parameter(self.pO)
        mark(1)
        f_init = self.fwd.initial_state()
        b_init = self.bwd.initial_state()
        mark(2)
        wembs = [self.E[self.w2i[w] if self.wc[w] > 5 else self.unk] for w, _ in sent]
        fw = f_init.transduce(wembs)
        bw = b_init.transduce(reversed(wembs))
        mark(3)
        errs = []
        for f, b, (_, t) in zip(fw, reversed(bw), sent):
            r = O * dy.tanh(H * dy.concatenate([f, b]))
            errs.append(dy.pickneglogsoftmax(r, self.t2i[t]))
        loss = dy.esum(errs)
        mark(4)
        value = loss.scalar_value()
        mark(5)
        loss.backward()
        mark(6)
        trainer.update()
        mark(7)
        return value


# ---- the worker: one library, one configuration ----

def load_library(name, dynet_autobatch, seed):
    global dy
    if name == "dynet":
        import dynet_config
        dynet_config.set(mem=512, random_seed=seed + 1, autobatch=dynet_autobatch)
        import dynet
        dy = dynet
    else:
        import autobatch
        dy = autobatch
        dy.reset_random_seed(seed + 1)


def make_config(config, data, seed):
    model, trainer_name, update = config.split("-")
    pc = dy.ParameterCollection()
    rng = random.Random(seed)
    if model == "treenn":
        items = read_trees(os.path.join(data, "data", "trees", "train.txt"))
        net = TreeNN(pc, items, 128, 128)
    else:
        path = os.path.join(data, "data", "tags", "train.txt")
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            path = os.path.join(data, "data", "tags", "dev.txt")
        items = read_tagged(path)
        net = Tagger(pc, items, 128, 50, 32)
    trainer = dy.AdamTrainer(pc) if trainer_name == "adam" else dy.SimpleSGDTrainer(pc)
    trainer.set_clip_threshold(-1.0)
    trainer.set_sparse_updates(update == "sparse")
    rng.shuffle(items)
    net.pc = pc                 # DyNet's trainer does not keep its collection alive
    return net, trainer, items


def worker(a):
    # DyNet's C++ prints to file descriptor 1: the protocol gets a copy of it, and
    # descriptor 1 becomes stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    load_library(a.library, a.dynet_autobatch, a.seed)
    net, trainer, items = make_config(a.config, a.data, a.seed)
    clock = time.perf_counter
    times = [0.0] * len(PHASES)
    last = [0.0]

    def mark_time(k):
        now = clock()
        times[k] += now - last[0]
        last[0] = now

    def mark_dump(k):
        os.getppid()                            # callgrind dumps its counters here

    for k in range(a.warmup):
        net.step(items[k], trainer, lambda k: None)
    first = a.warmup
    if a.callgrind_child:
        os.getppid()
        losses = [net.step(items[first + k], trainer, mark_dump) for k in range(a.steps)]
        out.write(json.dumps({"losses": losses}) + "\n")
        return 0
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        if line.strip() != "ROUND":
            break
        times[:] = [0.0] * len(PHASES)
        losses = []
        for k in range(a.steps):
            last[0] = clock()
            losses.append(net.step(items[first + k], trainer, mark_time))
        out.write(json.dumps({"phases": [t / a.steps for t in times],
                              "loss": sum(losses)}) + "\n")
        out.flush()
    return 0


# ---- the parent: interleaved rounds, callgrind ----

def worker_cmd(python, library, config, a, dynet_autobatch=0, callgrind=False):
    cmd = [python, os.path.abspath(__file__), "--worker", library, "--config", config,
           "--data", a.data, "--steps", str(a.steps), "--warmup", str(a.warmup),
           "--seed", str(a.seed), "--dynet-autobatch", str(dynet_autobatch)]
    return cmd + (["--callgrind-child"] if callgrind else [])


def env_for(library, root=None, threads="1"):
    """The worker's environment: autobatch from `root` (default: this script's tree) on
    `threads` engine threads (AUTOBATCH_NUM_THREADS: a count or auto)."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", AUTOBATCH_NUM_THREADS=threads)
    if library == "autobatch":
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def compare(a, config):
    threads = a.threads.split(",")
    systems = [("autobatch" + (f"@{t}" if len(threads) > 1 else ""), sys.executable, 0, None, t)
               for t in threads]
    if a.baseline:
        systems += [("baseline", sys.executable, 0, os.path.abspath(a.baseline), threads[0])]
    if a.compare:
        systems += [("dynet", a.compare, 0, None, "1"), ("dynet-ab", a.compare, 1, None, "1")]
    procs = []
    for name, python, ab, root, t in systems:
        library = "dynet" if name.startswith("dynet") else "autobatch"
        p = subprocess.Popen(worker_cmd(python, library, config, a, ab),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=env_for(library, root, t), cwd=tempfile.gettempdir())
        json.loads(p.stdout.readline())
        procs.append((name, p))
    rows = {name: [] for name, _ in procs}
    for _ in range(a.rounds):
        for name, p in procs:
            p.stdin.write("ROUND\n")
            p.stdin.flush()
            rows[name].append(json.loads(p.stdout.readline())["phases"])
    for _, p in procs:
        p.stdin.close()
        p.wait()
    return {name: [statistics.median(r[k] for r in rs) for k in range(len(PHASES))]
            for name, rs in rows.items()}


def print_times(config, result):
    print(f"\n{config}: us per step (median over rounds of the mean over steps)")
    names = list(result)
    print(f"  {'phase':<10s}" + "".join(f" {n:>10s}" for n in names)
          + "".join(f" {'/' + n:>10s}" for n in names[1:]))
    totals = {n: sum(v) for n, v in result.items()}
    for k, phase in enumerate(PHASES + ("step",)):
        vals = {n: (v[k] if k < len(PHASES) else totals[n]) for n, v in result.items()}
        ab = vals[names[0]]
        print(f"  {phase:<10s}" + "".join(f" {vals[n] * 1e6:10.1f}" for n in names)
              + "".join(f" {vals[n] / ab if ab else float('nan'):10.2f}" for n in names[1:]))
    dynets = [n for n in names if n.startswith("dynet")]
    if dynets:
        best = min(totals[n] for n in dynets)
        print(f"  faster DyNet / autobatch = {best / totals[names[0]]:.2f}x")


def callgrind(a, config, library, python, dynet_autobatch, root=None):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg")
        if a.keep:                   # callgrind's files: cg.<config>.<library>.<dump>
            out = os.path.join(os.path.abspath(a.keep), f"cg.{config}.{library}{dynet_autobatch}{'.baseline' if root else ''}")
        cmd = ["valgrind", "--tool=callgrind", "--dump-before=os_getppid", "--compress-strings=no",
               f"--callgrind-out-file={out}"] + \
            worker_cmd(python, library, config, a, dynet_autobatch, callgrind=True)
        subprocess.run(cmd, check=True, env=env_for(library, root), cwd=d,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        parts = []
        where, name = os.path.split(out)
        dumps = [f for f in os.listdir(where) if f.startswith(name + ".")]
        for f in sorted(dumps, key=lambda f: int(f.rsplit(".", 1)[1])):
            with open(os.path.join(where, f)) as fh:
                for line in fh:
                    if line.startswith(("summary:", "totals:")):
                        parts.append(int(line.split()[1]))
                        break
    # parts[0]: start-up and warm-up; then one dump per phase of every step
    steps = parts[1:1 + a.steps * len(PHASES)]
    return [sum(steps[s * len(PHASES) + k] for s in range(a.steps)) // a.steps
            for k in range(len(PHASES))]


def print_instructions(config, result):
    print(f"\n{config}: instructions per step (thousands; callgrind, mean over steps)")
    names = list(result)
    print(f"  {'phase':<10s}" + "".join(f" {n:>10s}" for n in names))
    for k, phase in enumerate(PHASES + ("step",)):
        print(f"  {phase:<10s}" + "".join(
            f" {(v[k] if k < len(PHASES) else sum(v)) / 1e3:10.1f}" for v in result.values()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="the dynet-benchmark checkout (data/...)")
    ap.add_argument("--config", default=",".join(CONFIGS),
                    help="comma-separated, from: " + ", ".join(CONFIGS))
    ap.add_argument("--steps", type=int, default=100, help="sentences per round")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compare", metavar="PYTHON", help="an interpreter with DyNet")
    ap.add_argument("--baseline", metavar="TREE", help="another autobatch tree (built) to "
                    "time side by side, as 'baseline' (e.g. the commit before a change)")
    ap.add_argument("--threads", default="1", help="autobatch's engine threads (AUTOBATCH_NUM_THREADS): "
                    "a count or auto (the default policy), or a comma list run side by side, "
                    "e.g. 1,auto; callgrind runs one thread")
    ap.add_argument("--callgrind", action="store_true", help="instruction counts per phase")
    ap.add_argument("--keep", metavar="DIR", help="keep callgrind's files here (dump 1 + "
                    "s * 8 + k: phase k of step s; callgrind_annotate them)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--dynet-autobatch", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--callgrind-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.data = os.path.abspath(a.data)
    if a.worker:
        a.library = a.worker
        return worker(a)
    for config in a.config.split(","):
        if config not in CONFIGS:
            ap.error(f"unknown configuration {config!r}")
        if a.callgrind:
            result = {"autobatch": callgrind(a, config, "autobatch", sys.executable, 0)}
            if a.baseline:
                result["baseline"] = callgrind(a, config, "autobatch", sys.executable, 0,
                                               os.path.abspath(a.baseline))
            if a.compare:
                result["dynet"] = callgrind(a, config, "dynet", a.compare, 0)
                result["dynet-ab"] = callgrind(a, config, "dynet", a.compare, 1)
            print_instructions(config, result)
        else:
            print_times(config, compare(a, config))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
