"""Programs that grow a graph's node array past many reallocations through every kind
of call that appends a node while an op is being built; the child process of
api/test_node_array_growth.py. `python node_growth_programs.py NAME` runs one and
prints its values (one line each), which the test compares between a plain run and a
run with AUTOBATCH_DEBUG_MOVE_ARRAYS=1 (the node array moves on every append)."""
import sys

import numpy as np

import autobatch as dy


def slices():
    """The minimal-span-parser pattern: x[:48] of one input, 20,000 times in one graph,
    and every other form of indexing (ranges, strides, tuples, the batch)."""
    x = dy.inputVector([float(i) for i in range(96)])
    for _ in range(20000):
        y = x[:48]
    print(y.npvalue().sum())
    m = dy.inputTensor(np.arange(24, dtype=float).reshape(4, 6, order="F"))
    b = dy.inputTensor(np.arange(24, dtype=float).reshape(4, 3, 2), batched=True)
    outs = []
    for _ in range(300):
        outs += [m[1:3], m[:, 2:5], m[1, 2], m[::2, 1], m[-1], b[1:3, 1, 0], b[:, :, 1:2]]
    for e in outs[-7:]:
        print(np.round(e.npvalue(), 4).tolist())


def first_use_of_parameters():
    """Ops whose later arguments are Parameters used for the first time in the graph:
    checking them appends their nodes while the op holds its earlier arguments. A new
    graph for each round, so that every use is a first use."""
    pc = dy.ParameterCollection()
    dy.reset_random_seed(1)
    W = pc.add_parameters((5, 5), init=dy.NormalInitializer(0, 1))
    v = pc.add_parameters((5,), init=dy.NormalInitializer(0, 1))
    F = pc.add_parameters((2, 2, 1, 3), init=dy.NormalInitializer(0, 1))
    fb = pc.add_parameters((3,), init=dy.NormalInitializer(0, 1))
    col = pc.add_parameters((5, 1), init=dy.NormalInitializer(0, 1))
    image = lambda: dy.inputTensor(np.arange(12, dtype=float).reshape(3, 4))
    ops = [lambda x: dy.cmult(x, v), lambda x: dy.transpose(x) * v, lambda x: x + v,
           lambda x: x - v, lambda x: dy.cdiv(x, v), lambda x: W * x,
           lambda x: dy.dot_product(x, v), lambda x: dy.squared_distance(x, v),
           lambda x: dy.l1_distance(x, v), lambda x: dy.pairwise_rank_loss(x, v),
           lambda x: dy.colwise_add(dy.reshape(x, (5, 1)), col), lambda x: dy.layer_norm(x, v, v),
           lambda x: dy.conv2d_bias(image(), F, fb, (1, 1)), lambda x: dy.circ_conv(x, v),
           lambda x: dy.bmax(x, v), lambda x: dy.trace_of_product(x, v),
           lambda x: dy.filter1d_narrow(dy.reshape(x, (5, 1)), col),
           lambda x: dy.affine_transform([v, W, x]), lambda x: dy.concatenate([x, v])]
    for op in ops:
        dy.renew_cg()
        x = dy.inputVector([0.1 * i for i in range(5)])
        for _ in range(200):           # past a few reallocations before the op
            dy.tanh(x)
        print(np.round(op(x).npvalue(), 4).tolist())

def lstms():
    """The compiled path of VanillaLSTMBuilder.transduce (zeros, products and cells made
    in one call) and DyNet's vanilla_lstm_* functions, over long sequences."""
    pc = dy.ParameterCollection()
    dy.reset_random_seed(2)
    lstm = dy.VanillaLSTMBuilder(2, 4, 6, pc)
    Wx = pc.add_parameters((24, 4), init=dy.NormalInitializer(0, 0.3))
    Wh = pc.add_parameters((24, 6), init=dy.NormalInitializer(0, 0.3))
    b = pc.add_parameters((24,), init=dy.NormalInitializer(0, 0.3))
    dy.renew_cg()
    xs = [dy.inputVector([np.sin(t + k) for k in range(4)]) for t in range(400)]
    outs = lstm.initial_state().transduce(xs)
    h = c = dy.zeros(6)
    for x in xs:
        gates = dy.vanilla_lstm_gates(x, h, Wx, Wh, b)
        c = dy.vanilla_lstm_c(c, gates)
        h = dy.vanilla_lstm_h(c, gates)
    print(np.round(outs[-1].npvalue(), 4).tolist())
    print(np.round(h.npvalue(), 4).tolist())


if __name__ == "__main__":
    {"slices": slices, "first_use_of_parameters": first_use_of_parameters,
     "lstms": lstms}[sys.argv[1]]()
