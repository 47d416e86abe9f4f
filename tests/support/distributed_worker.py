"""The program that tests/distributed/test_distributed.py runs under `mpiexec -n 2` (and imports for
its one-process reference): a small tagger (a lookup table, an LSTM, an output layer)
trained for a few steps with `autobatch.distributed`.

    python distributed_worker.py OUT_DIR train       every config of CONFIGS, results in OUT_DIR;
                                                     then save on rank 0, load on all; populate
                                                     on rank 0 and broadcast
    python distributed_worker.py OUT_DIR raise       rank 1 raises in its third step
    python distributed_worker.py OUT_DIR short       rank 1 stops one step early (timeout 3 s)
    python distributed_worker.py OUT_DIR mismatch    every way the ranks' models can differ
                                                     (MISMATCHES), each refusal caught and
                                                     written to OUT_DIR; then update_subset
    python distributed_worker.py OUT_DIR shapes      rank 1's W transposed, not caught
"""
import json
import pathlib
import sys

import numpy as np

import autobatch as dy
from autobatch import distributed as dist

VOCAB, USED_WORDS, TAGS, DIM, HIDDEN = 60, 40, 4, 6, 8
BATCH, STEPS, SEED = 8, 4, 7          # BATCH: the global minibatch, split over the ranks

# trainer, how gradients combine, strategy, sparse lookup updates, clipping threshold,
# dense buffer size (MB; 0.001 makes several buffers, some holding one large gradient),
# how a rank takes its part (shard: every N-th item; balanced: minibatches(cost=length))
CONFIGS = {
    "adam-sum-agenda": dict(trainer="adam", reduce="sum", strategy="agenda", sparse=True, clip=1.0,
                            bucket_mb=32),
    "sgd-mean-depth": dict(trainer="sgd", reduce="mean", strategy="depth", sparse=False, clip=0.5,
                           bucket_mb=0.001),
    "momentum-sum-none": dict(trainer="momentum", reduce="sum", strategy="none", sparse=True, clip=0,
                              bucket_mb=32, split="balanced"),
    "adagrad-mean-critical": dict(trainer="adagrad", reduce="mean", strategy="critical", sparse=True,
                                  clip=0.5, bucket_mb=32),
}
TRAINERS = {"adam": (dy.AdamTrainer, 0.01), "sgd": (dy.SimpleSGDTrainer, 0.1),
            "momentum": (dy.MomentumSGDTrainer, 0.05), "adagrad": (dy.AdagradTrainer, 0.1)}


def corpus(n=BATCH * STEPS, seed=0):
    """Sentences of 1-7 (word, tag) ids; words above USED_WORDS never occur, so their
    rows of the lookup table must never change."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, USED_WORDS, size=k).tolist(), rng.integers(0, TAGS, size=k).tolist())
            for k in rng.integers(1, 8, size=n)]


class Model:
    def __init__(self, seed):
        self.pc = dy.ParameterCollection(seed=seed)
        self.E = self.pc.add_lookup_parameters((VOCAB, DIM))
        self.lstm = dy.LSTMBuilder(1, DIM, HIDDEN, self.pc)
        self.W = self.pc.add_parameters((TAGS, HIDDEN))
        self.b = self.pc.add_parameters(TAGS)

    def loss(self, words, tags):
        hs = self.lstm.initial_state().transduce([self.E[w] for w in words])
        return dy.esum([dy.pickneglogsoftmax(dy.affine_transform([self.b, self.W, h]), t)
                        for h, t in zip(hs, tags)])

    def values(self):
        """{name: values}; names without "/" so that they can be keys of an .npz file."""
        return {p.name().strip("/").replace("/", "."): p.as_array()
                for p in self.pc.parameters_list() + self.pc.lookup_parameters_list()}


def make_trainer(cfg, pc):
    cls, lr = TRAINERS[cfg["trainer"]]
    trainer = cls(pc, lr)
    trainer.set_clip_threshold(cfg["clip"])
    trainer.set_sparse_updates(cfg["sparse"])
    return trainer


def step(model, trainer, batch, cfg):
    """One training step on `batch`: summed losses, or for reduce="mean" their mean."""
    dy.renew_cg(strategy=cfg["strategy"])
    loss = dy.esum([model.loss(w, t) for w, t in batch])
    if cfg["reduce"] == "mean":
        loss = loss / len(batch)
    value = loss.value()
    loss.backward()
    trainer.update()
    return value


def train_distributed(cfg, data, fault=None):
    """STEPS steps with per-rank minibatch BATCH / size(); every rank starts from its own
    random values, so only broadcast_parameters makes them agree."""
    model = Model(seed=SEED + 100 * dist.rank())
    dist.broadcast_parameters(model.pc)
    trainer = dist.DistributedTrainer(make_trainer(cfg, model.pc), reduce=cfg["reduce"],
                                      bucket_mb=cfg["bucket_mb"])
    per_rank = BATCH // dist.size()
    if cfg.get("split") == "balanced":
        parts = list(dist.minibatches(data, BATCH, epoch=0, seed=SEED, cost=lambda s: len(s[0])))
    else:
        mine = dist.shard(data, epoch=0, seed=SEED)
        parts = [mine[k:k + per_rank] for k in range(0, len(mine), per_rank)]
    steps = STEPS - 1 if fault == "short" and dist.rank() == 1 else STEPS
    sent, used = [], []
    for s in range(steps):
        if fault == "raise" and dist.rank() == 1 and s == 2:
            raise ValueError("injected fault on purpose")
        batch = parts[s]
        used.append(len({w for words, _ in batch for w in words}))
        step(model, trainer, batch, cfg)
        sent.append(trainer.last_step.get("sparse_rows_sent", 0))
    return model, trainer, {"parts": parts[:steps], "rows_sent": sent, "rows_used": used}


def transposed_on_rank_1():
    pc = dy.ParameterCollection(seed=1)
    pc.add_parameters((3, 4) if dist.rank() == 0 else (4, 3), name="W")
    return pc


def _broadcast_of(build):
    def case():
        dist.broadcast_parameters(build())
    return case


def _update_of(build, sparse=(True, True), subset=None):
    """A step of a DistributedTrainer over the model `build` makes, the trainer's sparse
    setting per rank as `sparse`, `update_subset` with subset[rank] if given."""
    def case():
        pc = build()
        trainer = dist.DistributedTrainer(dy.SimpleSGDTrainer(pc), reduce="sum")
        trainer.set_sparse_updates(sparse[dist.rank()])
        dy.renew_cg()
        dy.esum([dy.sum_elems(p) for p in pc.parameters_list()] +
                [dy.sum_elems(lp[0]) for lp in pc.lookup_parameters_list()]).backward()
        if subset is None:
            trainer.update()
        else:
            trainer.update_subset(subset[dist.rank()], [])
    return case


def _model(params, lookups=(), names=None):
    """A collection with parameters of the shapes params[rank] and lookup tables of the
    shapes lookups[rank] (names[rank] their names, if given)."""
    def build():
        r = dist.rank()
        pc = dy.ParameterCollection(seed=1)
        for k, shape in enumerate(params[r]):
            pc.add_parameters(shape, name=names[r][k] if names else "")
        for shape in (lookups[r] if lookups else ()):
            pc.add_lookup_parameters(shape)
        return pc
    return build


# how the ranks' models differ -> what must refuse it: each case raises on both ranks
MISMATCHES = {
    "dense-transposed": _broadcast_of(transposed_on_rank_1),
    "lookup-reshaped": _broadcast_of(_model([[(2,)], [(2,)]], [[(10, 6)], [(20, 3)]])),
    "renamed": _broadcast_of(_model([[(3,), (2,)], [(3,), (2,)]], names=[["a", "b"], ["a", "c"]])),
    "extra-parameter": _update_of(_model([[(3,)], [(3,), (1,)]])),
    "gradients-transposed": _update_of(_model([[(2, 3), (4,)], [(3, 2), (4,)]])),
    "sparse-on-one-rank": _update_of(_model([[(2,)], [(2,)]], [[(5, 2)], [(5, 2)]]), sparse=(True, False)),
    "subset-differs": _update_of(_model([[(2,), (2,)], [(2,), (2,)]]), subset=([0], [1])),
}


def check_mismatches(out):
    """Run every case of MISMATCHES; write {case: (exception type, message)} per rank."""
    refused = {}
    for name, case in MISMATCHES.items():
        try:
            case()
        except (ValueError, IndexError, TypeError) as e:
            refused[name] = [type(e).__name__, str(e)]
        else:
            refused[name] = None
    (out / f"mismatch-rank{dist.rank()}.json").write_text(json.dumps(refused))


def subset_indices(model):
    """update_subset's arguments that list W and b (not the LSTM) and the table E."""
    params = model.pc.parameters_list()
    return [k for k, p in enumerate(params) if p is model.W or p is model.b], [0]


def train_with_subsets(parts, cfg):
    """Two steps from rank 0's initial model, on parts[0] and parts[1] (lists of (words,
    tags)): the first ends in update_subset(subset_indices), the second in update(), so
    the LSTM's gradients of the first step wait for the second. Returns the model."""
    model = Model(seed=SEED + 100 * dist.rank())
    dist.broadcast_parameters(model.pc)
    trainer = dist.DistributedTrainer(make_trainer(cfg, model.pc), reduce=cfg["reduce"])
    for k, batch in enumerate(parts):
        dy.renew_cg(strategy=cfg["strategy"])
        dy.esum([model.loss(w, t) for w, t in batch]).backward()
        if k == 0:
            trainer.update_subset(*subset_indices(model))
        else:
            trainer.update()
    return model


def main(out, mode):
    dist.init(timeout=3 if mode == "short" else 60)
    data = corpus()
    if mode in ("raise", "short"):
        train_distributed(CONFIGS["adam-sum-agenda"], data, fault=mode)
        return
    if mode == "shapes":
        dist.broadcast_parameters(transposed_on_rank_1())
        return
    if mode == "mismatch":
        check_mismatches(out)
        cfg = CONFIGS["adam-sum-agenda"]
        mine = dist.shard(data, epoch=0, seed=SEED)
        per_rank = BATCH // dist.size()
        parts = [mine[k * per_rank:(k + 1) * per_rank] for k in range(2)]
        model = train_with_subsets(parts, cfg)
        np.savez(out / f"subset-rank{dist.rank()}.npz", **model.values())
        return
    for name, cfg in CONFIGS.items():
        model, trainer, info = train_distributed(cfg, data)
        r = dist.rank()
        np.savez(out / f"{name}-rank{r}.npz", **model.values())
        info["last_step"] = trainer.last_step
        info["size"] = dist.size()
        info["reduced"] = [dist.allreduce(r + 1, "sum"), dist.allreduce(r + 1, "max"),
                           dist.allreduce(r + 1, "min"), dist.allreduce_mean(r, weight=r + 1)]
        (out / f"{name}-rank{r}.json").write_text(json.dumps(info))
    # rank 0 saves its model; every rank loads the file into a new collection
    dist.save(str(out / "model"), [Model(seed=SEED + 100 * dist.rank()).pc])
    loaded = dist.load(str(out / "model"), dy.ParameterCollection())[0]
    arrays = [p.as_array() for p in loaded.parameters_list() + loaded.lookup_parameters_list()]
    np.savez(out / f"loaded-rank{dist.rank()}.npz", *arrays)
    # rank 0 alone populates a model from that file, then broadcasts it
    model = Model(seed=999 + dist.rank())
    if dist.is_main():
        model.pc.populate(str(out / "model.data"))
    dist.broadcast_parameters(model.pc)
    np.savez(out / f"populated-rank{dist.rank()}.npz", *model.values().values())


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), sys.argv[2])
