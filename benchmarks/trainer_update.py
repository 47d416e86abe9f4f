"""Time `trainer.update()` alone on a small per-sentence program: a BiLSTM tagger of
DyNet's benchmark sizes (embeddings, LSTMs and MLP of 16, one sentence per update),
the case where the update is a large part of a step.

    PYTHONPATH=. python benchmarks/trainer_update.py [--trainer adam] [--sparse 0|1]
        [--steps 1000] [--rows 1000] [--size 16] [--clip 5] [--decay 0]

Prints the median and mean microseconds of one update, and the median of a whole step
(graph, forward and backward of one sentence, then the update). To compare two builds, run it alternately
with PYTHONPATH set to each and compare the medians (the machine is shared)."""
import argparse
import statistics
import time

import numpy as np

import autobatch as dy

TRAINERS = {"sgd": dy.SimpleSGDTrainer, "momentum": dy.MomentumSGDTrainer,
            "adagrad": dy.AdagradTrainer, "adadelta": dy.AdadeltaTrainer,
            "rmsprop": dy.RMSPropTrainer, "adam": dy.AdamTrainer, "amsgrad": dy.AmsgradTrainer}


def tagger(size, rows, ntags=8, seed=0):
    pc = dy.ParameterCollection(seed=seed)
    words = pc.add_lookup_parameters((rows, size))
    fwd = dy.VanillaLSTMBuilder(1, size, size, pc)
    bwd = dy.VanillaLSTMBuilder(1, size, size, pc)
    H, O = pc.add_parameters((size, 2 * size)), pc.add_parameters((ntags, size))

    def loss(sentence, tags):
        dy.renew_cg()
        xs = [words[w] for w in sentence]
        fs = fwd.initial_state().transduce(xs)
        bs = bwd.initial_state().transduce(xs[::-1])[::-1]
        return dy.esum([dy.pickneglogsoftmax(O * dy.tanh(H * dy.concatenate([f, b])), t)
                        for f, b, t in zip(fs, bs, tags)])
    return pc, loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainer", choices=sorted(TRAINERS), default="adam")
    ap.add_argument("--sparse", type=int, default=0, help="sparse lookup updates (1) or dense (0)")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=1000, help="rows of the word table")
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--clip", type=float, default=-1.0, help="clip threshold (<= 0: off, as the tagger)")
    ap.add_argument("--decay", type=float, default=0.0, help="weight decay of the collection")
    a = ap.parse_args()
    pc, loss = tagger(a.size, a.rows)
    if a.decay:
        pc.set_weight_decay(a.decay)
    trainer = TRAINERS[a.trainer](pc)
    trainer.set_clip_threshold(a.clip)
    trainer.set_sparse_updates(bool(a.sparse))
    rng = np.random.default_rng(0)
    times, steps = [], []
    for _ in range(a.steps):
        n = int(rng.integers(4, 12))
        t0 = time.perf_counter()
        l = loss(rng.integers(0, a.rows, n).tolist(), rng.integers(0, 8, n).tolist())
        l.value()
        l.backward()
        t1 = time.perf_counter()
        trainer.update()
        t2 = time.perf_counter()
        times.append(t2 - t1)
        steps.append(t2 - t0)
    print(f"{a.trainer} sparse={a.sparse} params={len(pc.parameters_list())}+"
          f"{len(pc.lookup_parameters_list())} values={pc.parameter_count()}: update median "
          f"{1e6 * statistics.median(times):.1f} us (mean {1e6 * statistics.fmean(times):.1f}), "
          f"step median {1e6 * statistics.median(steps):.1f} us")


if __name__ == "__main__":
    main()
