"""The benchmark tasks as per-instance autobatch code, written as a user would: the
five standard tasks here, the other workloads of the autobatching literature in
``tree_tasks.py``, ``lattice_tasks.py`` and ``sequence_tasks.py``, and one registry of
task names (``TASKS``, ``make``).

Each task owns a ParameterCollection and has ``loss(instance)`` returning one
Expression per instance; the runner sums them, runs forward, backward and the
trainer update. ``flops(instance)`` counts the useful matrix-multiply FLOPs of a
training step on that instance: 2*rows*cols per matrix-vector product forward, and
three times that for forward + the two backward products (dx, dW).

Two variants (BENCHMARKS.md), chosen per model with ``variant=``:

- ``builder``: recurrent cells from our builders, the Tree-LSTM from ``TreeLSTMBuilder``
  (fused gate, cell and hidden nodes);
- ``ops``: every cell a DyNet user writes out is written with ops as a DyNet tutorial
  does (``dy.logistic(W * x + b)``, ``dy.cmult(i, u) + dy.cmult(f, c)``); LSTMs over
  sequences stay ``LSTMBuilder``, as DyNet users use ``dy.LSTMBuilder``.

What differs among the five: only the Tree-LSTM's leaf and internal-node compositions
(``TreeLSTM.leaf_ops``/``compose_ops``); among the other workloads, only the BiRNN's
cells (``sequence_tasks.BiRNN``). The other tasks' per-token and per-step layers
(the tagger's ``tanh(W[f;b]+b)``, the parser's relu MLP, every output layer) are plain
ops (``affine_transform``, ``tanh``, ``rectify``, ``pickneglogsoftmax``) in both
variants, and their LSTMs are builders in both, so for them the two variants build the
same graph.

The ops variant runs unchanged on DyNet: the DyNet baseline (``dynet_worker.py``)
calls ``use(dynet)`` so that ``dy`` below is DyNet, and passes ``seed=None`` (DyNet
seeds through ``dynet_config``). Nothing here may use ``dy`` at import time.
"""
import autobatch as dy
from autobatch.bench import data as D
from autobatch.bench import lattice_tasks, sequence_tasks, task_base, tree_tasks
from autobatch.bench.task_base import (  # noqa: F401
    VARIANTS,
    Task,
    count_leaves,
    lstm_flops,
    mv,
    set_lookup,
)

FAMILIES = (task_base, tree_tasks, lattice_tasks, sequence_tasks)


def use(module):
    """Run the model code of every task on `module` (``autobatch`` or ``dynet``)."""
    global dy
    dy = module
    for family in FAMILIES:
        family.use(module)


class Tagger(Task):
    """Word lookup -> forward and backward LSTM -> tanh(W[f;b]+b) -> 5-way softmax."""
    name = "tagger"
    vocab = 20000

    def build(self):
        H, pc = self.H, self.pc
        self.E = pc.add_lookup_parameters((self.vocab, H))
        self.fwd = dy.VanillaLSTMBuilder(1, H, H, pc)
        self.bwd = dy.VanillaLSTMBuilder(1, H, H, pc)
        self.W = pc.add_parameters((H, 2 * H))
        self.b = pc.add_parameters(H, init=0.0)
        self.O = pc.add_parameters((D.N_TAGS, H))
        self.bo = pc.add_parameters(D.N_TAGS, init=0.0)

    def embed(self, w):
        return self.E[w]

    def loss(self, inst):
        words, tags = inst
        xs = [self.embed(w) for w in words]
        fs = self.fwd.initial_state().transduce(xs)
        bs = self.bwd.initial_state().transduce(xs[::-1])[::-1]
        losses = []
        for f, b, t in zip(fs, bs, tags):
            h = dy.tanh(dy.affine_transform([self.b, self.W, dy.concatenate([f, b])]))
            losses.append(dy.pickneglogsoftmax(dy.affine_transform([self.bo, self.O, h]), t))
        return dy.esum(losses)

    def flops(self, inst):
        n, H = len(inst[0]), self.H
        return 2 * lstm_flops(n, H, H) + n * (mv(H, 2 * H) + mv(D.N_TAGS, H))


class TaggerChar(Tagger):
    """As the tagger; a word seen fewer than 5 times in the corpus is represented by a
    character BiLSTM (char dim 64, hidden H/2 each way, so its output has the word
    vector's size)."""
    name = "tagger-char"
    char_dim = 64

    def build(self):
        super().build()
        C = self.H // 2
        self.CE = self.pc.add_lookup_parameters((D.N_CHARS, self.char_dim))
        self.cfwd = dy.VanillaLSTMBuilder(1, self.char_dim, C, self.pc)
        self.cbwd = dy.VanillaLSTMBuilder(1, self.char_dim, C, self.pc)

    def embed(self, w):
        if not self.meta.rare[w]:
            return self.E[w]
        cs = [self.CE[c] for c in self.meta.spelling[w]]
        f = self.cfwd.initial_state().transduce(cs)[-1]
        b = self.cbwd.initial_state().transduce(cs[::-1])[-1]
        return dy.concatenate([f, b])

    def flops(self, inst):
        total = super().flops(inst)
        C = self.H // 2
        for w in inst[0]:
            if self.meta.rare[w]:
                total += 2 * lstm_flops(len(self.meta.spelling[w]), self.char_dim, C)
        return total


class TreeLSTM(Task):
    """Binary Tree-LSTM over a bracketed sentence, 5-way softmax loss at the root.

    builder: ``TreeLSTMBuilder`` (one stacked product and fused gate/cell/hidden nodes
    per tree node). ops: the same equations (Tai et al.) written out as the DyNet
    Tree-LSTM example does, one matrix and bias per gate: leaf i, o, u from the word
    vector; internal node i, f_left, f_right, o, u from [h_l; h_r]."""
    name = "treelstm"
    vocab = 20000
    LEAF_GATES = ("i", "o", "u")
    NODE_GATES = ("i", "fl", "fr", "o", "u")

    def build(self):
        H, pc = self.H, self.pc
        self.E = pc.add_lookup_parameters((self.vocab, H))
        if self.variant == "builder":
            self.tree = dy.TreeLSTMBuilder(H, H, pc)
        else:
            self.W_leaf = {g: pc.add_parameters((H, H)) for g in self.LEAF_GATES}
            self.b_leaf = {g: pc.add_parameters(H, init=0.0) for g in self.LEAF_GATES}
            self.U = {g: pc.add_parameters((H, 2 * H)) for g in self.NODE_GATES}
            self.b = {g: pc.add_parameters(H, init=0.0) for g in self.NODE_GATES}
        self.O = pc.add_parameters((D.N_TAGS, H))
        self.bo = pc.add_parameters(D.N_TAGS, init=0.0)

    # -- the ops variant: as a DyNet user writes it
    def leaf_ops(self, x):
        W, b = self.W_leaf, self.b_leaf
        i = dy.logistic(W["i"] * x + b["i"])
        o = dy.logistic(W["o"] * x + b["o"])
        u = dy.tanh(W["u"] * x + b["u"])
        c = dy.cmult(i, u)
        return dy.cmult(o, dy.tanh(c)), c

    def compose_ops(self, left, right):
        (h_l, c_l), (h_r, c_r) = left, right
        U, b = self.U, self.b
        x = dy.concatenate([h_l, h_r])
        i = dy.logistic(U["i"] * x + b["i"])
        f_l = dy.logistic(U["fl"] * x + b["fl"])
        f_r = dy.logistic(U["fr"] * x + b["fr"])
        o = dy.logistic(U["o"] * x + b["o"])
        u = dy.tanh(U["u"] * x + b["u"])
        c = dy.cmult(i, u) + dy.cmult(f_l, c_l) + dy.cmult(f_r, c_r)
        return dy.cmult(o, dy.tanh(c)), c

    def expr_for_tree_ops(self, tree):
        if isinstance(tree, tuple):
            return self.compose_ops(self.expr_for_tree_ops(tree[0]),
                                    self.expr_for_tree_ops(tree[1]))
        return self.leaf_ops(self.E[tree])

    def loss(self, inst):
        tree, label = inst
        if self.variant == "builder":
            h = self.tree.expr_for_tree(tree, lambda w: self.E[w]).h
        else:
            h = self.expr_for_tree_ops(tree)[0]
        return dy.pickneglogsoftmax(dy.affine_transform([self.bo, self.O, h]), label)

    def copy_builder_parameters(self, builder_task):
        """Give this ops-variant model the values of a builder-variant one (the gate
        rows of the builder's stacked matrices), so that both compute the same loss."""
        H, src = self.H, builder_task
        self.E.init_from_array(src.E.as_array())
        W, bl = src.tree.W_leaf.as_array(), src.tree.b_leaf.as_array()
        for k, g in enumerate(self.LEAF_GATES):
            self.W_leaf[g].set_value(W[k * H:(k + 1) * H])
            self.b_leaf[g].set_value(bl[k * H:(k + 1) * H])
        U, b = src.tree.U.as_array(), src.tree.b.as_array()
        for k, g in enumerate(self.NODE_GATES):
            self.U[g].set_value(U[k * H:(k + 1) * H])
            self.b[g].set_value(b[k * H:(k + 1) * H])
        self.O.set_value(src.O.as_array())
        self.bo.set_value(src.bo.as_array())

    def flops(self, inst):
        n, H = count_leaves(inst[0]), self.H
        return n * mv(3 * H, H) + (n - 1) * mv(5 * H, 2 * H) + mv(D.N_TAGS, H)


class Parser(Task):
    """Arc-standard parser trained on the static oracle: BiLSTM over the words; for
    each oracle step relu(W [h(s1); h(s0); h(b0)] + b) -> 3-way softmax. A learned
    pad vector stands for a missing position, a learned root vector for ROOT."""
    name = "parser"
    vocab = 20000

    def build(self):
        H, pc = self.H, self.pc
        self.E = pc.add_lookup_parameters((self.vocab, H))
        self.fwd = dy.VanillaLSTMBuilder(1, H, H, pc)
        self.bwd = dy.VanillaLSTMBuilder(1, H, H, pc)
        self.pad = pc.add_parameters(2 * H)
        self.root = pc.add_parameters(2 * H)
        self.W = pc.add_parameters((H, 6 * H))
        self.b = pc.add_parameters(H, init=0.0)
        self.O = pc.add_parameters((D.N_ACTIONS, H))
        self.bo = pc.add_parameters(D.N_ACTIONS, init=0.0)

    def loss(self, inst):
        words, oracle = inst
        xs = [self.E[w] for w in words]
        fs = self.fwd.initial_state().transduce(xs)
        bs = self.bwd.initial_state().transduce(xs[::-1])[::-1]
        # Parameters used as Expressions (DyNet 2 style). Not .expr(): in DyNet that is
        # a constant (update=False) and the pad and root vectors would not learn.
        pad, root = self.pad, self.root
        # position -1 = missing, 0 = ROOT, i = word i
        hs = [root] + [dy.concatenate([f, b]) for f, b in zip(fs, bs)]
        losses = []
        for action, s1, s0, b0 in oracle:
            feats = dy.concatenate([hs[i] if i >= 0 else pad for i in (s1, s0, b0)])
            h = dy.rectify(dy.affine_transform([self.b, self.W, feats]))
            losses.append(dy.pickneglogsoftmax(dy.affine_transform([self.bo, self.O, h]), action))
        return dy.esum(losses)

    def flops(self, inst):
        n, H = len(inst[0]), self.H
        return 2 * lstm_flops(n, H, H) + 2 * n * (mv(H, 6 * H) + mv(D.N_ACTIONS, H))


class LM(Task):
    """LSTM language model: reads <s> w1..w(n-1), 10,000-way softmax loss at every
    position."""
    name = "lm"
    vocab = 10000

    def build(self):
        H, pc = self.H, self.pc
        self.E = pc.add_lookup_parameters((self.vocab, H))
        self.rnn = dy.VanillaLSTMBuilder(1, H, H, pc)
        self.O = pc.add_parameters((self.vocab, H))
        self.bo = pc.add_parameters(self.vocab, init=0.0)

    def loss(self, inst):
        xs = [self.E[w] for w in (D.BOS,) + inst[:-1]]
        hs = self.rnn.initial_state().transduce(xs)
        return dy.esum([dy.pickneglogsoftmax(dy.affine_transform([self.bo, self.O, h]), w)
                        for h, w in zip(hs, inst)])

    def flops(self, inst):
        n, H = len(inst), self.H
        return lstm_flops(n, H, H) + n * mv(self.vocab, H)


STANDARD = (Tagger, TaggerChar, TreeLSTM, Parser, LM)
CLASSES = {c.name: c for c in STANDARD + tree_tasks.CLASSES + lattice_tasks.CLASSES
           + sequence_tasks.CLASSES}
TASKS = tuple(CLASSES)
# names for sets of tasks on the command line (--task standard,literature)
GROUPS = {"standard": tuple(c.name for c in STANDARD),
          "literature": tuple(c.name for c in tree_tasks.CLASSES + lattice_tasks.CLASSES
                              + sequence_tasks.CLASSES)}


def expand(names):
    """Task names with the group names among them replaced by their tasks, in order,
    each once."""
    out = []
    for name in names:
        out += [t for t in GROUPS.get(name, (name,)) if t not in out]
    return out


def make(task, hidden=256, seed=0, meta=None, variant="builder"):
    if task not in CLASSES:
        raise ValueError(f"unknown task {task!r} (choose from {', '.join(TASKS)})")
    return CLASSES[task](hidden, seed, meta, variant)
