"""Deterministic synthetic data for the five benchmark tasks (see BENCHMARKS.md).

Everything comes from ``numpy.random.default_rng(seed)``: the same seed gives the
same corpus on every machine, and no download is needed. Each task's data is a list
of plain-Python instances (tuples of ints, nested tuples for trees) so that the
autobatch models and the PyTorch baselines read exactly the same thing.
"""
import numpy as np

N_TAGS = 5
N_ACTIONS = 3                 # arc-standard: SHIFT, LEFT-ARC, RIGHT-ARC
SHIFT, LEFT, RIGHT = 0, 1, 2
N_CHARS = 60


def lengths(rng, n, mean, sd, lo, hi):
    """n integer lengths ~ gamma(mean, sd), rounded and clipped to lo..hi."""
    shape = (mean / sd) ** 2
    scale = sd * sd / mean
    return np.clip(np.rint(rng.gamma(shape, scale, size=n)), lo, hi).astype(int)


def zipf_sampler(rng, vocab, a=1.1, first=0):
    """Draw word ids first..first+vocab-1 with P(rank k) proportional to k**-a."""
    p = 1.0 / np.arange(1, vocab + 1) ** a
    cdf = np.cumsum(p / p.sum())

    def draw(n):
        return (np.searchsorted(cdf, rng.random(n), side="right").clip(0, vocab - 1) + first).tolist()
    return draw


# --------------------------------------------------------------------- tagger --

class TaggedCorpus:
    """Sentences of (word ids, tag ids). Tags are mostly a function of the word
    (90 %), otherwise random. `spelling[w]` is word w's character sequence and
    `rare[w]` tells whether w is seen fewer than `rare_below` times in the corpus."""

    def __init__(self, n_sentences, vocab=20000, seed=0, rare_below=5):
        rng = np.random.default_rng([seed, 1])
        draw = zipf_sampler(rng, vocab)
        word_tag = rng.integers(0, N_TAGS, size=vocab)
        self.vocab = vocab
        self.sentences = []
        counts = np.zeros(vocab, dtype=np.int64)
        for n in lengths(rng, n_sentences, 24, 12, 1, 100):
            words = draw(n)
            noisy = rng.random(n) < 0.1
            tags = np.where(noisy, rng.integers(0, N_TAGS, size=n), word_tag[words]).tolist()
            np.add.at(counts, words, 1)
            self.sentences.append((tuple(words), tuple(tags)))
        self.rare = (counts < rare_below).tolist()
        spell_len = rng.integers(2, 13, size=vocab)
        chars = rng.integers(0, N_CHARS, size=(vocab, 12))
        self.spelling = [tuple(chars[w, :spell_len[w]].tolist()) for w in range(vocab)]


# ------------------------------------------------------------------ treelstm --

def random_bracketing(rng, words):
    """A uniformly chosen split at every span: nested 2-tuples with word ids at the leaves."""
    if len(words) == 1:
        return words[0]
    k = int(rng.integers(1, len(words)))
    return (random_bracketing(rng, words[:k]), random_bracketing(rng, words[k:]))


def tree_instances(n_sentences, vocab=20000, seed=0):
    """(tree, label) pairs; the label (5 classes) depends on the words, with noise."""
    rng = np.random.default_rng([seed, 2])
    draw = zipf_sampler(rng, vocab)
    word_score = rng.normal(0, 1, size=vocab)
    out = []
    for n in lengths(rng, n_sentences, 19, 9, 1, 60):
        words = draw(n)
        s = word_score[words].mean() * np.sqrt(n) + rng.normal(0, 0.5)
        label = int(np.clip(np.floor(s + 2.5), 0, N_TAGS - 1))
        out.append((random_bracketing(rng, words), label))
    return out


# -------------------------------------------------------------------- parser --

def random_projective_heads(rng, n):
    """heads[i] in 0..n (0 = ROOT) for words 1..n, projective by construction:
    every span picks a head, whose left and right sub-spans hang from it."""
    heads = [0] * (n + 1)

    def span(lo, hi, parent):               # words lo..hi-1 (1-based), all under parent
        if lo >= hi:
            return
        h = int(rng.integers(lo, hi))
        heads[h] = parent
        # split the left part into consecutive subtrees attached to h
        for a, b in _chunks(rng, lo, h):
            span(a, b, h)
        for a, b in _chunks(rng, h + 1, hi):
            span(a, b, h)

    span(1, n + 1, 0)
    return heads


def _chunks(rng, lo, hi):
    """Cut lo..hi-1 into 1-3 consecutive non-empty pieces."""
    if lo >= hi:
        return []
    k = int(rng.integers(1, min(3, hi - lo) + 1))
    cuts = sorted(rng.choice(np.arange(lo + 1, hi), size=k - 1, replace=False).tolist()) if k > 1 else []
    bounds = [lo] + cuts + [hi]
    return list(zip(bounds[:-1], bounds[1:]))


def arc_standard_oracle(heads):
    """The static arc-standard oracle for a projective tree over words 1..n with ROOT
    (0) at the bottom of the stack. Returns [(action, s1, s0, b0)] with 2n entries,
    where s1/s0/b0 are positions 0..n (0 = ROOT) or -1 where missing."""
    n = len(heads) - 1
    deps = [0] * (n + 1)
    for i in range(1, n + 1):
        deps[heads[i]] += 1
    attached = [0] * (n + 1)
    stack, buf, out = [0], 1, []
    while buf <= n or len(stack) > 1:
        s0 = stack[-1]
        s1 = stack[-2] if len(stack) > 1 else -1
        b0 = buf if buf <= n else -1
        if s1 > 0 and heads[s1] == s0:
            a = LEFT
        elif s1 >= 0 and len(stack) > 1 and heads[s0] == s1 and attached[s0] == deps[s0]:
            a = RIGHT
        elif buf <= n:
            a = SHIFT
        else:
            raise ValueError("tree is not projective")
        out.append((a, s1, s0, b0))
        if a == SHIFT:
            stack.append(buf)
            buf += 1
        elif a == LEFT:
            attached[s0] += 1
            del stack[-2]
        else:
            attached[s1] += 1
            stack.pop()
    assert len(out) == 2 * n
    return out


def parser_instances(n_sentences, vocab=20000, seed=0):
    """(words, oracle) pairs: words 1..n as a tuple of ids, the oracle as in
    `arc_standard_oracle` (positions refer to 1-based words, 0 = ROOT)."""
    rng = np.random.default_rng([seed, 3])
    draw = zipf_sampler(rng, vocab)
    out = []
    for n in lengths(rng, n_sentences, 24, 12, 1, 80):
        words = tuple(draw(n))
        out.append((words, tuple(arc_standard_oracle(random_projective_heads(rng, n)))))
    return out


# ------------------------------------------------------------------------ lm --

BOS = 0


def lm_instances(n_sentences, vocab=10000, seed=0):
    """Sentences of ids 1..vocab-1 (0 is <s>): the model reads <s> w1 .. w(n-1)
    and predicts w1 .. wn."""
    rng = np.random.default_rng([seed, 4])
    draw = zipf_sampler(rng, vocab - 1, first=1)
    return [tuple(draw(n)) for n in lengths(rng, n_sentences, 21, 10, 1, 80)]


# ------------------------------------------------------------------ per task --

def make(task, n_sentences, seed=0, vocab=None):
    """The instances of a task. For the taggers, (corpus, instances)."""
    if task in ("tagger", "tagger-char"):
        corpus = TaggedCorpus(max(n_sentences, 2000), vocab or 20000, seed)
        return corpus, corpus.sentences[:n_sentences]
    if task == "treelstm":
        return None, tree_instances(n_sentences, vocab or 20000, seed)
    if task == "parser":
        return None, parser_instances(n_sentences, vocab or 20000, seed)
    if task == "lm":
        return None, lm_instances(n_sentences, vocab or 10000, seed)
    raise ValueError(f"unknown task {task!r}")
