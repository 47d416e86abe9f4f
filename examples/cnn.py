"""A small convolutional network that learns to name the shape drawn in an image.

    python examples/cnn.py
    python examples/cnn.py --strategy none --epochs 2

The images are made here: 12 x 12 grey pictures of one of five shapes (horizontal
bar, vertical bar, cross, square outline, diagonal) at a random place and size, with
noise. The model is written per image, as in DyNet:

    conv2d_bias (3x3, 1 -> 8 channels, SAME) -> rectify -> maxpooling2d (2x2)
    conv2d_bias (3x3, 8 -> 16, SAME) -> rectify -> maxpooling2d (2x2)
    reshape to a vector -> affine -> softmax loss

and autobatch runs the convolutions of all images of a minibatch as one im2col and
one sgemm (the filters are shared by every image).
"""
import argparse
import sys

from collections.abc import Sequence
from typing import Any

import numpy as np

import autobatch as dy
from autobatch.progress import progress

Image = np.ndarray[Any, np.dtype[np.float32]]

SHAPES = ("horizontal bar", "vertical bar", "cross", "square", "diagonal")


def draw(kind: int, size: int, rng: np.random.Generator) -> Image:
    """One noisy size x size image (column-major (H, W, 1), as DyNet's images)."""
    img = np.zeros((size, size), dtype=np.float32)
    n = int(rng.integers(5, size - 1))            # extent of the shape
    r, c = (int(v) for v in rng.integers(0, size - n + 1, size=2))
    mid_r, mid_c = r + n // 2, c + n // 2
    if kind == 0:
        img[mid_r, c:c + n] = 1
    elif kind == 1:
        img[r:r + n, mid_c] = 1
    elif kind == 2:
        img[mid_r, c:c + n] = 1
        img[r:r + n, mid_c] = 1
    elif kind == 3:
        img[r, c:c + n] = img[r + n - 1, c:c + n] = 1
        img[r:r + n, c] = img[r:r + n, c + n - 1] = 1
    else:
        for k in range(n):
            img[r + k, c + k] = 1
    img += rng.normal(0, 0.2, img.shape).astype(np.float32)
    return img.reshape(size, size, 1)


def make_data(n: int, size: int, seed: int) -> list[tuple[Image, int]]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, len(SHAPES), size=n)
    return [(draw(int(k), size, rng), int(k)) for k in labels]


class CNN:
    def __init__(self, pc: dy.ParameterCollection, size: int,
                 channels: tuple[int, int] = (8, 16)) -> None:
        c1, c2 = channels
        self.f1 = pc.add_parameters((3, 3, 1, c1))
        self.b1 = pc.add_parameters(c1, init=dy.ConstInitializer(0.0))
        self.f2 = pc.add_parameters((3, 3, c1, c2))
        self.b2 = pc.add_parameters(c2, init=dy.ConstInitializer(0.0))
        side = -(-(-(-size // 2)) // 2)           # two SAME 2x2 poolings
        self.features = side * side * c2
        self.W = pc.add_parameters((len(SHAPES), self.features))
        self.b = pc.add_parameters(len(SHAPES), init=dy.ConstInitializer(0.0))

    def scores(self, image: Image) -> dy.Expression:
        x = dy.inputTensor(image)
        h = dy.rectify(dy.conv2d_bias(x, self.f1, self.b1, [1, 1], is_valid=False))
        h = dy.maxpooling2d(h, [2, 2], [2, 2], is_valid=False)
        h = dy.rectify(dy.conv2d_bias(h, self.f2, self.b2, [1, 1], is_valid=False))
        h = dy.maxpooling2d(h, [2, 2], [2, 2], is_valid=False)
        return self.W * dy.reshape(h, (self.features,)) + self.b


def accuracy(model: CNN, data: Sequence[tuple[Image, int]], strategy: str,
             batch_size: int) -> float:
    right = 0
    for at in range(0, len(data), batch_size):
        dy.renew_cg(strategy=strategy)
        batch = data[at:at + batch_size]
        # one column of scores per image: computed in one forward, batched
        scores = dy.concatenate_cols([model.scores(img) for img, _ in batch]).npvalue()
        right += int(np.sum(np.argmax(scores.reshape(len(SHAPES), -1), axis=0) ==
                            [k for _, k in batch]))
    return right / len(data)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description="a small CNN on images of shapes it draws itself")
    ap.add_argument("--strategy", default=dy.default_strategy(),
                    help="a strategy: none, depth, agenda, critical, lookahead (the default), cost, learned")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--n-dev", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--size", type=int, default=12, help="image height and width")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    train = make_data(args.n_train, args.size, args.seed)
    dev = make_data(args.n_dev, args.size, args.seed + 1)
    pc = dy.ParameterCollection(seed=args.seed)
    model = CNN(pc, args.size)
    trainer = dy.AdamTrainer(pc, 0.005)
    rng = np.random.default_rng(args.seed)

    losses: list[float] = []
    stats: dict[str, Any] = {}
    for epoch in range(args.epochs):
        order = rng.permutation(len(train))
        total = 0.0
        starts = range(0, len(order), args.batch_size)
        for at in progress(starts, desc=f"epoch {epoch + 1}", unit="batch"):
            dy.renew_cg(strategy=args.strategy)
            batch = [train[i] for i in order[at:at + args.batch_size]]
            loss = dy.esum([dy.pickneglogsoftmax(model.scores(img), k) for img, k in batch])
            total += loss.value()
            loss.backward()
            trainer.update()
            stats = dy.cg().stats()
        losses.append(total / len(train))
        print(f"epoch {epoch + 1}: loss {losses[-1]:.4f}, dev accuracy "
              f"{accuracy(model, dev, args.strategy, args.batch_size):.3f}")

    acc = accuracy(model, dev, args.strategy, args.batch_size)
    print(f"dev accuracy {acc:.3f} ({len(SHAPES)} shapes; chance {1 / len(SHAPES):.2f})")
    print(f"one training step: {stats['nodes']} nodes, {stats['batches']} batches "
          f"with {args.strategy!r}")
    return {"losses": losses, "accuracy": acc, "stats": stats}


if __name__ == "__main__":
    main(sys.argv[1:])
