"""The classic DyNet XOR example: a two-layer perceptron learns x1 XOR x2.

    python examples/xor.py
    python examples/xor.py --strategy none --iterations 500

Each step builds one loss per example (four of them) in a fresh graph and sums them;
autobatch runs the four examples' `W * x + b`, `tanh`, ... as batched kernels.
"""
import argparse
import sys
from collections.abc import Sequence
from typing import Any

import autobatch as dy

DATA = [((0, 0), 0), ((0, 1), 1), ((1, 0), 1), ((1, 1), 0)]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description="XOR with a two-layer perceptron")
    ap.add_argument("--strategy", default=dy.default_strategy(),
                    help="a strategy: none, depth, agenda, critical, lookahead (the default), cost, learned")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    pc = dy.ParameterCollection(seed=args.seed)
    W = pc.add_parameters((args.hidden, 2))
    b = pc.add_parameters(args.hidden)
    V = pc.add_parameters((1, args.hidden))
    a = pc.add_parameters(1)
    trainer = dy.SimpleSGDTrainer(pc, 0.2)

    def predict(x: tuple[int, int]) -> dy.Expression:
        h = dy.tanh(W * dy.inputVector(x) + b)
        return dy.logistic(V * h + a)

    losses: list[float] = []
    for it in range(args.iterations):
        dy.renew_cg(strategy=args.strategy)
        loss = dy.esum([dy.binary_log_loss(predict(x), dy.scalarInput(y)) for x, y in DATA])
        losses.append(loss.value() / len(DATA))
        loss.backward()
        trainer.update()
        stats = dy.cg().stats()
        if it % 50 == 0 or it == args.iterations - 1:
            print(f"iteration {it}: average loss {losses[-1]:.4f}")

    print(f"one training step: {stats['nodes']} nodes, {stats['batches']} batches "
          f"with {args.strategy!r}")
    dy.renew_cg(strategy=args.strategy)
    for x, y in DATA:
        print(f"{x[0]} xor {x[1]} = {y}   predicted {predict(x).value():.3f}")
    return {"losses": losses, "stats": stats}


if __name__ == "__main__":
    main(sys.argv[1:])
