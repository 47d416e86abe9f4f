"""PyTorch baselines for the five standard tasks (the other workloads in
torch_workloads.py): per-instance eager code and hand-batched code.

Same sizes and the same data as `tasks.py`, one thread (``torch.set_num_threads(1)``),
plain SGD with the same learning rate and gradient clipping (global norm 5, as the
autobatch trainer's default). Word embeddings use sparse gradients, as autobatch's
lookup tables are updated sparsely.

* ``eager``: one instance at a time, written as a PyTorch user would for a single
  instance (``nn.LSTM`` over one sentence, recursion over one tree, a loop over one
  sentence's oracle transitions); the per-instance losses are summed and
  back-propagated once per minibatch.
* ``batched``: the minibatch by hand: packed sequences for the LSTMs, level-by-level
  batching for the trees, gathered features for the parser.

torch is an optional dependency (the ``bench`` extra); this module is imported only
when it is installed.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from autobatch.bench import data as D
from autobatch.bench import torch_workloads
from autobatch.bench.torch_common import TorchTask, _pad


class Tagger(TorchTask):
    vocab = 20000

    def build(self):
        H = self.H
        self.E = nn.Embedding(self.vocab, H, sparse=True)
        self.lstm = nn.LSTM(H, H, bidirectional=True)
        self.W = nn.Linear(2 * H, H)
        self.O = nn.Linear(H, D.N_TAGS)

    # per instance
    def embed_one(self, words):
        return self.E(torch.tensor(words))

    def loss_one(self, inst):
        words, tags = inst
        x = self.embed_one(words)
        out, _ = self.lstm(x.unsqueeze(1))
        h = torch.tanh(self.W(out.squeeze(1)))
        return F.cross_entropy(self.O(h), torch.tensor(tags), reduction="sum")

    def loss_eager(self, batch):
        return sum(self.loss_one(i) for i in batch)

    # hand-batched
    def embed_batch(self, words, lengths):
        return self.E(words)

    def loss_batched(self, batch):
        words, lengths, mask = _pad([w for w, _ in batch])
        tags = torch.tensor([t for _, ts in batch for t in ts])
        x = self.embed_batch(words, lengths)
        packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, _ = pad_packed_sequence(self.lstm(packed)[0])           # (T, B, 2H)
        h = torch.tanh(self.W(out.transpose(0, 1)[mask]))              # tokens in batch order
        return F.cross_entropy(self.O(h), tags, reduction="sum")


class TaggerChar(Tagger):
    char_dim = 64

    def build(self):
        super().build()
        self.CE = nn.Embedding(D.N_CHARS, self.char_dim)
        self.clstm = nn.LSTM(self.char_dim, self.H // 2, bidirectional=True)

    def char_rep_one(self, w):
        x = self.CE(torch.tensor(self.meta.spelling[w])).unsqueeze(1)
        _, (h, _) = self.clstm(x)
        return torch.cat([h[0, 0], h[1, 0]])

    def embed_one(self, words):
        rare = self.meta.rare
        return torch.stack([self.char_rep_one(w) if rare[w] else self.E(torch.tensor(w))
                            for w in words])

    def embed_batch(self, words, lengths):
        x = self.E(words)                                              # (T, B, H)
        rare = torch.tensor(self.meta.rare)[words] & (torch.arange(words.shape[0])[:, None] < lengths[None, :])
        pos = rare.nonzero(as_tuple=True)
        if len(pos[0]) == 0:
            return x
        spell = [self.meta.spelling[w] for w in words[pos].tolist()]
        chars, clen, _ = _pad(spell)
        packed = pack_padded_sequence(self.CE(chars), clen, enforce_sorted=False)
        _, (h, _) = self.clstm(packed)
        reps = torch.cat([h[0], h[1]], dim=1)                          # (rare tokens, H)
        return x.index_put(pos, reps)


class TreeLSTM(TorchTask):
    vocab = 20000

    def build(self):
        H = self.H
        self.E = nn.Embedding(self.vocab, H, sparse=True)
        self.Wl = nn.Linear(H, 3 * H)
        self.U = nn.Linear(2 * H, 5 * H)
        self.O = nn.Linear(H, D.N_TAGS)

    def leaf(self, x):
        i, o, u = self.Wl(x).chunk(3, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u)
        return torch.sigmoid(o) * torch.tanh(c), c

    def compose(self, hl, cl, hr, cr):
        i, fl, fr, o, u = self.U(torch.cat([hl, hr], dim=-1)).chunk(5, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
        return torch.sigmoid(o) * torch.tanh(c), c

    def encode(self, t):
        if isinstance(t, tuple):
            return self.compose(*self.encode(t[0]), *self.encode(t[1]))
        return self.leaf(self.E(torch.tensor(t)))

    def loss_eager(self, batch):
        total = 0
        for tree, label in batch:
            h, _ = self.encode(tree)
            total = total + F.cross_entropy(self.O(h)[None], torch.tensor([label]), reduction="sum")
        return total

    def loss_batched(self, batch):
        # number every node; rank = position in height order (leaves first)
        nodes = []                      # (height, word or (left id, right id))

        def walk(t):
            if isinstance(t, tuple):
                a, b = walk(t[0]), walk(t[1])
                nodes.append((max(nodes[a][0], nodes[b][0]) + 1, (a, b)))
            else:
                nodes.append((0, t))
            return len(nodes) - 1
        roots = [walk(t) for t, _ in batch]
        order = sorted(range(len(nodes)), key=lambda i: nodes[i][0])
        rank = [0] * len(nodes)
        for r, i in enumerate(order):
            rank[i] = r
        levels = {}
        for i in order:
            levels.setdefault(nodes[i][0], []).append(i)
        leaves = levels.pop(0)
        h, c = self.leaf(self.E(torch.tensor([nodes[i][1] for i in leaves])))
        hs, cs = [h], [c]
        for height in sorted(levels):
            ids = levels[height]
            H_all, C_all = torch.cat(hs), torch.cat(cs)
            left = torch.tensor([rank[nodes[i][1][0]] for i in ids])
            right = torch.tensor([rank[nodes[i][1][1]] for i in ids])
            h, c = self.compose(H_all[left], C_all[left], H_all[right], C_all[right])
            hs.append(h)
            cs.append(c)
        H_all = torch.cat(hs)
        logits = self.O(H_all[torch.tensor([rank[r] for r in roots])])
        return F.cross_entropy(logits, torch.tensor([l for _, l in batch]), reduction="sum")


class Parser(TorchTask):
    vocab = 20000

    def build(self):
        H = self.H
        self.E = nn.Embedding(self.vocab, H, sparse=True)
        self.lstm = nn.LSTM(H, H, bidirectional=True)
        self.pad = nn.Parameter(torch.empty(1, 2 * H).uniform_(-0.1, 0.1))
        self.root = nn.Parameter(torch.empty(1, 2 * H).uniform_(-0.1, 0.1))
        self.W = nn.Linear(6 * H, H)
        self.O = nn.Linear(H, D.N_ACTIONS)

    def loss_eager(self, batch):
        total = 0
        for words, oracle in batch:
            out, _ = self.lstm(self.E(torch.tensor(words)).unsqueeze(1))
            hs = [self.root[0]] + list(out.squeeze(1).unbind(0))
            pad = self.pad[0]
            for action, s1, s0, b0 in oracle:
                feats = torch.cat([hs[i] if i >= 0 else pad for i in (s1, s0, b0)])
                h = F.relu(self.W(feats))
                total = total + F.cross_entropy(self.O(h)[None], torch.tensor([action]), reduction="sum")
        return total

    def loss_batched(self, batch):
        words, lengths, _ = _pad([w for w, _ in batch])
        T, B = words.shape
        packed = pack_padded_sequence(self.E(words), lengths, enforce_sorted=False)
        out, _ = pad_packed_sequence(self.lstm(packed)[0], total_length=T)   # (T, B, 2H)
        table = torch.cat([self.pad, self.root, out.transpose(0, 1).reshape(B * T, -1)])
        idx, gold = [], []
        for b, (_, oracle) in enumerate(batch):
            for action, s1, s0, b0 in oracle:
                idx.extend(0 if i < 0 else 1 if i == 0 else 2 + b * T + i - 1 for i in (s1, s0, b0))
                gold.append(action)
        feats = table[torch.tensor(idx)].view(len(gold), -1)
        h = F.relu(self.W(feats))
        return F.cross_entropy(self.O(h), torch.tensor(gold), reduction="sum")


class LM(TorchTask):
    vocab = 10000

    def build(self):
        H = self.H
        self.E = nn.Embedding(self.vocab, H, sparse=True)
        self.lstm = nn.LSTM(H, H)
        self.O = nn.Linear(H, self.vocab)

    def loss_eager(self, batch):
        total = 0
        for sent in batch:
            x = self.E(torch.tensor((D.BOS,) + sent[:-1])).unsqueeze(1)
            out, _ = self.lstm(x)
            total = total + F.cross_entropy(self.O(out.squeeze(1)), torch.tensor(sent), reduction="sum")
        return total

    def loss_batched(self, batch):
        inputs, lengths, mask = _pad([(D.BOS,) + s[:-1] for s in batch])
        gold = torch.tensor([w for s in batch for w in s])
        packed = pack_padded_sequence(self.E(inputs), lengths, enforce_sorted=False)
        out, _ = pad_packed_sequence(self.lstm(packed)[0])
        return F.cross_entropy(self.O(out.transpose(0, 1)[mask]), gold, reduction="sum")


CLASSES = {"tagger": Tagger, "tagger-char": TaggerChar, "treelstm": TreeLSTM,
           "parser": Parser, "lm": LM, **torch_workloads.CLASSES}
MODES = ("eager", "batched")


class System:
    """A baseline ready to train: `step(batch)` runs one full training step and
    returns (loss, {forward, backward, update} seconds)."""

    def __init__(self, task, mode, hidden=256, seed=0, meta=None, lr=0.1, clip=5.0):
        self.name = f"torch-{mode}"
        self.model = CLASSES[task](hidden, seed, meta)
        self.loss_fn = getattr(self.model, "loss_" + mode)
        self.opt = self.model.sgd(lr)
        self.clip = clip

    def step(self, batch):
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(batch)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if self.clip > 0:
            _clip_grad_norm(self.model.parameters(), self.clip)
        self.opt.step()
        t3 = time.perf_counter()
        return float(loss.detach()), {"forward": t1 - t0, "backward": t2 - t1, "update": t3 - t2}


def _clip_grad_norm(params, threshold):
    """Global-norm clipping that also accepts sparse gradients."""
    grads = [p.grad for p in params if p.grad is not None]
    sq = 0.0
    for g in grads:
        v = g.coalesce()._values() if g.is_sparse else g
        sq += float(torch.dot(v.reshape(-1), v.reshape(-1)))
    norm = sq ** 0.5
    if norm > threshold:
        for g in grads:
            g.mul_(threshold / norm)
