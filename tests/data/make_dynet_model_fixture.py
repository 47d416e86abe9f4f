"""Writes tests/data/dynet_model/: model files made by DyNet (dynet38) and what DyNet
computes with them, for tests/io/test_dynet_files.py. Run with DyNet installed:

    /work/venv-dynet/bin/python tests/data/make_dynet_model_fixture.py

- dynet.model: `pc.save` of the collection `build(pc)` makes (after one backward, so W
  has a gradient: a FULL_GRAD record); dynet_key.model: the same under the key /key/;
  dynet_enc.model: `enc.save` of its subcollection;
- dynet_saved.meta / .data: `dy.save` of Parameters, LookupParameters and builders;
  dynet_saved2: a CompactVanillaLSTMBuilder and a layer-normalised VanillaLSTMBuilder;
  dynet_mlp: the saving tutorial's user-defined OneLayerMLP (pickled as
  __main__.OneLayerMLP, with _dynet.rectify in its spec) and a lookup table;
- dynet_expected.npz: every parameter's values (as_array), W's gradient, and the
  outputs of each builder on fixed inputs.
"""
import os
import sys

import numpy as np

import dynet as dy

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynet_model")
INPUTS = np.array([[0.5, -1.0], [0.25, 0.75], [-0.5, 0.1]], dtype=np.float32)   # 3 steps of dim 2


class OneLayerMLP(object):
    """The user-defined savable type of DyNet's saving tutorial
    (doc/source/python_saving_tutorial.rst), as written there."""

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
        g = self.act
        return dy.softmax(self.W2 * g(self.W1 * input_exp + self.b1) + self.b2)

    def param_collection(self):
        return self.pc

    @staticmethod
    def from_spec(spec, model):
        num_input, num_hidden, num_out, act = spec
        return OneLayerMLP(model, num_input, num_hidden, num_out, act)


def build(pc):
    """The collection of the fixture (the tests build the same one, in the same order)."""
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


def run(builder):
    """Outputs of a builder on INPUTS (BiRNN: the concatenated top states)."""
    dy.renew_cg()
    xs = [dy.inputTensor(x) for x in INPUTS]
    if isinstance(builder, dy.BiRNNBuilder):
        return np.stack([e.npvalue() for e in builder.transduce(xs)])
    return np.stack([e.npvalue() for e in builder.initial_state().transduce(xs)])


def main():
    os.makedirs(HERE, exist_ok=True)
    dy.reset_random_seed(7)
    pc = dy.ParameterCollection()
    p = build(pc)
    dy.renew_cg()
    loss = dy.sum_elems(dy.transpose(p["W"]) * dy.inputVector([1.0, 2.0]))
    loss.backward()                 # W's gradient is not zero: DyNet stores it (FULL_GRAD)
    pc.save(os.path.join(HERE, "dynet.model"))
    pc.save(os.path.join(HERE, "dynet_key.model"), "/key/")
    p["V"].save(os.path.join(HERE, "dynet_v.model"))            # a Parameters alone
    p["E"].save(os.path.join(HERE, "dynet_e.model"), "/emb")    # a LookupParameters, keyed
    expected = {f"value_{k}": v.as_array() for k, v in p.items()}
    expected["grad_W"] = p["W"].grad_as_array()

    pc2 = dy.ParameterCollection()
    q = build(pc2)
    pc2.populate(os.path.join(HERE, "dynet.model"))          # the same values as pc
    bs = builders(pc2)
    dy.save(os.path.join(HERE, "dynet_saved"), [q["W"], q["E"]] + list(bs.values()))
    for name, builder in bs.items():
        expected[f"out_{name}"] = run(builder)
    pc3 = dy.ParameterCollection()
    compact = dy.CompactVanillaLSTMBuilder(1, 2, 3, pc3)
    layer_norm = dy.VanillaLSTMBuilder(1, 2, 3, pc3, True)
    dy.save(os.path.join(HERE, "dynet_saved2"), [compact, layer_norm])
    expected["out_compact"] = run(compact)
    expected["out_layer_norm"] = run(layer_norm)
    pc4 = dy.ParameterCollection()
    E = pc4.add_lookup_parameters((100, 10))               # the tutorial has 1000 rows
    mlp = OneLayerMLP(pc4, 10, 20, 4, dy.rectify)
    dy.save(os.path.join(HERE, "dynet_mlp"), [mlp, E])      # the tutorial's example
    dy.renew_cg()
    expected["out_mlp"] = mlp(E[3]).npvalue()
    np.savez(os.path.join(HERE, "dynet_expected.npz"), inputs=INPUTS, **expected)
    print("wrote", sorted(os.listdir(HERE)), file=sys.stderr)


if __name__ == "__main__":
    main()
