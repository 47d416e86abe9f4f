"""Tree workloads of the autobatching literature (ED-Batch, ACRoBat): Tree-GRU, MV-RNN
and the double-typed TreeNN, on binary trees with a 5-way softmax loss at the root, as
per-instance code written with ops as a DyNet tutorial writes them.

There is no builder for these cells, so the ``builder`` and ``ops`` variants build the
same graph (as the tagger's do). Like ``tasks.py``, nothing here uses ``dy`` at import
time: ``tasks.use(dynet)`` rebinds it and the code runs unchanged on DyNet. A GRU's
``z*h + (1-z)*c`` is written ``c + z*(h - c)`` (the same numbers, and DyNet 2.2's Python
cannot compute ``1 - expression``).
"""
import numpy as np

import autobatch as dy
from autobatch.bench import data as D
from autobatch.bench.task_base import Task, count_leaves, mv, set_lookup


def use(module):
    global dy
    dy = module


def gru_mix(z, h, c):
    """z*h + (1-z)*c."""
    return c + dy.cmult(z, h - c)


class TreeGRU(Task):
    """Binary Tree-GRU (ED-Batch's tree_gru). Leaf from the word vector x:
    r, z = logistic(U x + b); c = tanh(U_c (r*x) + b_c); h = z*x + (1-z)*c. Internal
    node from h_l, h_r: a reset and an update gate per child (one matrix each), a
    candidate per child, h = (z_l h_l + (1-z_l) c_l + z_r h_r + (1-z_r) c_r) / 2; the
    biases are the leaf's."""
    name = "treegru"
    vocab = 20000
    LEAF = ("r", "z", "c")
    NODE = ("r_l", "r_r", "z_l", "z_r", "c_l", "c_r")

    def build(self):
        H, pc = self.H, self.pc
        self.E = pc.add_lookup_parameters((self.vocab, H))
        self.U = {g: pc.add_parameters((H, H)) for g in self.LEAF + self.NODE}
        self.b = {g: pc.add_parameters(H, init=0.0) for g in self.LEAF}
        self.O = pc.add_parameters((D.N_TAGS, H))
        self.bo = pc.add_parameters(D.N_TAGS, init=0.0)

    def leaf(self, x):
        U, b = self.U, self.b
        r = dy.logistic(dy.affine_transform([b["r"], U["r"], x]))
        z = dy.logistic(dy.affine_transform([b["z"], U["z"], x]))
        c = dy.tanh(dy.affine_transform([b["c"], U["c"], dy.cmult(r, x)]))
        return gru_mix(z, x, c)

    def child(self, h, side):
        U, b = self.U, self.b
        r = dy.logistic(dy.affine_transform([b["r"], U["r_" + side], h]))
        z = dy.logistic(dy.affine_transform([b["z"], U["z_" + side], h]))
        c = dy.tanh(dy.affine_transform([b["c"], U["c_" + side], dy.cmult(r, h)]))
        return gru_mix(z, h, c)

    def encode(self, tree):
        if isinstance(tree, tuple):
            left = self.child(self.encode(tree[0]), "l")
            right = self.child(self.encode(tree[1]), "r")
            return (left + right) * 0.5
        return self.leaf(self.E[tree])

    def loss(self, inst):
        tree, label = inst
        return dy.pickneglogsoftmax(dy.affine_transform([self.bo, self.O, self.encode(tree)]), label)

    def flops(self, inst):
        n, H = count_leaves(inst[0]), self.H
        return n * 3 * mv(H, H) + (n - 1) * 6 * mv(H, H) + mv(D.N_TAGS, H)


class MVRNN(Task):
    """Matrix-vector RNN (Socher et al. 2012; ED-Batch's mvrnn): every word has a vector
    a and a matrix A (H x H, from a vocabulary of 256 as in ED-Batch); (a, A) and (b, B)
    compose into (tanh(W [B a; A b] + w), W_M [A; B]). The word matrices start as the
    identity plus noise and W_M as [I I]/2 plus noise (Socher et al.), so that the
    composed matrices stay near the identity along a tree instead of blowing up."""
    name = "mvrnn"
    vocab = 256

    def build(self):
        H, pc = self.H, self.pc
        self.V = pc.add_lookup_parameters((self.vocab, H))
        self.M = pc.add_lookup_parameters((self.vocab, H, H))
        self.W = pc.add_parameters((H, 2 * H))
        self.w = pc.add_parameters(H, init=0.0)
        self.WM = pc.add_parameters((H, 2 * H))
        rng = np.random.default_rng(H)
        eye = np.eye(H, dtype=np.float32)
        set_lookup(self.M, eye + rng.normal(0, 0.01, (self.vocab, H, H)).astype(np.float32))
        self.WM.set_value(np.hstack([eye, eye]) / 2 + rng.normal(0, 0.01, (H, 2 * H)).astype(np.float32))
        self.O = pc.add_parameters((D.N_TAGS, H))
        self.bo = pc.add_parameters(D.N_TAGS, init=0.0)

    def compose(self, left, right):
        (a, A), (b, B) = left, right
        v = dy.tanh(dy.affine_transform([self.w, self.W, dy.concatenate([B * a, A * b])]))
        return v, self.WM * dy.concatenate([A, B])

    def encode(self, tree):
        if isinstance(tree, tuple):
            return self.compose(self.encode(tree[0]), self.encode(tree[1]))
        return self.V[tree], self.M[tree]

    def loss(self, inst):
        tree, label = inst
        v, _ = self.encode(tree)
        return dy.pickneglogsoftmax(dy.affine_transform([self.bo, self.O, v]), label)

    def flops(self, inst):
        n, H = count_leaves(inst[0]), self.H
        # two matrix-vector products, W, and W_M [A; B]: H x 2H times 2H x H
        return (n - 1) * (2 * mv(H, H) + mv(H, 2 * H) + H * mv(H, 2 * H)) + mv(D.N_TAGS, H)


class TypedTreeNN(Task):
    """ED-Batch's double-typed TreeNN: a Tree-LSTM whose internal nodes use one of two
    compositions (their own matrices and biases) chosen by the node's type. Leaf: i, o,
    u from the word vector; internal node: i, o, u from [h_l; h_r], a forget gate per
    child from that child's h, c = i*u + f_l*c_l + f_r*c_r, h = o*tanh(c)."""
    name = "typed-treenn"
    vocab = 20000
    LEAF = ("i", "o", "u")
    NODE = ("i", "o", "u")

    def build(self):
        H, pc = self.H, self.pc
        self.E = pc.add_lookup_parameters((self.vocab, H))
        self.W_leaf = {g: pc.add_parameters((H, H)) for g in self.LEAF}
        self.b_leaf = {g: pc.add_parameters(H, init=0.0) for g in self.LEAF}
        self.types = [self.composition() for _ in range(D.N_NODE_TYPES)]
        self.O = pc.add_parameters((D.N_TAGS, H))
        self.bo = pc.add_parameters(D.N_TAGS, init=0.0)

    def composition(self):
        H, pc = self.H, self.pc
        U = {g: pc.add_parameters((H, 2 * H)) for g in self.NODE}
        U.update({f: pc.add_parameters((H, H)) for f in ("f_l", "f_r")})
        b = {g: pc.add_parameters(H, init=0.0) for g in self.NODE + ("f",)}
        return U, b

    def leaf(self, x):
        W, b = self.W_leaf, self.b_leaf
        i = dy.logistic(dy.affine_transform([b["i"], W["i"], x]))
        o = dy.logistic(dy.affine_transform([b["o"], W["o"], x]))
        u = dy.tanh(dy.affine_transform([b["u"], W["u"], x]))
        c = dy.cmult(i, u)
        return dy.cmult(o, dy.tanh(c)), c

    def compose(self, kind, left, right):
        (h_l, c_l), (h_r, c_r) = left, right
        U, b = self.types[kind]
        x = dy.concatenate([h_l, h_r])
        i = dy.logistic(dy.affine_transform([b["i"], U["i"], x]))
        o = dy.logistic(dy.affine_transform([b["o"], U["o"], x]))
        u = dy.tanh(dy.affine_transform([b["u"], U["u"], x]))
        f_l = dy.logistic(dy.affine_transform([b["f"], U["f_l"], h_l]))
        f_r = dy.logistic(dy.affine_transform([b["f"], U["f_r"], h_r]))
        c = dy.cmult(i, u) + dy.cmult(f_l, c_l) + dy.cmult(f_r, c_r)
        return dy.cmult(o, dy.tanh(c)), c

    def encode(self, tree):
        if isinstance(tree, tuple):
            kind, left, right = tree
            return self.compose(kind, self.encode(left), self.encode(right))
        return self.leaf(self.E[tree])

    def loss(self, inst):
        tree, label = inst
        h, _ = self.encode(tree)
        return dy.pickneglogsoftmax(dy.affine_transform([self.bo, self.O, h]), label)

    def flops(self, inst):
        n, H = len(D.leaves(inst[0])), self.H
        return n * 3 * mv(H, H) + (n - 1) * (3 * mv(H, 2 * H) + 2 * mv(H, H)) + mv(D.N_TAGS, H)


CLASSES = (TreeGRU, MVRNN, TypedTreeNN)
