"""A binary Tree-LSTM sentiment classifier (Tai et al., 2015), one tree at a time.

    python examples/treelstm.py                           # synthetic trees, well under a minute
    python examples/treelstm.py --strategy none           # the same run, one node at a time
    python examples/treelstm.py --train train.txt --dev dev.txt --epochs 10

Files hold one tree per line in PTB bracketed format, e.g. `(3 (2 good) (1 movie))`:
labels 0..4 (the root's label is the one predicted), words at the leaves, every
internal node with two children (Stanford Sentiment Treebank style).

The recursion below handles ONE tree at a time. Trees of a minibatch have different
shapes, yet autobatch runs all leaves of all trees as one batch, then all nodes whose
children are ready, and so on, without any level-by-level bookkeeping in user code.

"""
import argparse
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

import autobatch as dy
from autobatch.progress import progress


class Tree:
    """A leaf (word set, no children) or an internal node with two children."""

    # word: a string as read, an id once map_words has run
    def __init__(self, label: int, word: Any = None, children: Iterable["Tree"] = ()) -> None:
        self.label, self.word, self.children = label, word, list(children)

    def is_leaf(self) -> bool:
        return not self.children

    def leaves(self) -> list[Any]:
        return [self.word] if self.is_leaf() else [w for c in self.children for w in c.leaves()]

    def __str__(self) -> str:
        inside = self.word if self.is_leaf() else " ".join(str(c) for c in self.children)
        return f"({self.label} {inside})"


class TreeLSTM:
    """Word vectors at the leaves, dy.TreeLSTMBuilder (Tai et al.) up the tree, a
    softmax classifier at the root.
       Leaf:     i, o, u from the word vector;             c = i*u
       Internal: i, f_left, f_right, o, u from [h_l; h_r];  c = i*u + f_l*c_l + f_r*c_r
       Both:     h = o * tanh(c)"""

    def __init__(self, pc: dy.ParameterCollection, n_words: int, word_dim: int, hidden_dim: int,
                 n_labels: int) -> None:
        self.E = pc.add_lookup_parameters((n_words, word_dim))
        self.cell = dy.TreeLSTMBuilder(word_dim, hidden_dim, pc)
        self.W_out = pc.add_parameters((n_labels, hidden_dim))
        self.b_out = pc.add_parameters(n_labels, init=dy.ConstInitializer(0.0))

    def encode(self, tree: Tree) -> dy.TreeState:
        """State (h, c) of the root of `tree`, built recursively."""
        if tree.is_leaf():
            return self.cell.leaf(self.E[tree.word])
        left, right = [self.encode(child) for child in tree.children]
        return self.cell.compose(left, right)

    def scores(self, tree: Tree) -> dy.Expression:
        return dy.affine_transform([self.b_out, self.W_out, self.encode(tree).h])

    def loss(self, tree: Tree) -> dy.Expression:
        return dy.pickneglogsoftmax(self.scores(tree), tree.label)


# ------------------------------------------------------------------------ data ----

def synthetic_trees(n_trees: int, vocab_size: int = 300, seed: int = 0) -> list[Tree]:
    """Random sentences under a random binary bracketing; lengths ~ gamma(mean 10,
    sd 5) in 1..30. Each word has a sentiment in -2..2 (most are 0); the label is the
    sentence's total sentiment clipped to -2..2, shifted to 0..4."""
    rng = np.random.default_rng(seed)
    sentiment = np.random.default_rng(12345).choice(
        [-2, -1, 0, 1, 2], size=vocab_size, p=[0.05, 0.15, 0.6, 0.15, 0.05])  # same for train/dev
    lengths = np.clip(np.rint(rng.gamma(4.0, 2.5, size=n_trees)), 1, 30).astype(int)

    def bracket(words: np.ndarray[Any, Any]) -> Tree:
        if len(words) == 1:
            return Tree(2 + int(sentiment[words[0]]), word=f"w{words[0]}")
        split = int(rng.integers(1, len(words)))
        left, right = bracket(words[:split]), bracket(words[split:])
        return Tree(int(np.clip(sum(sentiment[words]), -2, 2)) + 2, children=[left, right])

    return [bracket(rng.integers(0, vocab_size, size=n)) for n in lengths]


def parse_ptb(line: str) -> Tree:
    """`(3 (2 good) (1 movie))` -> Tree. Unary chains `(4 (3 x))` keep the outer label."""
    tokens = line.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def node() -> Tree:
        nonlocal pos
        if tokens[pos] != "(":
            raise ValueError(f"expected '(' at token {pos} of {line!r}")
        label = int(tokens[pos + 1])
        pos += 2
        children: list[Tree | str] = []
        while tokens[pos] != ")":
            if tokens[pos] == "(":
                children.append(node())
            else:
                children.append(tokens[pos])
                pos += 1
        pos += 1
        if len(children) == 1:
            only = children[0]
            return Tree(label, word=only) if isinstance(only, str) else Tree(label, only.word, only.children)
        if len(children) != 2 or any(isinstance(c, str) for c in children):
            raise ValueError(f"not a binary tree: a node with children {children} in {line!r}")
        return Tree(label, children=[c for c in children if isinstance(c, Tree)])

    tree = node()
    if pos != len(tokens):
        raise ValueError(f"trailing tokens after the tree in {line!r}")
    return tree


def read_trees(path: str) -> list[Tree]:
    with open(path, encoding="utf-8") as f:
        return [parse_ptb(line) for line in f if line.strip()]


def map_words(tree: Tree, index: dict[str, int]) -> Tree:
    """The same tree with word ids (unknown words -> 0) instead of strings."""
    if tree.is_leaf():
        return Tree(tree.label, word=index.get(tree.word, 0))
    return Tree(tree.label, children=[map_words(c, index) for c in tree.children])


# -------------------------------------------------------------------- training ----

def batch_loss(model: TreeLSTM, batch: Sequence[Tree], strategy: str) -> dy.Expression:
    """A fresh graph holding one loss per tree, summed."""
    dy.renew_cg(strategy=strategy)
    return dy.esum([model.loss(tree) for tree in batch])


def accuracy(model: TreeLSTM, data: Sequence[Tree], batch_size: int, strategy: str) -> float:
    correct = 0
    for k in range(0, len(data), batch_size):
        batch = data[k:k + batch_size]
        dy.renew_cg(strategy=strategy)
        scores = dy.concatenate_cols([model.scores(tree) for tree in batch]).npvalue()
        predicted = scores.reshape(scores.shape[0], -1).argmax(axis=0)    # (labels, trees)
        correct += int(np.sum(predicted == np.array([tree.label for tree in batch])))
    return correct / len(data)


TRAINERS: dict[str, tuple[Callable[[dy.ParameterCollection, float], dy.Trainer], float]] = {
    "adam": (dy.AdamTrainer, 0.005), "sgd": (dy.SimpleSGDTrainer, 0.2)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--strategy", default=dy.default_strategy(),
                    help="a strategy: none, depth, agenda, critical, lookahead (the default), cost, learned")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64, help="Tree-LSTM size")
    ap.add_argument("--word-dim", type=int, default=64)
    ap.add_argument("--trainer", choices=TRAINERS, default="adam")
    ap.add_argument("--lr", type=float, help="learning rate (default: adam 0.005, sgd 0.2)")
    ap.add_argument("--train", metavar="FILE", help="PTB-bracketed trees, one per line (default: synthetic)")
    ap.add_argument("--dev", metavar="FILE", help="held-out trees")
    ap.add_argument("--n-train", type=int, default=1500, help="synthetic training trees")
    ap.add_argument("--n-dev", type=int, default=300, help="synthetic held-out trees")
    ap.add_argument("--seed", type=int, default=1)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.train:
        train_raw = read_trees(args.train)
        dev_raw = read_trees(args.dev) if args.dev else train_raw[-len(train_raw) // 10:]
    else:
        train_raw = synthetic_trees(args.n_train, seed=args.seed)
        dev_raw = synthetic_trees(args.n_dev, seed=args.seed + 1000)
    if not train_raw or not dev_raw:
        raise SystemExit("no trees to train or evaluate on")
    vocab = ["<unk>"] + sorted({w for t in train_raw for w in t.leaves()})
    index = {w: i for i, w in enumerate(vocab)}
    train = [map_words(t, index) for t in train_raw]
    dev = [map_words(t, index) for t in dev_raw]
    n_labels = 5
    if any(not 0 <= t.label < n_labels for t in train + dev):
        raise SystemExit(f"root labels must be in 0..{n_labels - 1}")
    print(f"train: {len(train)} trees, dev: {len(dev)} trees; {len(vocab)} words; "
          f"root labels {np.bincount([t.label for t in train], minlength=n_labels).tolist()}; "
          f"strategy {args.strategy!r}")

    pc = dy.ParameterCollection(seed=args.seed)
    model = TreeLSTM(pc, len(vocab), args.word_dim, args.hidden, n_labels)
    cls, default_lr = TRAINERS[args.trainer]
    trainer = cls(pc, default_lr if args.lr is None else args.lr)
    order = random.Random(args.seed)

    losses: list[float] = []
    step_times: list[float] = []
    for epoch in range(1, args.epochs + 1):
        order.shuffle(train)
        total, t_epoch = 0.0, time.perf_counter()
        starts = range(0, len(train), args.batch_size)
        for k in progress(starts, desc=f"epoch {epoch}", unit="batch"):
            t0 = time.perf_counter()
            loss = batch_loss(model, train[k:k + args.batch_size], args.strategy)
            total += loss.value()
            loss.backward()
            trainer.update()
            step_times.append(time.perf_counter() - t0)
        losses.append(total / len(train))
        print(f"epoch {epoch}: loss per tree {losses[-1]:.4f}  ({time.perf_counter() - t_epoch:.1f}s)")

    acc = accuracy(model, dev, args.batch_size, args.strategy)
    print(f"held-out root accuracy: {acc:.3f}")

    # What the scheduler did for one minibatch (forward pass), and what it does without batching.
    batch = train[:args.batch_size]
    stats: dict[str, dict[str, Any]] = {}
    for strategy in dict.fromkeys([args.strategy, "none"]):
        batch_loss(model, batch, strategy).value()
        stats[strategy] = dy.cg().stats()
    s = stats[args.strategy]
    print(f"one step ({len(batch)} trees, {sum(len(t.leaves()) for t in batch)} words): "
          f"{s['nodes']} nodes in {s['batches']} batches with {args.strategy!r} "
          f"({stats['none']['batches']} with 'none'); median step time {1000 * float(np.median(step_times)):.1f} ms")
    return {"losses": losses, "accuracy": acc, "stats": stats,
            "step_seconds": float(np.median(step_times))}


if __name__ == "__main__":
    main(sys.argv[1:])
