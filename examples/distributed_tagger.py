"""The BiLSTM tagger of bilstm_tagger.py, trained data-parallel on N processes over MPI.

    mpiexec -n 2 python examples/distributed_tagger.py         # two processes
    python examples/distributed_tagger.py                       # one process, the same training
    mpiexec -n 2 python examples/distributed_tagger.py --train train.tsv --dev dev.tsv --save tagger

The model, the data and every flag are bilstm_tagger.py's. `--batch-size` is the global
minibatch: each of the N processes takes about batch-size / N sentences of it per step, and
DistributedTrainer sums the gradients of all processes (the tagger sums its losses), so a
step of N processes is the step of one process with the whole minibatch. N processes
therefore reach the same held-out accuracy after the same number of epochs as one (up to
float32 summation order). Every epoch the training data are reshuffled with a seed all
processes share, and each minibatch is split between the processes by sentence length
(`dist.minibatches`), so that they have about as much work; the held-out data are split
between the processes and
the accuracy combined (`dist.allreduce_mean`). Rank 0 prints and, with --save, saves.
"""
import os
import sys
import time

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np

import autobatch as dy
from autobatch import distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bilstm_tagger as base  # noqa: E402  (the model and data code, beside this file)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = base.arg_parser(__doc__)
    ap.add_argument("--save", metavar="BASENAME", help="save the trained model (rank 0 writes it)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="abort the job when a process waits longer than this in a collective (s)")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    dist.init(timeout=args.timeout)
    ranks = dist.size()
    def say(*text: object) -> None:
        if dist.is_main():
            print(*text)


    d = base.load_data(args)
    pc, tagger, local_trainer = base.build_model(args, d)
    dist.broadcast_parameters(pc)
    trainer = dist.DistributedTrainer(local_trainer, reduce="sum")
    say(f"{ranks} process(es), each taking its part of every minibatch of {args.batch_size} "
        f"sentences; train: {len(d.train)} sentences; strategy {args.strategy!r}")

    losses: list[float] = []
    step_times: list[float] = []
    for epoch in range(1, args.epochs + 1):
        total, tokens, t_epoch = 0.0, 0, time.perf_counter()
        # this process's part of every minibatch, balanced by sentence length
        for part in dist.minibatches(d.train, args.batch_size, epoch=epoch, seed=args.seed,
                                     cost=lambda sentence: len(sentence[0])):
            t0 = time.perf_counter()
            tokens += sum(len(words) for words, _ in part)
            loss = base.batch_loss(tagger, part, args.strategy)
            total += loss.value()
            loss.backward()
            trainer.update()
            step_times.append(time.perf_counter() - t0)
        losses.append(dist.allreduce_mean(total / tokens, weight=tokens))
        say(f"epoch {epoch}: loss per token {losses[-1]:.4f}  ({time.perf_counter() - t_epoch:.1f}s)")

    dev = dist.shard(d.dev, shuffle=False, drop_last=False)
    gold = np.array([t for _, tags in dev for t in tags])
    correct = base.predict(tagger, dev, args.batch_size, args.strategy) == gold
    acc = dist.allreduce_mean(correct.mean() if gold.size else 0.0, weight=gold.size)
    say(f"held-out tag accuracy: {acc:.3f}")

    comm = trainer.totals
    steps = max(comm["steps"], 1)
    step_s = dist.allreduce_mean(float(np.median(step_times)))
    say(f"median step {1000 * step_s:.1f} ms; combining gradients {1000 * comm['seconds'] / steps:.2f} ms "
        f"per step ({1000 * comm['mpi_seconds'] / steps:.2f} ms in MPI), "
        f"{comm['bytes_sent'] / steps / 1024:.0f} KiB sent per step by rank {dist.rank()}")
    if args.save:
        dist.save(args.save, [pc])
        say(f"saved {args.save}.data / .meta")
    return {"losses": losses, "accuracy": acc, "step_seconds": step_s, "comm": dict(comm)}


if __name__ == "__main__":
    main(sys.argv[1:])
