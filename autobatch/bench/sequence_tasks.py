"""Sequence workloads of the autobatching literature beyond the five standard tasks:
LSTM NMT with attention (encoder BiLSTM, decoder LSTM, MLP or dot attention over the
encoder states) and the BiRNN tagger (ACRoBat's BiRNN: Elman cells both ways).

The LSTMs are builders in both variants (as DyNet users use ``dy.LSTMBuilder``); the
attention and output layers are ops in both, so the NMT variants build the same graph.
The BiRNN's cell is ``SimpleRNNBuilder`` in the builder variant and written out,
``tanh(W_x x + W_h h + b)``, in the ops variant: the same math, parameters created in
the same order (so one seed gives both the same values). Nothing here uses ``dy`` at
import time (``tasks.use(dynet)``).
"""
import autobatch as dy
from autobatch.bench import data as D
from autobatch.bench.task_base import Task, lstm_flops, mv


def use(module):
    global dy
    dy = module


class NMTAttention(Task):
    """Encoder: source lookup (vocab 10,000, dim H) -> BiLSTM (H/2 each way), the
    states as the columns of an H x n matrix S. Decoder: an LSTM (H) reads <s> y1 ..
    y(m-1); at step t its state s_t attends over S with MLP attention (Bahdanau):
    a = softmax(v^T tanh(W_1 S + W_2 s_t)), context S a; h~ = tanh(W_c [s_t; S a] + b_c)
    -> 10,000-way softmax loss for y_t."""
    name = "nmt-attention"
    vocab = 10000

    def build(self):
        H, pc = self.H, self.pc
        self.E_src = pc.add_lookup_parameters((self.vocab, H))
        self.E_tgt = pc.add_lookup_parameters((self.vocab, H))
        self.fwd = dy.VanillaLSTMBuilder(1, H, H // 2, pc)
        self.bwd = dy.VanillaLSTMBuilder(1, H, H // 2, pc)
        self.dec = dy.VanillaLSTMBuilder(1, H, H, pc)
        self.build_attention()
        self.Wc = pc.add_parameters((H, 2 * H))
        self.bc = pc.add_parameters(H, init=0.0)
        self.O = pc.add_parameters((self.vocab, H))
        self.bo = pc.add_parameters(self.vocab, init=0.0)

    def build_attention(self):
        H = self.H
        self.W1 = self.pc.add_parameters((H, H))
        self.W2 = self.pc.add_parameters((H, H))
        self.v = self.pc.add_parameters(H)

    def keys(self, S):
        """What the attention computes once per sentence from the encoder states."""
        return self.W1 * S

    def scores(self, S, keys, s):
        return dy.transpose(dy.tanh(dy.colwise_add(keys, self.W2 * s))) * self.v

    def encode(self, src):
        xs = [self.E_src[w] for w in src]
        fs = self.fwd.initial_state().transduce(xs)
        bs = self.bwd.initial_state().transduce(xs[::-1])[::-1]
        return dy.concatenate_cols([dy.concatenate([f, b]) for f, b in zip(fs, bs)])

    def loss(self, inst):
        src, tgt = inst
        S = self.encode(src)
        keys = self.keys(S)
        states = self.dec.initial_state().transduce([self.E_tgt[w] for w in (D.BOS,) + tgt[:-1]])
        losses = []
        for s, y in zip(states, tgt):
            context = S * dy.softmax(self.scores(S, keys, s))
            h = dy.tanh(dy.affine_transform([self.bc, self.Wc, dy.concatenate([s, context])]))
            losses.append(dy.pickneglogsoftmax(dy.affine_transform([self.bo, self.O, h]), y))
        return dy.esum(losses)

    def attention_flops(self, n, m):
        H = self.H
        return n * mv(H, H) + m * (mv(H, H) + mv(n, H) + mv(H, n))

    def flops(self, inst):
        (n, m), H = map(len, inst), self.H
        return (2 * lstm_flops(n, H, H // 2) + lstm_flops(m, H, H) + self.attention_flops(n, m)
                + m * (mv(H, 2 * H) + mv(self.vocab, H)))


class NMTDot(NMTAttention):
    """As nmt-attention, with dot attention (Luong): a = softmax(S^T s_t)."""
    name = "nmt-dot"

    def build_attention(self):
        pass

    def keys(self, S):
        return None

    def scores(self, S, keys, s):
        return dy.transpose(S) * s

    def attention_flops(self, n, m):
        return m * (mv(n, self.H) + mv(self.H, n))


class BiRNN(Task):
    """Word lookup (vocab 20,000, dim H) -> forward and backward Elman RNN (H,
    h = tanh(W_x x + W_h h + b)) -> O [f; b] + b_o -> 5-way softmax, on the tagger's
    corpus."""
    name = "birnn"
    vocab = 20000

    def build(self):
        H, pc = self.H, self.pc
        self.E = pc.add_lookup_parameters((self.vocab, H))
        if self.variant == "builder":
            self.fwd = dy.SimpleRNNBuilder(1, H, H, pc)
            self.bwd = dy.SimpleRNNBuilder(1, H, H, pc)
        else:               # the builder's parameters, in its order: W_x, W_h, b
            self.cells = [(pc.add_parameters((H, H)), pc.add_parameters((H, H)),
                           pc.add_parameters(H, init=0.0)) for _ in range(2)]
        self.O = pc.add_parameters((D.N_TAGS, 2 * H))
        self.bo = pc.add_parameters(D.N_TAGS, init=0.0)

    def run(self, direction, xs):
        if self.variant == "builder":
            return (self.fwd, self.bwd)[direction].initial_state().transduce(xs)
        Wx, Wh, b = self.cells[direction]
        hs = [dy.tanh(dy.affine_transform([b, Wx, xs[0]]))]
        for x in xs[1:]:
            hs.append(dy.tanh(dy.affine_transform([b, Wx, x, Wh, hs[-1]])))
        return hs

    def loss(self, inst):
        words, tags = inst
        xs = [self.E[w] for w in words]
        fs = self.run(0, xs)
        bs = self.run(1, xs[::-1])[::-1]
        return dy.esum([dy.pickneglogsoftmax(
            dy.affine_transform([self.bo, self.O, dy.concatenate([f, b])]), t)
            for f, b, t in zip(fs, bs, tags)])

    def flops(self, inst):
        n, H = len(inst[0]), self.H
        return 2 * (n * mv(H, H) + max(n - 1, 0) * mv(H, H)) + n * mv(D.N_TAGS, 2 * H)


CLASSES = (NMTAttention, NMTDot, BiRNN)
