"""The model of the DyNet file fixtures (tests/data/dynet_model), built here as
tests/data/make_dynet_model_fixture.py builds it in DyNet, and the files made here for
DyNet to read (tests/data/check_dynet_loads_ours.py checks them with dynet38):

    python tests/support/dynet_files.py        # rewrites tests/data/dynet_model/ours*
"""
import os
import sys

import numpy as np

import autobatch as dy

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "dynet_model")


class OneLayerMLP:
    """DyNet's saving tutorial's user-defined savable type, here. Registered under the
    name of the DyNet program's class (tests/data/make_dynet_model_fixture.py), so that
    files name the class DyNet's load finds there; and under "__main__:OneLayerMLP",
    the name DyNet's fixture (made by running that script) stores."""

    def __init__(self, model, num_input, num_hidden, num_out, act=dy.tanh):
        pc = model.add_subcollection()
        self.W1 = pc.add_parameters((num_hidden, num_input))
        self.W2 = pc.add_parameters((num_out, num_hidden))
        self.b1 = pc.add_parameters((num_hidden))
        self.b2 = pc.add_parameters((num_out))
        self.pc = pc
        self.act = act
        self.spec = (num_input, num_hidden, num_out, act)

    def __call__(self, input_exp):
        W1, W2, b1, b2 = (p.expr() for p in (self.W1, self.W2, self.b1, self.b2))
        return dy.softmax(W2 * self.act(W1 * input_exp + b1) + b2)

    def param_collection(self):
        return self.pc

    @staticmethod
    def from_spec(spec, model):
        num_input, num_hidden, num_out, act = spec
        return OneLayerMLP(model, num_input, num_hidden, num_out, act)


dy.register_savable(OneLayerMLP, name="make_dynet_model_fixture:OneLayerMLP")
dy.register_savable(OneLayerMLP, name="__main__:OneLayerMLP")


class Vocabulary:
    """tests/data/make_dynet_tagger_fixture.py's vocabulary, here: an instance in a spec, saved as
    its plain data (its __dict__) and rebuilt from it."""

    def __init__(self, words):
        self.i2w = list(words)
        self.w2i = {w: i for i, w in enumerate(words)}


class Tagger:
    """tests/data/make_dynet_tagger_fixture.py's tagger, whose spec holds its Vocabulary."""

    def __init__(self, model, vocab, dim):
        self.pc = model.add_subcollection("tagger")
        self.E = self.pc.add_lookup_parameters((len(vocab.i2w), dim))
        self.W = self.pc.add_parameters((2, dim))
        self.vocab = vocab
        self.spec = (vocab, dim)

    def param_collection(self):
        return self.pc

    @staticmethod
    def from_spec(spec, model):
        vocab, dim = spec
        return Tagger(model, vocab, dim)


# the names tests/data/make_dynet_tagger_fixture.py's classes have in its files (it runs as __main__)
dy.register_savable(Vocabulary, name="__main__:Vocabulary")
dy.register_savable(Tagger, name="__main__:Tagger")


def build(pc):
    W = pc.add_parameters((2, 3), name="W")
    b = pc.add_parameters(3, name="b")
    u = pc.add_parameters((2,))
    enc = pc.add_subcollection("enc")
    V = enc.add_parameters((2, 2), name="V")
    E = pc.add_lookup_parameters((4, 2), name="E")
    L = pc.add_lookup_parameters((3, 2, 2), name="L")
    return dict(W=W, b=b, u=u, V=V, E=E, L=L)


def builders(pc):
    return dict(
        vanilla=dy.VanillaLSTMBuilder(1, 2, 3, pc),
        gru=dy.GRUBuilder(1, 2, 3, pc),
        simple=dy.SimpleRNNBuilder(2, 2, 3, pc),
        coupled=dy.CoupledLSTMBuilder(1, 2, 3, pc),
        birnn=dy.BiRNNBuilder(1, 2, 4, pc, dy.VanillaLSTMBuilder),
    )


def run(name, builder, inputs):
    dy.renew_cg()
    xs = [dy.inputTensor(x) for x in inputs]
    outs = builder.transduce(xs) if name == "birnn" else builder.initial_state().transduce(xs)
    return np.stack([e.npvalue() for e in outs])


def make_ours(directory):
    """Files written here in DyNet's format, and what they hold and compute."""
    inputs = np.load(os.path.join(DATA, "dynet_expected.npz"))["inputs"]
    pc = dy.ParameterCollection(seed=11)
    p = build(pc)
    dy.renew_cg()
    dy.sum_elems(dy.transpose(p["W"].expr(True)) * dy.inputVector([1.0, 2.0])).backward()
    pc.save(os.path.join(directory, "ours.model"), format="dynet")
    p["V"].save(os.path.join(directory, "ours_v.model"), format="dynet")
    bs = builders(pc)
    dy.save(os.path.join(directory, "ours_saved"), [p["W"], p["E"]] + list(bs.values()),
            format="dynet")
    more = dict(compact=dy.CompactVanillaLSTMBuilder(1, 2, 3, pc),
                layer_norm=dy.VanillaLSTMBuilder(1, 2, 3, pc, ln_lstm=True))
    dy.save(os.path.join(directory, "ours_saved2"), list(more.values()), format="dynet")
    E = pc.add_lookup_parameters((100, 10))
    mlp = OneLayerMLP(pc, 10, 20, 4, dy.rectify)
    dy.save(os.path.join(directory, "ours_mlp"), [mlp, E], format="dynet")
    tagger = Tagger(dy.ParameterCollection(), Vocabulary(["<unk>", "the", "cat", "sat"]), 3)
    tagger.E.set_value(np.arange(12, dtype=np.float32).reshape(4, 3))
    tagger.W.set_value(np.zeros((2, 3)))
    dy.save(os.path.join(directory, "ours_tagger"), [tagger], format="dynet")
    expected = {f"value_{k}": v.as_array() for k, v in p.items()}
    expected["grad_W"] = p["W"].grad_as_array()
    for name, builder in list(bs.items()) + list(more.items()):
        expected[f"out_{name}"] = run(name, builder, inputs)
    dy.renew_cg()
    expected["out_mlp"] = mlp(E[3]).npvalue()
    np.savez(os.path.join(directory, "ours_expected.npz"), inputs=inputs, **expected)
    return ["ours.model", "ours_v.model", "ours_saved.meta", "ours_saved.data",
            "ours_saved2.meta", "ours_saved2.data", "ours_mlp.meta", "ours_mlp.data",
            "ours_tagger.meta", "ours_tagger.data"]


if __name__ == "__main__":
    print("wrote", make_ours(DATA), file=sys.stderr)
