"""PyTorch baselines for the workloads of tree_tasks.py, lattice_tasks.py and
sequence_tasks.py: the same models on the same data, one thread, per instance
(``eager``) and hand-batched (``batched``).

* trees (Tree-GRU, MV-RNN, double-typed TreeNN): ``eager`` recurses over one tree;
  ``batched`` runs level by level over the minibatch (nodes of one height, and for the
  typed TreeNN of one type, in one call), as the PyTorch Tree-LSTM of torch_baselines;
* lattices: ``eager`` walks one lattice's arcs; ``batched`` runs, for every character
  position, all the arcs that end there across the minibatch (one call per cell kind),
  and averages them into the node states with ``index_add``;
* NMT: ``eager`` runs ``nn.LSTM`` over one sentence pair and attends for all its
  target positions at once; ``batched`` packs the sources and targets and attends over
  the padded source states with a mask;
* BiRNN: ``nn.RNN`` (tanh, both directions) over one sentence, or packed.
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from autobatch.bench import data as D
from autobatch.bench.lattice_tasks import arcs
from autobatch.bench.torch_common import TorchTask, _pad


def gru_mix(z, h, c):
    return c + z * (h - c)


def as_typed(tree):
    """A tree with every internal node as (kind, left, right) (kind 0 if untyped)."""
    if not isinstance(tree, tuple):
        return tree
    kind, left, right = tree if len(tree) == 3 else (0,) + tree
    return (kind, as_typed(left), as_typed(right))


def pick(parts, locs):
    """The rows `locs` ((part, row) pairs) of the state tuples `parts`, in that order:
    one gather per part read, not a concatenation of all the parts so far (which, for
    the MV-RNN's matrices, copies every level again at every level)."""
    order = sorted(range(len(locs)), key=lambda j: locs[j])
    rows = {}
    for j in order:
        rows.setdefault(locs[j][0], []).append(locs[j][1])
    back = torch.empty(len(locs), dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(len(locs))
    return tuple(torch.cat([parts[p][c][torch.tensor(r)] for p, r in rows.items()])[back]
                 for c in range(len(parts[0])))


def tree_levels(trees, leaf, node):
    """Root states of typed trees, computed level by level: `leaf(word ids)` and
    `node(kind, left states, right states)` take and return tuples of row-stacked
    tensors; nodes of one height and kind go in one call."""
    nodes = []                                   # (height, kind, word or (left, right))

    def walk(t):
        if isinstance(t, tuple):
            a, b = walk(t[1]), walk(t[2])
            nodes.append((max(nodes[a][0], nodes[b][0]) + 1, t[0], (a, b)))
        else:
            nodes.append((0, 0, t))
        return len(nodes) - 1
    roots = [walk(t) for t in trees]
    groups = {}
    for i, (height, kind, _) in enumerate(nodes):
        groups.setdefault((height, kind), []).append(i)
    loc, parts = {}, []                          # node -> (part, row)
    for height, kind in sorted(groups):
        ids = groups[(height, kind)]
        if height == 0:
            out = leaf(torch.tensor([nodes[i][2] for i in ids]))
        else:
            out = node(kind, pick(parts, [loc[nodes[i][2][0]] for i in ids]),
                       pick(parts, [loc[nodes[i][2][1]] for i in ids]))
        for j, i in enumerate(ids):
            loc[i] = (len(parts), j)
        parts.append(out)
    return pick(parts, [loc[r] for r in roots])


def tree_one(tree, leaf, node):
    """The root state of one typed tree, by recursion (rows of one)."""
    if isinstance(tree, tuple):
        return node(tree[0], tree_one(tree[1], leaf, node), tree_one(tree[2], leaf, node))
    return leaf(torch.tensor([tree]))


class TreeTask(TorchTask):
    """A tree model: `leaf`, `node`, the root's hidden state `root_h` -> 5-way loss."""
    vocab = 20000

    def root_loss(self, states, labels):
        return F.cross_entropy(self.O(states[0]), torch.tensor(labels), reduction="sum")

    def loss_eager(self, batch):
        return sum(self.root_loss(tree_one(as_typed(t), self.leaf, self.node), [y])
                   for t, y in batch)

    def loss_batched(self, batch):
        roots = tree_levels([as_typed(t) for t, _ in batch], self.leaf, self.node)
        return self.root_loss(roots, [y for _, y in batch])


def linear(i, o, bias=False):
    return nn.Linear(i, o, bias=bias)


class TreeGRU(TreeTask):
    def build(self):
        H = self.H
        self.E = nn.Embedding(self.vocab, H, sparse=True)
        self.U = nn.ModuleDict({g: linear(H, H) for g in ("r", "z", "c", "r_l", "r_r", "z_l",
                                                            "z_r", "c_l", "c_r")})
        self.b = nn.ParameterDict({g: nn.Parameter(torch.zeros(H)) for g in ("r", "z", "c")})
        self.O = nn.Linear(H, D.N_TAGS)

    def cell(self, h, r_name, z_name, c_name):
        r = torch.sigmoid(self.U[r_name](h) + self.b["r"])
        z = torch.sigmoid(self.U[z_name](h) + self.b["z"])
        c = torch.tanh(self.U[c_name](r * h) + self.b["c"])
        return gru_mix(z, h, c)

    def leaf(self, words):
        return (self.cell(self.E(words), "r", "z", "c"),)

    def node(self, kind, left, right):
        return ((self.cell(left[0], "r_l", "z_l", "c_l")
                 + self.cell(right[0], "r_r", "z_r", "c_r")) * 0.5,)


class MVRNN(TreeTask):
    vocab = 256

    def build(self):
        H = self.H
        self.V = nn.Embedding(self.vocab, H, sparse=True)
        self.M = nn.Embedding(self.vocab, H * H, sparse=True)
        self.W = nn.Linear(2 * H, H)
        self.WM = nn.Parameter(torch.empty(H, 2 * H))
        with torch.no_grad():                  # near the identity, as tree_tasks.MVRNN
            eye = torch.eye(H)
            self.M.weight.copy_((eye + 0.01 * torch.randn(self.vocab, H, H)).reshape(self.vocab, -1))
            self.WM.copy_(torch.cat([eye, eye], 1) / 2 + 0.01 * torch.randn(H, 2 * H))
        self.O = nn.Linear(H, D.N_TAGS)

    def leaf(self, words):
        return self.V(words), self.M(words).view(-1, self.H, self.H)

    def node(self, kind, left, right):
        (a, A), (b, B) = left, right
        Ba = torch.bmm(B, a.unsqueeze(2)).squeeze(2)
        Ab = torch.bmm(A, b.unsqueeze(2)).squeeze(2)
        # W_M [A; B] for all n nodes as one product: (H, 2H) x (2H, n*H) (a broadcast
        # matmul's backward would materialise n copies of W_M's gradient)
        n, H = A.shape[0], self.H
        AB = torch.cat([A, B], 1).transpose(0, 1).reshape(2 * H, n * H)
        return (torch.tanh(self.W(torch.cat([Ba, Ab], 1))),
                (self.WM @ AB).reshape(H, n, H).transpose(0, 1))


class TypedTreeNN(TreeTask):
    def build(self):
        H = self.H
        self.E = nn.Embedding(self.vocab, H, sparse=True)
        self.Wl = nn.Linear(H, 3 * H)
        self.U = nn.ModuleList(nn.Linear(2 * H, 3 * H) for _ in range(D.N_NODE_TYPES))
        self.F = nn.ModuleList(nn.ModuleList([linear(H, H), linear(H, H)])
                               for _ in range(D.N_NODE_TYPES))
        self.bf = nn.ParameterList(nn.Parameter(torch.zeros(H)) for _ in range(D.N_NODE_TYPES))
        self.O = nn.Linear(H, D.N_TAGS)

    def leaf(self, words):
        i, o, u = self.Wl(self.E(words)).chunk(3, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u)
        return torch.sigmoid(o) * torch.tanh(c), c

    def node(self, kind, left, right):
        (h_l, c_l), (h_r, c_r) = left, right
        i, o, u = self.U[kind](torch.cat([h_l, h_r], 1)).chunk(3, dim=-1)
        f_l = torch.sigmoid(self.F[kind][0](h_l) + self.bf[kind])
        f_r = torch.sigmoid(self.F[kind][1](h_r) + self.bf[kind])
        c = torch.sigmoid(i) * torch.tanh(u) + f_l * c_l + f_r * c_r
        return torch.sigmoid(o) * torch.tanh(c), c


# ------------------------------------------------------------------- lattices --

def mean_rows(states):
    return tuple(torch.stack(c).mean(0) for c in zip(*states)) if len(states) > 1 else states[0]


def gather(states, todo, row, targets):
    """The source states of the arcs `todo`, (source node, target row, id) sorted by
    source: `row[p][b]` is instance b's row at node p, `targets[t]` the instance of
    target row t."""
    picks = {}
    for source, t, _ in todo:
        picks.setdefault(source, []).append(row[source][targets[t]])
    return tuple(torch.cat([states[p][j][torch.tensor(picks[p])] for p in sorted(picks)])
                 for j in range(len(states[0])))


class Lattice(TorchTask):
    """The cells of lattice_tasks.py; `cell(kind, x, state)` on row-stacked tensors."""

    def build(self):
        H = self.H
        self.E = nn.ModuleList([nn.Embedding(D.N_LATTICE_CHARS, H, sparse=True),
                                nn.Embedding(D.LEXICON_SIZE, H, sparse=True)])
        self.build_cells()
        self.O = nn.Linear(H, D.N_TAGS)

    def loss_eager(self, batch):
        total = 0
        for inst in batch:
            incoming = [[] for _ in range(len(inst[0]) + 1)]
            states = [tuple(s[None] for s in self.start)]
            for source, target, is_word, k in arcs(inst):
                while len(states) < target:
                    states.append(mean_rows(incoming[len(states)]))
                x = self.E[int(is_word)](torch.tensor([k]))
                incoming[target].append(self.cell(int(is_word), x, states[source]))
            states.append(mean_rows(incoming[len(inst[0])]))
            h = torch.cat([s[0] for s in states[1:]])
            total = total + F.cross_entropy(self.O(h), torch.tensor(inst[1]), reduction="sum")
        return total

    def loss_batched(self, batch):
        """Position by position: all the arcs ending at node e, of all instances."""
        ends = [{} for _ in batch]
        for b, inst in enumerate(batch):
            for arc in arcs(inst):
                ends[b].setdefault(arc[1], []).append(arc)
        longest = max(len(inst[0]) for inst in batch)
        # rows[p]: the instances that have a node p, in batch order; row[p][b]: b's row
        rows = [[b for b, inst in enumerate(batch) if len(inst[0]) >= p] for p in range(longest + 1)]
        row = [{b: r for r, b in enumerate(rs)} for rs in rows]
        states = [tuple(s.expand(len(batch), -1) for s in self.start)]
        for e in range(1, longest + 1):
            sums = None
            count = torch.zeros(len(rows[e]), 1)
            for kind in (0, 1):
                todo = sorted((a[0], row[e][b], a[3]) for b in rows[e] for a in ends[b].get(e, ())
                              if a[2] == kind)
                if not todo:
                    continue
                gathered = gather(states, todo, row, rows[e])
                out = self.cell(kind, self.E[kind](torch.tensor([k for _, _, k in todo])), gathered)
                at = torch.tensor([t for _, t, _ in todo])
                part = tuple(torch.zeros(len(rows[e]), self.H).index_add(0, at, o) for o in out)
                sums = part if sums is None else tuple(a + b for a, b in zip(sums, part))
                count.index_add_(0, at, torch.ones(len(at), 1))
            states.append(tuple(s / count for s in sums))
        h = torch.cat([states[p][0] for p in range(1, longest + 1)])
        tags = torch.tensor([batch[b][1][p - 1] for p in range(1, longest + 1) for b in rows[p]])
        return F.cross_entropy(self.O(h), tags, reduction="sum")


class LatticeLSTM(Lattice):
    def build_cells(self):
        H = self.H
        self.X = nn.ModuleList(nn.Linear(H, 4 * H) for _ in range(2))
        self.S = nn.ModuleList(linear(H, 4 * H) for _ in range(2))
        self.start = nn.ParameterList([nn.Parameter(0.1 * torch.randn(H)) for _ in range(2)])

    def cell(self, kind, x, state):
        h, c = state
        f, i, o, u = (self.X[kind](x) + self.S[kind](h)).chunk(4, dim=-1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f) * c
        return torch.sigmoid(o) * torch.tanh(c), c


class LatticeGRU(Lattice):
    def build_cells(self):
        H = self.H
        self.X = nn.ModuleList(nn.Linear(H, 3 * H) for _ in range(2))
        self.S = nn.ModuleList(linear(H, 2 * H) for _ in range(2))
        self.Su = nn.ModuleList(linear(H, H) for _ in range(2))
        self.start = nn.ParameterList([nn.Parameter(0.1 * torch.randn(H))])

    def cell(self, kind, x, state):
        (h,) = state
        xr, xz, xu = self.X[kind](x).chunk(3, dim=-1)
        sr, sz = self.S[kind](h).chunk(2, dim=-1)
        r, z = torch.sigmoid(xr + sr), torch.sigmoid(xz + sz)
        return (gru_mix(z, h, torch.tanh(xu + self.Su[kind](r * h))),)


# ------------------------------------------------------------------------ NMT --

class NMTAttention(TorchTask):
    """sequence_tasks.NMTAttention: BiLSTM encoder (H/2 each way), LSTM decoder,
    MLP attention, tanh(W_c [s; context]) -> softmax."""
    vocab = 10000

    def build(self):
        H = self.H
        self.E_src = nn.Embedding(self.vocab, H, sparse=True)
        self.E_tgt = nn.Embedding(self.vocab, H, sparse=True)
        self.enc = nn.LSTM(H, H // 2, bidirectional=True)
        self.dec = nn.LSTM(H, H)
        self.build_attention()
        self.Wc = nn.Linear(2 * H, H)
        self.O = nn.Linear(H, self.vocab)

    def build_attention(self):
        H = self.H
        self.W1, self.W2 = linear(H, H), linear(H, H)
        self.v = nn.Parameter(torch.randn(H) / H ** 0.5)

    def scores(self, S, Q):
        """(B, M, T) attention scores of the decoder states Q (B, M, H) over the encoder
        states S (B, T, H); one decoder step at a time, as Bahdanau attention is run
        (all at once would hold a B x M x T x H tensor)."""
        keys = self.W1(S)
        return torch.stack([torch.tanh(keys + self.W2(Q[:, t])[:, None]) @ self.v
                            for t in range(Q.shape[1])], 1)

    def decode_loss(self, S, Q, src_mask, tgt_mask, gold):
        scores = self.scores(S, Q).masked_fill(~src_mask[:, None, :], float("-inf"))
        context = torch.softmax(scores, -1) @ S
        h = torch.tanh(self.Wc(torch.cat([Q, context], -1)[tgt_mask]))
        return F.cross_entropy(self.O(h), gold, reduction="sum")

    def loss_eager(self, batch):
        total = 0
        for src, tgt in batch:
            S = self.enc(self.E_src(torch.tensor(src))[:, None])[0].transpose(0, 1)
            Q = self.dec(self.E_tgt(torch.tensor((D.BOS,) + tgt[:-1]))[:, None])[0].transpose(0, 1)
            ones = torch.ones(1, len(src), dtype=torch.bool)
            total = total + self.decode_loss(S, Q, ones, torch.ones(1, len(tgt), dtype=torch.bool),
                                             torch.tensor(tgt))
        return total

    def loss_batched(self, batch):
        src, src_len, src_mask = _pad([s for s, _ in batch])
        inp, tgt_len, tgt_mask = _pad([(D.BOS,) + t[:-1] for _, t in batch])
        S = pad_packed_sequence(self.enc(pack_padded_sequence(
            self.E_src(src), src_len, enforce_sorted=False))[0])[0].transpose(0, 1)
        Q = pad_packed_sequence(self.dec(pack_padded_sequence(
            self.E_tgt(inp), tgt_len, enforce_sorted=False))[0])[0].transpose(0, 1)
        gold = torch.tensor([w for _, t in batch for w in t])
        return self.decode_loss(S, Q, src_mask, tgt_mask, gold)


class NMTDot(NMTAttention):
    def build_attention(self):
        pass

    def scores(self, S, Q):
        return Q @ S.transpose(1, 2)


# ---------------------------------------------------------------------- BiRNN --

class BiRNN(TorchTask):
    vocab = 20000

    def build(self):
        H = self.H
        self.E = nn.Embedding(self.vocab, H, sparse=True)
        self.rnn = nn.RNN(H, H, bidirectional=True)
        self.O = nn.Linear(2 * H, D.N_TAGS)

    def loss_eager(self, batch):
        return sum(F.cross_entropy(self.O(self.rnn(self.E(torch.tensor(w))[:, None])[0][:, 0]),
                                   torch.tensor(t), reduction="sum") for w, t in batch)

    def loss_batched(self, batch):
        words, lengths, mask = _pad([w for w, _ in batch])
        out = pad_packed_sequence(self.rnn(pack_padded_sequence(
            self.E(words), lengths, enforce_sorted=False))[0])[0]
        tags = torch.tensor([t for _, ts in batch for t in ts])
        return F.cross_entropy(self.O(out.transpose(0, 1)[mask]), tags, reduction="sum")


CLASSES = {"treegru": TreeGRU, "mvrnn": MVRNN, "typed-treenn": TypedTreeNN,
           "lattice-lstm": LatticeLSTM, "lattice-gru": LatticeGRU,
           "nmt-attention": NMTAttention, "nmt-dot": NMTDot, "birnn": BiRNN}
