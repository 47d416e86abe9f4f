"""A BiLSTM part-of-speech-style tagger, written per sentence, batched automatically.

    python examples/bilstm_tagger.py                      # synthetic data, well under a minute
    python examples/bilstm_tagger.py --strategy none      # the same run, one node at a time
    python examples/bilstm_tagger.py --train train.tsv --dev dev.tsv --epochs 10
    python examples/bilstm_tagger.py --char-model         # rare words spelled out by a character BiLSTM

Files are CoNLL-style: one `word<TAB>tag` per line, a blank line between sentences.

The model code below handles ONE sentence at a time: no padding, no masks, no sorting
by length. Per minibatch we build one loss per sentence, sum them, and let autobatch
group identical operations of all sentences into batched kernels.

With `--char-model`, a word seen fewer than `--rare` times in training (and any
unknown word) is represented not by its embedding but by a character BiLSTM over its
spelling: the final states of a forward and a backward LSTM over character
embeddings, each half the word vector's size, concatenated. The characters of every
rare word of the minibatch are batched like the words. With `--char-model` the
synthetic words are spelled with tag-dependent endings (like English -ly, -ing), so
that the spelling tells something about the tag of a rare or unknown word; compare
with `--char-model --rare 0` (same data, no word spelled out).

"""
import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

import autobatch as dy
from autobatch.progress import progress

# a word: its id, or (a rare word under --char-model) its character ids
Word = int | tuple[int, ...]
Example = tuple[list[Word], list[int]]        # (words, tags) of one sentence


class Tagger:
    """word lookup -> forward and backward LSTM -> tanh(W [f; b] + b) -> softmax.

    A word is a word id, or (with a character model, n_chars > 0) a tuple of
    character ids: a rare word, spelled out."""

    def __init__(self, pc: dy.ParameterCollection, n_words: int, n_tags: int, word_dim: int,
                 hidden_dim: int, n_chars: int = 0, char_dim: int = 32) -> None:
        self.E = pc.add_lookup_parameters((n_words, word_dim))
        self.fwd = dy.LSTMBuilder(1, word_dim, hidden_dim, pc)
        self.bwd = dy.LSTMBuilder(1, word_dim, hidden_dim, pc)
        self.W_mlp = pc.add_parameters((hidden_dim, 2 * hidden_dim))
        self.b_mlp = pc.add_parameters(hidden_dim, init=dy.ConstInitializer(0.0))
        self.W_out = pc.add_parameters((n_tags, hidden_dim))
        self.b_out = pc.add_parameters(n_tags, init=dy.ConstInitializer(0.0))
        if n_chars:
            if word_dim % 2:
                raise ValueError(f"the character model needs an even word dimension, got {word_dim}")
            self.C = pc.add_lookup_parameters((n_chars, char_dim))
            self.char_fwd = dy.LSTMBuilder(1, char_dim, word_dim // 2, pc)
            self.char_bwd = dy.LSTMBuilder(1, char_dim, word_dim // 2, pc)

    def embed(self, word: Word) -> dy.Expression:
        """The word's vector (word_dim): its embedding, or for a spelled-out word the
        final states of the character LSTMs, forward and backward, concatenated."""
        if not isinstance(word, tuple):
            return self.E[word]
        cs = [self.C[c] for c in word]
        f = self.char_fwd.initial_state().transduce(cs)[-1]
        b = self.char_bwd.initial_state().transduce(cs[::-1])[-1]
        return dy.concatenate([f, b])

    def scores(self, word_ids: Sequence[Word]) -> list[dy.Expression]:
        """One score vector (n_tags) per word of one sentence."""
        xs = [self.embed(w) for w in word_ids]
        fs = self.fwd.initial_state().transduce(xs)
        bs = self.bwd.initial_state().transduce(xs[::-1])[::-1]
        out = []
        for f, b in zip(fs, bs):
            hidden = dy.tanh(dy.affine_transform([self.b_mlp, self.W_mlp, dy.concatenate([f, b])]))
            out.append(dy.affine_transform([self.b_out, self.W_out, hidden]))
        return out

    def loss(self, word_ids: Sequence[Word], tag_ids: Sequence[int]) -> dy.Expression:
        return dy.esum([dy.pickneglogsoftmax(s, t) for s, t in zip(self.scores(word_ids), tag_ids)])


# ------------------------------------------------------------------------ data ----

def synthetic_corpus(n_sentences: int, vocab_size: int = 2000, n_tags: int = 8, seed: int = 0,
                     spelled: bool = False) -> list[list[tuple[str, str]]]:
    """Sentences of Zipf-distributed words; lengths ~ gamma(mean 12, sd 6) in 1..40.

    Each word has a fixed tag; 10% of the tokens take the previous word's tag
    instead, so the context matters a little. Words are `w0`, `w1`, ... or, if
    `spelled`, pseudo-words whose endings depend on their tag (see `spellings`).
    Returns [[(word, tag), ...], ...]."""
    rng = np.random.default_rng(seed)
    word_tag = np.random.default_rng(12345).integers(0, n_tags, size=vocab_size)  # same for train/dev
    names = spellings(word_tag, n_tags) if spelled else [f"w{w}" for w in range(vocab_size)]
    p = 1.0 / np.arange(1, vocab_size + 1) ** 1.1
    p /= p.sum()
    lengths = np.clip(np.rint(rng.gamma(4.0, 3.0, size=n_sentences)), 1, 40).astype(int)
    corpus = []
    for n in lengths:
        words = rng.choice(vocab_size, size=n, p=p)
        tags = word_tag[words].copy()
        flip = rng.random(n) < 0.1
        flip[0] = False
        tags[flip] = word_tag[words[np.flatnonzero(flip) - 1]]
        corpus.append([(names[w], f"T{t}") for w, t in zip(words, tags)])
    return corpus


def spellings(word_tag: np.ndarray[Any, Any], n_tags: int) -> list[str]:
    """A distinct pseudo-word per word: a random stem of 2-6 letters and an ending.
    Each tag has two endings of its own; 80% of the words end with one of their tag's
    endings, the others with any ending."""
    rng = np.random.default_rng(54321)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    endings = ["".join(rng.choice(letters, size=rng.integers(1, 4))) for _ in range(2 * n_tags)]
    names: list[str] = []
    seen: set[str] = set()
    for tag in word_tag:
        ending = endings[2 * tag + rng.integers(2)] if rng.random() < 0.8 else endings[rng.integers(2 * n_tags)]
        while True:
            name = "".join(rng.choice(letters, size=rng.integers(2, 7))) + ending
            if name not in seen:
                break
        seen.add(name)
        names.append(name)
    return names


def read_conll(path: str) -> list[list[tuple[str, str]]]:
    """`word<TAB>tag` lines, blank lines between sentences."""
    sentences: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                if current:
                    sentences.append(current)
                current = []
                continue
            parts = line.split("\t")
            if len(parts) < 2:
                raise ValueError(f"{path}:{lineno}: expected 'word<TAB>tag', got {line!r}")
            current.append((parts[0], parts[-1]))
    if current:
        sentences.append(current)
    return sentences


class Vocab:
    def __init__(self, items: Iterable[str], unk: str | None = None) -> None:
        self.items = ([unk] if unk else []) + sorted(set(items) - {unk})
        self.index = {w: i for i, w in enumerate(self.items)}
        self.unk: int | None = 0 if unk else None

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, item: str) -> int:
        i = self.index.get(item, self.unk)
        if i is None:
            raise KeyError(f"{item!r} is not in the vocabulary")
        return i


# -------------------------------------------------------------------- training ----

def batch_loss(tagger: Tagger, batch: Sequence[Example], strategy: str) -> dy.Expression:
    """A fresh graph holding one loss per sentence, summed."""
    dy.renew_cg(strategy=strategy)
    return dy.esum([tagger.loss(words, tags) for words, tags in batch])


def predict(tagger: Tagger, data: Sequence[Example], batch_size: int,
            strategy: str) -> np.ndarray[Any, Any]:
    """The predicted tag of every token of `data`, in order, as one array."""
    predicted = []
    for k in range(0, len(data), batch_size):
        batch = data[k:k + batch_size]
        dy.renew_cg(strategy=strategy)
        exprs = [s for words, _ in batch for s in tagger.scores(words)]
        scores = dy.concatenate_cols(exprs).npvalue()                    # (n_tags, n_tokens)
        predicted.append(np.atleast_1d(scores.argmax(axis=0)))            # (n_tags,) if one token
    return np.concatenate(predicted)


def accuracy(tagger: Tagger, data: Sequence[Example], batch_size: int, strategy: str) -> float:
    gold = np.array([t for _, tags in data for t in tags])
    return float(np.mean(predict(tagger, data, batch_size, strategy) == gold))


TRAINERS: dict[str, tuple[Callable[[dy.ParameterCollection, float], dy.Trainer], float]] = {
    "adam": (dy.AdamTrainer, 0.005), "sgd": (dy.SimpleSGDTrainer, 0.3)}


def make_trainer(name: str, pc: dy.ParameterCollection, lr: float | None = None) -> dy.Trainer:
    cls, default_lr = TRAINERS[name]
    return cls(pc, default_lr if lr is None else lr)


def arg_parser(description: str = __doc__ or "") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description.split("\n\n")[0])
    ap.add_argument("--strategy", default=dy.default_strategy(),
                    help="a strategy: none, depth, agenda, critical, lookahead (the default), cost, learned")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64, help="LSTM and MLP size")
    ap.add_argument("--word-dim", type=int, default=64)
    ap.add_argument("--trainer", choices=TRAINERS, default="adam")
    ap.add_argument("--lr", type=float, help="learning rate (default: adam 0.005, sgd 0.3)")
    ap.add_argument("--train", metavar="FILE", help="word<TAB>tag file (default: synthetic)")
    ap.add_argument("--dev", metavar="FILE", help="held-out word<TAB>tag file")
    ap.add_argument("--char-model", action="store_true",
                    help="spell rare and unknown words out with a character BiLSTM")
    ap.add_argument("--rare", type=int, default=5, metavar="N",
                    help="with --char-model: words seen fewer than N times in training are rare")
    ap.add_argument("--char-dim", type=int, default=32, help="character embedding size")
    ap.add_argument("--n-train", type=int, default=1500, help="synthetic training sentences")
    ap.add_argument("--n-dev", type=int, default=200, help="synthetic held-out sentences")
    ap.add_argument("--seed", type=int, default=1)
    return ap


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    return arg_parser().parse_args(argv)


def load_data(args: argparse.Namespace) -> SimpleNamespace:
    """Training and held-out sentences as (token ids, tag ids), and their vocabularies."""
    if args.train:
        train_raw = read_conll(args.train)
        dev_raw = read_conll(args.dev) if args.dev else train_raw[-len(train_raw) // 10:]
    else:
        train_raw = synthetic_corpus(args.n_train, seed=args.seed, spelled=args.char_model)
        dev_raw = synthetic_corpus(args.n_dev, seed=args.seed + 1000, spelled=args.char_model)
    words = Vocab((w for s in train_raw for w, _ in s), unk="<unk>")
    tags = Vocab(t for s in train_raw for _, t in s)
    counts = Counter(w for s in train_raw for w, _ in s)
    chars = Vocab((c for w in counts for c in w), unk="<unk>") if args.char_model else None

    def token(w: str) -> Word:
        """A word id, or for a rare word under --char-model its character ids."""
        if chars is not None and counts[w] < args.rare and w:
            return tuple(chars[c] for c in w)
        return words[w]

    def encode(sent: list[tuple[str, str]]) -> Example:
        return [token(w) for w, _ in sent], [tags[t] for _, t in sent]

    return SimpleNamespace(train=[encode(s) for s in train_raw], dev=[encode(s) for s in dev_raw],
                           dev_raw=dev_raw, words=words, tags=tags, chars=chars, counts=counts)


def build_model(args: argparse.Namespace,
                d: SimpleNamespace) -> tuple[dy.ParameterCollection, Tagger, dy.Trainer]:
    """The collection, the tagger and its trainer (seeded by --seed)."""
    pc = dy.ParameterCollection(seed=args.seed)
    tagger = Tagger(pc, len(d.words), len(d.tags), args.word_dim, args.hidden,
                    n_chars=len(d.chars) if d.chars is not None else 0, char_dim=args.char_dim)
    return pc, tagger, make_trainer(args.trainer, pc, args.lr)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    d = load_data(args)
    train, dev, dev_raw, words, tags, chars, counts = (
        d.train, d.dev, d.dev_raw, d.words, d.tags, d.chars, d.counts)
    n_tokens = sum(len(w) for w, _ in train)
    print(f"train: {len(train)} sentences, {n_tokens} tokens; dev: {len(dev)} sentences; "
          f"{len(words)} words, {len(tags)} tags; strategy {args.strategy!r}")
    if chars is not None:
        spelled = sum(isinstance(w, tuple) for ws, _ in train for w in ws)
        print(f"character model: {len(chars)} characters; words seen fewer than {args.rare} times "
              f"({sum(c < args.rare for c in counts.values())} of {len(counts)} word types, "
              f"{spelled} of {n_tokens} training tokens) are spelled out")

    pc, tagger, trainer = build_model(args, d)
    order = random.Random(args.seed)

    losses: list[float] = []
    step_times: list[float] = []
    for epoch in range(1, args.epochs + 1):
        order.shuffle(train)
        total, t_epoch = 0.0, time.perf_counter()
        starts = range(0, len(train), args.batch_size)
        for k in progress(starts, desc=f"epoch {epoch}", unit="batch"):
            t0 = time.perf_counter()
            loss = batch_loss(tagger, train[k:k + args.batch_size], args.strategy)
            total += loss.value()
            loss.backward()
            trainer.update()
            step_times.append(time.perf_counter() - t0)
        losses.append(total / n_tokens)
        print(f"epoch {epoch}: loss per token {losses[-1]:.4f}  ({time.perf_counter() - t_epoch:.1f}s)")

    predicted = predict(tagger, dev, args.batch_size, args.strategy)
    gold = np.array([t for _, ts in dev for t in ts])
    acc = float(np.mean(predicted == gold))
    print(f"held-out tag accuracy: {acc:.3f}")
    unknown = np.array([w not in counts for s in dev_raw for w, _ in s], dtype=bool)
    unknown_acc = float(np.mean(predicted[unknown] == gold[unknown])) if unknown.any() else None
    if chars is not None and unknown_acc is not None:
        print(f"held-out tag accuracy on the {int(unknown.sum())} tokens of words unseen in training: "
              f"{unknown_acc:.3f}")

    # What the scheduler did for one minibatch (forward pass), and what it does without batching.
    batch = train[:args.batch_size]
    stats: dict[str, dict[str, Any]] = {}
    for strategy in dict.fromkeys([args.strategy, "none"]):
        batch_loss(tagger, batch, strategy).value()
        stats[strategy] = dy.cg().stats()
    s = stats[args.strategy]
    print(f"one step ({len(batch)} sentences, {sum(len(w) for w, _ in batch)} tokens): "
          f"{s['nodes']} nodes in {s['batches']} batches with {args.strategy!r} "
          f"({stats['none']['batches']} with 'none'); median step time {1000 * float(np.median(step_times)):.1f} ms")
    return {"losses": losses, "accuracy": acc, "unknown_accuracy": unknown_acc, "stats": stats,
            "step_seconds": float(np.median(step_times))}


if __name__ == "__main__":
    main(sys.argv[1:])
