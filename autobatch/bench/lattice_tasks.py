"""Lattice LSTM and lattice GRU (Zhang & Yang 2018, as ED-Batch's lattice_lstm and
lattice_gru write them): a character sequence 0..n whose nodes are the positions
between characters, with an arc from node e-1 to node e for character e and one from
node s to node e for every lexicon word spelled by characters s+1..e
(``data.lattice_instances``). Every arc runs a recurrent cell from the state of the
node it leaves, with the arc's input (the character's or the word's vector) and the
parameters of its kind (character cells and word cells have their own); a node's state
is the mean of the states its arcs bring. ED-Batch sums them, which makes the states
grow along the lattice (losses in the millions after one SGD step); Zhang & Yang weigh
the cells with input gates normalised to sum to one, of which the mean is the uniform
case, bounded as theirs is. Node 0's state is learned. Every
character has a 5-way tag loss.

No builder runs a cell on a lattice, so the ``builder`` and ``ops`` variants build the
same graph; nothing here uses ``dy`` at import time (``tasks.use(dynet)``).
"""
import autobatch as dy
from autobatch.bench import data as D
from autobatch.bench.task_base import Task, mv


def use(module):
    global dy
    dy = module


def arcs(inst):
    """(source node, target node, is_word, input id) of every arc, by target node."""
    chars, _, words = inst
    by_end = {}
    for start, end, k in words:
        by_end.setdefault(end, []).append((start, end, True, k))
    out = []
    for e in range(1, len(chars) + 1):
        out.append((e - 1, e, False, chars[e - 1]))
        out += by_end.get(e, [])
    return out


class LatticeTask(Task):
    """What both lattice models share: the tables, the output layer, the walk over
    the nodes in order; `cell(kind, x, state)` is the recurrent cell."""
    GATES = ()
    products_per_arc = 0

    def build(self):
        H, pc = self.H, self.pc
        self.E_char = pc.add_lookup_parameters((D.N_LATTICE_CHARS, H))
        self.E_word = pc.add_lookup_parameters((D.LEXICON_SIZE, H))
        # per kind (0 character, 1 word): input and state matrices and a bias per gate
        self.kinds = [({g: pc.add_parameters((H, H)) for g in self.GATES},
                       {g: pc.add_parameters((H, H)) for g in self.GATES},
                       {g: pc.add_parameters(H, init=0.0) for g in self.GATES})
                      for _ in range(2)]
        self.start = self.initial_state()
        self.O = pc.add_parameters((D.N_TAGS, self.H))
        self.bo = pc.add_parameters(D.N_TAGS, init=0.0)

    def loss(self, inst):
        _, tags, _ = inst
        incoming = [[] for _ in range(len(tags) + 1)]
        states = [self.start]
        for source, target, is_word, k in arcs(inst):
            while len(states) < target:                  # every arc into it is done
                states.append(self.merge(incoming[len(states)]))
            x = self.E_word[k] if is_word else self.E_char[k]
            incoming[target].append(self.cell(int(is_word), x, states[source]))
        states.append(self.merge(incoming[len(tags)]))
        return dy.esum([dy.pickneglogsoftmax(dy.affine_transform([self.bo, self.O, self.hidden(s)]), t)
                        for s, t in zip(states[1:], tags)])

    def flops(self, inst):
        chars, _, words = inst
        H = self.H
        return (len(chars) + len(words)) * self.products_per_arc * mv(H, H) \
            + len(chars) * mv(D.N_TAGS, H)


class LatticeLSTM(LatticeTask):
    """Every arc an LSTM cell: f, i, o, u from (x, h_in), c = i*u + f*c_in,
    h = o*tanh(c); a node's (h, c) is the mean of its arcs'."""
    name = "lattice-lstm"
    GATES = ("f", "i", "o", "u")
    products_per_arc = 8

    def initial_state(self):
        return (self.pc.add_parameters(self.H), self.pc.add_parameters(self.H))

    def cell(self, kind, x, state):
        h, c = state
        U, W, b = self.kinds[kind]
        f = dy.logistic(dy.affine_transform([b["f"], U["f"], x, W["f"], h]))
        i = dy.logistic(dy.affine_transform([b["i"], U["i"], x, W["i"], h]))
        o = dy.logistic(dy.affine_transform([b["o"], U["o"], x, W["o"], h]))
        u = dy.tanh(dy.affine_transform([b["u"], U["u"], x, W["u"], h]))
        c = dy.cmult(i, u) + dy.cmult(f, c)
        return dy.cmult(o, dy.tanh(c)), c

    @staticmethod
    def merge(states):
        if len(states) == 1:
            return states[0]
        return dy.average([h for h, _ in states]), dy.average([c for _, c in states])

    @staticmethod
    def hidden(state):
        return state[0]


class LatticeGRU(LatticeTask):
    """Every arc a GRU cell: r, z from (x, h_in), u = tanh(U x + W (r*h_in) + b),
    h = z*h_in + (1-z)*u (written u + z*(h_in - u)); a node's h is the mean of its arcs'."""
    name = "lattice-gru"
    GATES = ("r", "z", "u")
    products_per_arc = 6

    def initial_state(self):
        return self.pc.add_parameters(self.H)

    def cell(self, kind, x, h):
        U, W, b = self.kinds[kind]
        r = dy.logistic(dy.affine_transform([b["r"], U["r"], x, W["r"], h]))
        z = dy.logistic(dy.affine_transform([b["z"], U["z"], x, W["z"], h]))
        u = dy.tanh(dy.affine_transform([b["u"], U["u"], x, W["u"], dy.cmult(r, h)]))
        return u + dy.cmult(z, h - u)

    @staticmethod
    def merge(states):
        return states[0] if len(states) == 1 else dy.average(states)

    @staticmethod
    def hidden(state):
        return state


CLASSES = (LatticeLSTM, LatticeGRU)
