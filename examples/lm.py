"""An LSTM language model, written one sentence at a time, batched automatically.

    python examples/lm.py                                 # synthetic text, well under a minute
    python examples/lm.py --strategy none                 # the same run, one node at a time
    python examples/lm.py --train train.txt --dev dev.txt --epochs 10 --hidden 256

Files hold plain text, one sentence per line, tokens separated by whitespace. Words
seen fewer than `--min-count` times in training become `<unk>` (in both files).

The model reads `<s> w1 .. wn` and predicts `w1 .. wn </s>`: word lookup -> LSTM ->
softmax over the vocabulary at every position. The code handles ONE sentence; a
minibatch of sentences of different lengths goes into one graph, and autobatch runs
the t-th LSTM step of all the sentences that are that long as one batch, and the
output layer of many positions as one large gemm.

Held-out perplexity is exp(mean loss per predicted token), printed next to the
perplexity of a uniform guess (the vocabulary size) and, for synthetic text, of the
model that generated the text (the best any model can do on average).

"""
import argparse
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

import autobatch as dy
from autobatch.progress import progress

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


class LanguageModel:
    """word lookup -> LSTM -> W h + b -> softmax over the vocabulary."""

    def __init__(self, pc: dy.ParameterCollection, n_words: int, word_dim: int,
                 hidden_dim: int) -> None:
        self.E = pc.add_lookup_parameters((n_words, word_dim))
        self.rnn = dy.LSTMBuilder(1, word_dim, hidden_dim, pc)
        self.W_out = pc.add_parameters((n_words, hidden_dim))
        self.b_out = pc.add_parameters(n_words, init=dy.ConstInitializer(0.0))

    def loss(self, word_ids: list[int], bos: int, eos: int) -> dy.Expression:
        """Summed negative log-likelihood of `word_ids` followed by </s>, given <s>."""
        inputs = [bos] + word_ids
        targets = word_ids + [eos]
        hs = self.rnn.initial_state().transduce([self.E[w] for w in inputs])
        return dy.esum([dy.pickneglogsoftmax(dy.affine_transform([self.b_out, self.W_out, h]), t)
                        for h, t in zip(hs, targets)])


# ------------------------------------------------------------------------ data ----

class BigramSource:
    """A random bigram model over `n_words` words: after each word (and after <s>)
    only a few words are likely (Dirichlet weights over 10 random successors, plus
    a small chance of any other word), and the sentence ends after each word with
    probability 1/12. Its perplexity is far below the vocabulary size, so an LSTM
    that learns the bigrams beats the uniform model by a wide margin."""

    def __init__(self, n_words: int = 300, successors: int = 10, p_end: float = 1 / 12,
                 seed: int = 12345) -> None:
        rng = np.random.default_rng(seed)                     # the same language for train and dev
        self.words = [f"w{i}" for i in range(n_words)]
        # row i: next-word distribution after word i; the last row is after <s>;
        # column n_words is </s>
        self.P = np.full((n_words + 1, n_words + 1), 0.02 / n_words)
        for row in self.P:
            likely = rng.choice(n_words, size=successors, replace=False)
            row[likely] += 0.98 * rng.dirichlet(np.full(successors, 0.5))
            row[:n_words] *= 1 - p_end
            row[n_words] = p_end
        self.P[n_words, n_words] = 0.0                        # no empty sentences
        self.P /= self.P.sum(axis=1, keepdims=True)

    def sample(self, n_sentences: int, seed: int = 0, max_len: int = 40) -> list[list[str]]:
        rng = np.random.default_rng(seed)
        n = len(self.words)
        out: list[list[str]] = []
        for _ in range(n_sentences):
            sentence: list[str] = []
            prev = n
            while len(sentence) < max_len:
                prev = int(rng.choice(n + 1, p=self.P[prev]))
                if prev == n:
                    break
                sentence.append(self.words[prev])
            out.append(sentence)
        return out

    def perplexity(self, sentences: Iterable[list[str]]) -> float:
        """The perplexity of the generating model itself (ignoring the length cap)."""
        index = {w: i for i, w in enumerate(self.words)}
        n, total, count = len(self.words), 0.0, 0
        for sentence in sentences:
            ids = [index[w] for w in sentence] + [n]
            prev = n
            for w in ids:
                total -= math.log(self.P[prev, w])
                prev = w
            count += len(ids)
        return math.exp(total / count)


def read_text(path: str) -> list[list[str]]:
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f if line.strip()]


class Vocab:
    def __init__(self, items: Iterable[str]) -> None:
        self.items = [BOS, EOS, UNK] + sorted(set(items) - {BOS, EOS, UNK})
        self.index = {w: i for i, w in enumerate(self.items)}

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, item: str) -> int:
        return self.index.get(item, self.index[UNK])


# -------------------------------------------------------------------- training ----

def batch_loss(model: LanguageModel, batch: Sequence[list[int]], vocab: Vocab,
               strategy: str) -> dy.Expression:
    """A fresh graph holding one loss per sentence, summed."""
    dy.renew_cg(strategy=strategy)
    return dy.esum([model.loss(words, vocab[BOS], vocab[EOS]) for words in batch])


def perplexity(model: LanguageModel, data: Sequence[list[int]], vocab: Vocab, batch_size: int,
               strategy: str) -> float:
    total = 0.0
    for k in range(0, len(data), batch_size):
        total += batch_loss(model, data[k:k + batch_size], vocab, strategy).value()
    return math.exp(total / sum(len(words) + 1 for words in data))


TRAINERS: dict[str, tuple[Callable[[dy.ParameterCollection, float], dy.Trainer], float]] = {
    "adam": (dy.AdamTrainer, 0.005), "sgd": (dy.SimpleSGDTrainer, 0.2)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--strategy", default=dy.default_strategy(),
                    help="a strategy: none, depth, agenda, critical, lookahead (the default), cost, learned")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64, help="LSTM size")
    ap.add_argument("--word-dim", type=int, default=64)
    ap.add_argument("--trainer", choices=TRAINERS, default="adam")
    ap.add_argument("--lr", type=float, help="learning rate (default: adam 0.005, sgd 0.2)")
    ap.add_argument("--train", metavar="FILE", help="text, one sentence per line (default: synthetic)")
    ap.add_argument("--dev", metavar="FILE", help="held-out text, one sentence per line")
    ap.add_argument("--min-count", type=int, default=2, help="rarer training words become <unk>")
    ap.add_argument("--n-train", type=int, default=5000, help="synthetic training sentences")
    ap.add_argument("--n-dev", type=int, default=500, help="synthetic held-out sentences")
    ap.add_argument("--vocab-size", type=int, default=300, help="words of the synthetic language")
    ap.add_argument("--seed", type=int, default=1)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    source = None
    if args.train:
        train_raw = read_text(args.train)
        dev_raw = read_text(args.dev) if args.dev else train_raw[-len(train_raw) // 10:]
    else:
        source = BigramSource(args.vocab_size)
        train_raw = source.sample(args.n_train, seed=args.seed)
        dev_raw = source.sample(args.n_dev, seed=args.seed + 1000)
    if not train_raw or not dev_raw:
        raise SystemExit("no sentences to train or evaluate on")
    counts = Counter(w for s in train_raw for w in s)
    vocab = Vocab(w for w, c in counts.items() if c >= args.min_count)
    train = [[vocab[w] for w in s] for s in train_raw]
    dev = [[vocab[w] for w in s] for s in dev_raw]
    n_tokens = sum(len(s) + 1 for s in train)                 # + 1: </s> is predicted too
    uniform = len(vocab) - 1                                   # every word but <s> can come next
    print(f"train: {len(train)} sentences, {n_tokens} predicted tokens; dev: {len(dev)} sentences; "
          f"{len(vocab)} words (with <s>, </s>, <unk>); strategy {args.strategy!r}")

    pc = dy.ParameterCollection(seed=args.seed)
    model = LanguageModel(pc, len(vocab), args.word_dim, args.hidden)
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
            loss = batch_loss(model, train[k:k + args.batch_size], vocab, args.strategy)
            total += loss.value()
            loss.backward()
            trainer.update()
            step_times.append(time.perf_counter() - t0)
        losses.append(total / n_tokens)
        print(f"epoch {epoch}: loss per token {losses[-1]:.4f} (training perplexity "
              f"{math.exp(losses[-1]):.1f})  ({time.perf_counter() - t_epoch:.1f}s)")

    ppl = perplexity(model, dev, vocab, args.batch_size, args.strategy)
    line = f"held-out perplexity: {ppl:.2f}  (uniform over the vocabulary: {uniform}"
    best = source.perplexity(dev_raw) if source is not None else None
    if best is not None:
        line += f"; the generating bigram model: {best:.2f}"
    print(line + ")")

    # What the scheduler did for one minibatch (forward pass), and what it does without batching.
    batch = train[:args.batch_size]
    stats: dict[str, dict[str, Any]] = {}
    for strategy in dict.fromkeys([args.strategy, "none"]):
        batch_loss(model, batch, vocab, strategy).value()
        stats[strategy] = dy.cg().stats()
    s = stats[args.strategy]
    print(f"one step ({len(batch)} sentences, {sum(len(w) + 1 for w in batch)} predicted tokens): "
          f"{s['nodes']} nodes in {s['batches']} batches with {args.strategy!r} "
          f"({stats['none']['batches']} with 'none'); median step time {1000 * float(np.median(step_times)):.1f} ms")
    return {"losses": losses, "perplexity": ppl, "uniform_perplexity": uniform,
            "source_perplexity": best, "stats": stats, "step_seconds": float(np.median(step_times))}


if __name__ == "__main__":
    main(sys.argv[1:])
