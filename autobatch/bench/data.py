"""Deterministic synthetic data for the benchmark tasks (see BENCHMARKS.md and
docs/bench.md).

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


# ---------------------------------------------------------------- typed trees --

N_NODE_TYPES = 2


def typed_bracketing(rng, words):
    """As `random_bracketing`, an internal node being (type, left, right) with a type
    drawn uniformly from 0..N_NODE_TYPES-1 (ED-Batch's double-typed TreeNN picks one of
    two compositions per node at random)."""
    if len(words) == 1:
        return words[0]
    k = int(rng.integers(1, len(words)))
    kind = int(rng.integers(0, N_NODE_TYPES))
    return (kind, typed_bracketing(rng, words[:k]), typed_bracketing(rng, words[k:]))


def typed_tree_instances(n_sentences, vocab=20000, seed=0):
    """(typed tree, label) pairs over the sentences and labels of `tree_instances`."""
    rng = np.random.default_rng([seed, 5])
    return [(typed_bracketing(rng, leaves(tree)), label)
            for tree, label in tree_instances(n_sentences, vocab, seed)]


def leaves(tree):
    """The word ids at the leaves of a (typed or untyped) tree, left to right."""
    if isinstance(tree, tuple):
        return [w for child in tree[-2:] for w in leaves(child)]
    return [tree]


# ------------------------------------------------------------------- lattices --

N_LATTICE_CHARS = 3000        # a Chinese NER character vocabulary
LEXICON_SIZE = 20000
WORD_LENGTHS = (2, 3, 4)


class Lexicon:
    """A synthetic lexicon over characters: `spelling[k]` is word k's characters and
    `index` maps a spelling back to its id. Lengths 2-4 are Zipfian (P(rank r) ~ r**-1.5
    over 2, 3, 4: 64 %, 23 %, 12 %); a longer word is, with probability `compound`, a
    shorter word followed by characters, so that words nest and overlap in a sentence
    as they do in Chinese lexicons (the lattice of 'Nanjing city Yangtze bridge')."""

    def __init__(self, rng, size=LEXICON_SIZE, n_chars=N_LATTICE_CHARS, compound=0.6):
        p = 1.0 / np.arange(1, len(WORD_LENGTHS) + 1) ** 1.5
        lens = np.sort(rng.choice(WORD_LENGTHS, size=size, p=p / p.sum()))
        draw_char = zipf_sampler(rng, n_chars, a=1.0)
        self.spelling, self.index = [], {}
        for n in lens.tolist():                  # short words first: compounds reuse them
            for _ in range(100):                 # a new spelling (short ones can collide)
                word = tuple(draw_char(n))
                if n > 2 and rng.random() < compound:
                    stem = self.spelling[int(rng.integers(len(self.spelling)))]
                    word = stem[:n - 1] + word[len(stem[:n - 1]):]
                if word not in self.index:
                    self.index[word] = len(self.spelling)
                    self.spelling.append(word)
                    break
        # ids (and so Zipf frequency ranks) independent of length
        order = rng.permutation(len(self.spelling))
        self.spelling = [self.spelling[k] for k in order]
        self.index = {w: k for k, w in enumerate(self.spelling)}

    def matches(self, chars):
        """(start, end, word id) of every lexicon word spelled by chars[start:end],
        ordered by end then start: the lattice's word arcs, node `start` to node `end`."""
        out = []
        for end in range(2, len(chars) + 1):
            for start in range(max(0, end - WORD_LENGTHS[-1]), end - 1):
                k = self.index.get(tuple(chars[start:end]))
                if k is not None:
                    out.append((start, end, k))
        return tuple(out)


def lattice_instances(n_sentences, seed=0, p_word=0.75):
    """(chars, tags, words) per sentence: text made of lexicon words (Zipf over the
    lexicon, probability `p_word` per token) and single characters, lengths ~ gamma
    mean 30, sd 15, 2..100 characters (Chinese NER sentences); `words` are all the
    lexicon's matches over the characters (`Lexicon.matches`, about 0.5-1 per
    character). Tags are a segmentation-style labelling (single char 0, word begin 1,
    inside 2, end 3, every char of one word in ten 4, as an entity)."""
    rng = np.random.default_rng([seed, 6])
    lex = Lexicon(rng)
    draw_word = zipf_sampler(rng, len(lex.spelling))
    draw_char = zipf_sampler(rng, N_LATTICE_CHARS, a=1.0)
    out = []
    for n in lengths(rng, n_sentences, 30, 15, 2, 100):
        chars, tags = [], []
        while len(chars) < n:
            if rng.random() < p_word:
                k = draw_word(1)[0]
                word = lex.spelling[k]
                chars += word
                tags += [4] * len(word) if k % 10 == 0 else [1] + [2] * (len(word) - 2) + [3]
            else:
                chars += draw_char(1)
                tags.append(0)
        chars, tags = tuple(chars[:n]), tuple(tags[:n])
        out.append((chars, tags, lex.matches(chars)))
    return out


# ------------------------------------------------------------ sentence pairs --

def nmt_instances(n_pairs, vocab=10000, seed=0):
    """(source, target) pairs of ids 1..vocab-1 (0 is <s>). Source lengths ~ gamma mean
    22, sd 10, 1..80; the target's length is the source's times a log-normal ratio
    (median 1, sd ~0.2) plus noise, 1..80, so the two are correlated as in a
    translation corpus (mean ~22-23, correlation ~0.9)."""
    rng = np.random.default_rng([seed, 7])
    draw_src = zipf_sampler(rng, vocab - 1, first=1)
    draw_tgt = zipf_sampler(rng, vocab - 1, first=1)
    src_lens = lengths(rng, n_pairs, 22, 10, 1, 80)
    ratio = np.exp(rng.normal(0.0, 0.2, size=n_pairs))
    tgt_lens = np.clip(np.rint(src_lens * ratio + rng.normal(0, 1.5, size=n_pairs)), 1, 80)
    return [(tuple(draw_src(int(s))), tuple(draw_tgt(int(t)))) for s, t in zip(src_lens, tgt_lens)]


# ------------------------------------------------------------------ per task --

TREE_VOCAB = {"mvrnn": 256}     # MV-RNN: a matrix per word (ED-Batch's 256 words)
MAKERS = {
    "treelstm": tree_instances, "treegru": tree_instances, "mvrnn": tree_instances,
    "typed-treenn": typed_tree_instances, "parser": parser_instances,
}


def make(task, n_sentences, seed=0, vocab=None):
    """The instances of a task, as (meta, instances): for the taggers and the BiRNN
    meta is the corpus (its spelling and rare-word tables), else None."""
    if task in ("tagger", "tagger-char", "birnn"):
        corpus = TaggedCorpus(max(n_sentences, 2000), vocab or 20000, seed)
        return corpus, corpus.sentences[:n_sentences]
    if task in MAKERS:
        return None, MAKERS[task](n_sentences, vocab or TREE_VOCAB.get(task, 20000), seed)
    if task == "lm":
        return None, lm_instances(n_sentences, vocab or 10000, seed)
    if task in ("lattice-lstm", "lattice-gru"):
        return None, lattice_instances(n_sentences, seed)
    if task in ("nmt-attention", "nmt-dot"):
        return None, nmt_instances(n_sentences, vocab or 10000, seed)
    raise ValueError(f"unknown task {task!r}")
