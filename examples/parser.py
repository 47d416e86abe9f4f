"""An arc-standard transition parser (BiLSTM features + MLP), one sentence at a time.

    python examples/parser.py                             # synthetic treebank, well under a minute
    python examples/parser.py --strategy none             # the same run, one node at a time
    python examples/parser.py --train train.conllu --dev dev.conllu --pos-dim 32 --epochs 10

Files are CoNLL-U: 10 tab-separated columns per token (ID FORM LEMMA UPOS XPOS FEATS
HEAD DEPREL DEPS MISC), a blank line between sentences; comment lines (`#`),
multiword tokens (`3-4`) and empty nodes (`5.1`) are skipped. Only FORM, UPOS and
HEAD are used. Non-projective training sentences have no arc-standard oracle and are
left out of training (they are still parsed and scored on the held-out side).

The model (Kiperwasser & Goldberg style, trained with the static oracle):
a BiLSTM reads the sentence; for every transition, the BiLSTM vectors of the top two
stack items and the first buffer item, `[h(s1); h(s0); h(b0)]` (a learned pad vector
where a position is missing, a learned ROOT vector for the root), go through a relu
MLP to three scores: SHIFT, LEFT-ARC (s1 <- s0), RIGHT-ARC (s1 -> s0).

Training builds, per sentence, one loss per oracle transition; all the sentences of a
minibatch go into one graph and autobatch batches the LSTM steps and MLPs across them.
Decoding is greedy and must read the scores before it can choose the next transition:
each step calls `.npvalue()` in the middle of the graph, for the next transition of
every sentence of the minibatch at once. The first call computes all the BiLSTMs
(batched); every later call computes only that step's new MLP nodes (again batched).

"""
import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

import autobatch as dy
from autobatch.progress import progress

SHIFT, LEFT, RIGHT = 0, 1, 2
ACTIONS = ("shift", "left-arc", "right-arc")

Transition = tuple[int, int, int, int]          # (action, s1, s0, b0)
Token = tuple[str, str, int]                     # (form, upos, head)
# (word ids, tag ids, gold heads with [0] unused, oracle transitions or [] when not needed)
Item = tuple[list[int], list[int], list[int], list[Transition]]


class Parser:
    """word (+ POS) lookup -> BiLSTM -> relu(W [h(s1); h(s0); h(b0)] + b) -> 3 scores."""

    def __init__(self, pc: dy.ParameterCollection, n_words: int, n_tags: int, word_dim: int,
                 pos_dim: int, hidden_dim: int, mlp_dim: int) -> None:
        self.E = pc.add_lookup_parameters((n_words, word_dim))
        self.P = pc.add_lookup_parameters((n_tags, pos_dim)) if pos_dim else None
        self.bilstm = dy.BiRNNBuilder(1, word_dim + pos_dim, 2 * hidden_dim, pc, dy.LSTMBuilder)
        self.pad = pc.add_parameters(2 * hidden_dim)          # stands for a missing s1/s0/b0
        self.root = pc.add_parameters(2 * hidden_dim)         # the vector of ROOT (position 0)
        self.W_mlp = pc.add_parameters((mlp_dim, 6 * hidden_dim))
        self.b_mlp = pc.add_parameters(mlp_dim, init=dy.ConstInitializer(0.0))
        self.W_out = pc.add_parameters((len(ACTIONS), mlp_dim))
        self.b_out = pc.add_parameters(len(ACTIONS), init=dy.ConstInitializer(0.0))

    def encode(self, word_ids: Sequence[int], tag_ids: Sequence[int]) -> list[dy.Expression]:
        """Vectors for positions 0 (ROOT), 1..n (the words) and -1 (missing)."""
        if self.P is None:
            xs = [self.E[w] for w in word_ids]
        else:
            xs = [dy.concatenate([self.E[w], self.P[t]]) for w, t in zip(word_ids, tag_ids)]
        hs = [dy.parameter(self.root)] + self.bilstm.transduce(xs)
        return hs + [dy.parameter(self.pad)]                  # hs[-1] is the pad vector

    def scores(self, hs: Sequence[dy.Expression], s1: int, s0: int, b0: int) -> dy.Expression:
        """Scores of (SHIFT, LEFT, RIGHT) in the configuration with s1, s0, b0 (-1: missing)."""
        features = dy.concatenate([hs[s1], hs[s0], hs[b0]])
        hidden = dy.rectify(dy.affine_transform([self.b_mlp, self.W_mlp, features]))
        return dy.affine_transform([self.b_out, self.W_out, hidden])

    def loss(self, word_ids: Sequence[int], tag_ids: Sequence[int],
             oracle: Iterable[Transition]) -> dy.Expression:
        hs = self.encode(word_ids, tag_ids)
        return dy.esum([dy.pickneglogsoftmax(self.scores(hs, s1, s0, b0), action)
                        for action, s1, s0, b0 in oracle])


# ---------------------------------------------------------------- transitions ----

class Configuration:
    """Stack (ROOT = 0 at the bottom), buffer (next word), and the heads found so far."""

    def __init__(self, n: int) -> None:
        self.n, self.stack, self.next = n, [0], 1
        self.heads: list[int | None] = [None] * (n + 1)

    def features(self) -> tuple[int, int, int]:
        """Positions (s1, s0, b0), -1 where missing."""
        s0 = self.stack[-1]
        s1 = self.stack[-2] if len(self.stack) > 1 else -1
        return s1, s0, (self.next if self.next <= self.n else -1)

    def legal(self, action: int) -> bool:
        if action == SHIFT:
            return self.next <= self.n
        if action == LEFT:                    # ROOT never gets a head
            return len(self.stack) > 2
        # RIGHT: ROOT takes its (single) dependent only when all words have been read
        return len(self.stack) > 2 or (len(self.stack) == 2 and self.next > self.n)

    def apply(self, action: int) -> None:
        if action == SHIFT:
            self.stack.append(self.next)
            self.next += 1
        elif action == LEFT:
            self.heads[self.stack[-2]] = self.stack[-1]
            del self.stack[-2]
        else:
            self.heads[self.stack[-1]] = self.stack[-2]
            self.stack.pop()

    def done(self) -> bool:
        return self.next > self.n and len(self.stack) == 1


def oracle(heads: Sequence[int]) -> list[Transition]:
    """The static arc-standard oracle: [(action, s1, s0, b0)], 2n transitions that
    build the tree `heads` (heads[i] for words i = 1..n, heads[0] unused). Raises
    ValueError if the tree is not projective."""
    n = len(heads) - 1
    missing = Counter(heads[1:])              # dependents each position still has to collect
    config = Configuration(n)
    out: list[Transition] = []
    while not config.done():
        s1, s0, b0 = config.features()
        if s1 > 0 and heads[s1] == s0:
            action = LEFT
        elif s1 >= 0 and heads[s0] == s1 and missing[s0] == 0:
            action = RIGHT
        elif b0 > 0:
            action = SHIFT
        else:
            raise ValueError("the tree is not projective")
        out.append((action, s1, s0, b0))
        if action != SHIFT:
            dependent = s1 if action == LEFT else s0
            missing[heads[dependent]] -= 1
        config.apply(action)
    return out


# ------------------------------------------------------------------------ data ----

LEXICON = {"DET": 8, "ADJ": 40, "NOUN": 100, "VERB": 60, "ADV": 20, "PREP": 16, "PUNCT": 1}


def synthetic_treebank(n_sentences: int, seed: int = 0) -> list[list[Token]]:
    """Sentences from a small dependency grammar, so that heads follow from the words:

        sentence -> NP [ADV] VERB [NP] PP* [ADV] .    (the verb hangs from ROOT, the
                                                       subject, object, adverbs and "." from it)
        NP       -> DET ADJ* NOUN [PP]               (DET and ADJ hang from the NOUN)
        PP       -> PREP NP                          (the NP's noun hangs from PREP)

    Each class has its own words (`noun17`, `prep3`, ...). A PP inside an NP hangs from
    its noun; a PP after the object hangs from the object or from the verb, with a
    probability that is a property of the preposition (some mostly modify nouns, some
    verbs): the classic attachment ambiguity, so held-out UAS stays below 100%. Once
    a PP hangs from the verb, later ones do too (the trees are projective). Returns [[(form, upos, head), ...], ...]."""
    rng = np.random.default_rng(seed)
    noun_attachment = np.random.default_rng(12345).beta(0.5, 0.5, size=LEXICON["PREP"])  # same for train/dev

    def sentence() -> list[Token]:
        tokens: list[list[Any]] = []                                        # [form, upos, head index]

        def add(cls: str, i: int | None = None) -> int:
            i = int(rng.integers(LEXICON[cls])) if i is None else i
            tokens.append([f"{cls.lower()}{i}" if cls != "PUNCT" else ".", cls, None])
            return len(tokens) - 1

        def attach(dependent: int, head: int) -> None:
            tokens[dependent][2] = head

        def noun_phrase(depth: int) -> int:
            det = add("DET")
            adjectives = [add("ADJ") for _ in range(rng.choice([0, 0, 1, 2]))]
            noun = add("NOUN")
            for d in [det] + adjectives:
                attach(d, noun)
            if depth < 2 and rng.random() < 0.25:
                attach(prep_phrase(depth + 1)[0], noun)
            return noun

        def prep_phrase(depth: int) -> tuple[int, int]:
            i = int(rng.integers(LEXICON["PREP"]))
            prep = add("PREP", i)
            attach(noun_phrase(depth), prep)
            return prep, i

        subject = noun_phrase(0)
        adverbs = [add("ADV")] if rng.random() < 0.2 else []
        verb = add("VERB")
        attach(subject, verb)
        obj: int | None = noun_phrase(1) if rng.random() < 0.7 else None
        if obj is not None:
            attach(obj, verb)
        while rng.random() < 0.5:
            prep, i = prep_phrase(1)
            if obj is not None and rng.random() >= noun_attachment[i]:
                obj = None                      # after a PP on the verb, the object is closed
            attach(prep, obj if obj is not None else verb)
        if rng.random() < 0.2:
            adverbs.append(add("ADV"))
        for d in adverbs + [add("PUNCT")]:
            attach(d, verb)
        # positions 1..n; the verb hangs from ROOT (0)
        return [(form, upos, 0 if i == verb else head + 1) for i, (form, upos, head) in enumerate(tokens)]

    return [sentence() for _ in range(n_sentences)]


def read_conllu(path: str) -> list[list[Token]]:
    """[[(form, upos, head), ...], ...] from a CoNLL-U file."""
    sentences: list[list[Token]] = []
    current: list[Token] = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                if current:
                    sentences.append(current)
                current = []
                continue
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) != 10:
                raise ValueError(f"{path}:{lineno}: expected 10 tab-separated columns, got {len(cols)}")
            if "-" in cols[0] or "." in cols[0]:               # multiword token or empty node
                continue
            if int(cols[0]) != len(current) + 1:
                raise ValueError(f"{path}:{lineno}: token id {cols[0]}, expected {len(current) + 1}")
            current.append((cols[1], cols[3], int(cols[6])))
    if current:
        sentences.append(current)
    return sentences


class Vocab:
    def __init__(self, items: Iterable[str], unk: str = "<unk>") -> None:
        self.items = [unk] + sorted(set(items) - {unk})
        self.index = {w: i for i, w in enumerate(self.items)}

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, item: str) -> int:
        return self.index.get(item, 0)


# ----------------------------------------------------------- training, decoding ----

def batch_loss(parser: Parser, batch: Sequence[Item], strategy: str) -> dy.Expression:
    """A fresh graph holding one loss per sentence (summed over its transitions), summed."""
    dy.renew_cg(strategy=strategy)
    return dy.esum([parser.loss(words, tags, transitions) for words, tags, _, transitions in batch])


def parse(parser: Parser, batch: Sequence[Item], strategy: str) -> list[list[int | None]]:
    """Greedy decoding of a minibatch: predicted heads per sentence (index 0 unused).

    Every sentence keeps its own configuration; each round adds the scores of the next
    transition of every unfinished sentence to the graph and reads them with one
    `npvalue()`. Only legal transitions are considered."""
    dy.renew_cg(strategy=strategy)
    encoded = [parser.encode(words, tags) for words, tags, _, _ in batch]
    configs = [Configuration(len(words)) for words, _, _, _ in batch]
    while True:
        active = [k for k, c in enumerate(configs) if not c.done()]
        if not active:
            break
        exprs = [parser.scores(encoded[k], *configs[k].features()) for k in active]
        scores = dy.concatenate_cols(exprs).npvalue().reshape(len(ACTIONS), len(active))
        for k, column in zip(active, scores.T):
            config = configs[k]
            action = max((a for a in range(len(ACTIONS)) if config.legal(a)), key=lambda a: column[a])
            config.apply(action)
    return [c.heads for c in configs]


def attachment_score(parser: Parser, data: Sequence[Item], batch_size: int, strategy: str) -> float:
    """Unlabeled attachment score: the fraction of words given their gold head."""
    correct = total = 0
    for k in range(0, len(data), batch_size):
        batch = data[k:k + batch_size]
        for predicted, (_, _, gold, _) in zip(parse(parser, batch, strategy), batch):
            correct += sum(p == g for p, g in zip(predicted[1:], gold[1:]))
            total += len(gold) - 1
    return correct / total


def baseline_score(data: Sequence[Item]) -> float:
    """UAS of the trivial parser that attaches every word to the next one (last to ROOT)."""
    correct = sum(gold[i] == (i + 1 if i < len(gold) - 1 else 0)
                  for _, _, gold, _ in data for i in range(1, len(gold)))
    return correct / sum(len(gold) - 1 for _, _, gold, _ in data)


TRAINERS: dict[str, tuple[Callable[[dy.ParameterCollection, float], dy.Trainer], float]] = {
    "adam": (dy.AdamTrainer, 0.001), "sgd": (dy.SimpleSGDTrainer, 0.1)}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--strategy", default=dy.default_strategy(),
                    help="a strategy: none, depth, agenda, critical, lookahead (the default), cost, learned")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64, help="LSTM size (each direction) and MLP size")
    ap.add_argument("--word-dim", type=int, default=64)
    ap.add_argument("--pos-dim", type=int, default=0, help="POS tag embedding size (0: words only)")
    ap.add_argument("--trainer", choices=TRAINERS, default="adam")
    ap.add_argument("--lr", type=float, help="learning rate (default: adam 0.001, sgd 0.1)")
    ap.add_argument("--train", metavar="FILE", help="CoNLL-U training file (default: synthetic)")
    ap.add_argument("--dev", metavar="FILE", help="held-out CoNLL-U file")
    ap.add_argument("--min-count", type=int, default=2,
                    help="training words seen fewer times are <unk> (so that <unk> is trained)")
    ap.add_argument("--n-train", type=int, default=1500, help="synthetic training sentences")
    ap.add_argument("--n-dev", type=int, default=200, help="synthetic held-out sentences")
    ap.add_argument("--seed", type=int, default=1)
    return ap.parse_args(argv)


def prepare_data(args: argparse.Namespace) -> tuple[list[Item], list[Item], Vocab, Vocab, int]:
    """(train, dev, word vocabulary, tag vocabulary, non-projective sentences left out)."""
    if args.train:
        train_raw = read_conllu(args.train)
        dev_raw = read_conllu(args.dev) if args.dev else train_raw[-len(train_raw) // 10:]
    else:
        train_raw = synthetic_treebank(args.n_train, seed=args.seed)
        dev_raw = synthetic_treebank(args.n_dev, seed=args.seed + 1000)
    counts = Counter(form for s in train_raw for form, _, _ in s)
    words = Vocab(w for w, c in counts.items() if c >= args.min_count)
    tags = Vocab(upos for s in train_raw for _, upos, _ in s)

    def encode(sentence: list[Token], with_oracle: bool) -> Item:
        heads = [0] + [head for _, _, head in sentence]
        return ([words[form] for form, _, _ in sentence], [tags[upos] for _, upos, _ in sentence],
                heads, oracle(heads) if with_oracle else [])

    train: list[Item] = []
    skipped = 0
    for sentence in train_raw:
        try:
            train.append(encode(sentence, True))
        except ValueError:
            skipped += 1
    dev = [encode(s, False) for s in dev_raw]
    if not train or not dev:
        raise SystemExit("no (projective) sentences to train on, or none to evaluate on")
    return train, dev, words, tags, skipped


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    train, dev, words, tags, skipped = prepare_data(args)
    n_transitions = sum(len(t) for *_, t in train)
    print(f"train: {len(train)} sentences, {n_transitions // 2} words"
          + (f" ({skipped} non-projective left out)" if skipped else "")
          + f"; dev: {len(dev)} sentences; {len(words)} words, {len(tags)} POS tags; strategy {args.strategy!r}")

    pc = dy.ParameterCollection(seed=args.seed)
    parser = Parser(pc, len(words), len(tags), args.word_dim, args.pos_dim, args.hidden, args.hidden)
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
            loss = batch_loss(parser, train[k:k + args.batch_size], args.strategy)
            total += loss.value()
            loss.backward()
            trainer.update()
            step_times.append(time.perf_counter() - t0)
        losses.append(total / n_transitions)
        print(f"epoch {epoch}: loss per transition {losses[-1]:.4f}  ({time.perf_counter() - t_epoch:.1f}s)")

    t0 = time.perf_counter()
    uas = attachment_score(parser, dev, args.batch_size, args.strategy)
    baseline = baseline_score(dev)
    print(f"held-out UAS (greedy decoding): {uas:.3f}  ({time.perf_counter() - t0:.1f}s; "
          f"attaching every word to the next one gives {baseline:.3f})")

    # What the scheduler did for one minibatch (forward pass), and what it does without
    # batching; then the same for decoding, summed over its npvalue() calls.
    batch = train[:args.batch_size]
    stats: dict[str, dict[str, Any]] = {}
    decode_stats: dict[str, dict[str, Any]] = {}
    for strategy in dict.fromkeys([args.strategy, "none"]):
        batch_loss(parser, batch, strategy).value()
        stats[strategy] = dy.cg().stats()
        parse(parser, batch, strategy)
        decode_stats[strategy] = dy.cg().stats()
    s, d = stats[args.strategy], decode_stats[args.strategy]
    print(f"one step ({len(batch)} sentences, {sum(len(w) for w, *_ in batch)} words, "
          f"{sum(len(t) for *_, t in batch)} transitions): "
          f"{s['nodes']} nodes in {s['batches']} batches with {args.strategy!r} "
          f"({stats['none']['batches']} with 'none'); median step time {1000 * float(np.median(step_times)):.1f} ms")
    print(f"decoding the same sentences: {d['forward_calls']} npvalue() calls, {d['nodes']} nodes in "
          f"{d['batches']} batches with {args.strategy!r} ({decode_stats['none']['batches']} with 'none')")
    return {"losses": losses, "uas": uas, "baseline_uas": baseline, "stats": stats,
            "decode_stats": decode_stats, "skipped": skipped, "step_seconds": float(np.median(step_times))}


if __name__ == "__main__":
    main(sys.argv[1:])
