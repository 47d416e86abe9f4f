"""DyNet's static-graph xor example (examples/python/xor.py, DyNet's tutorial style):
the graph is built once on vecInput/scalarInput, and every step only set()s the
inputs, reads the loss and trains. Its losses and final parameters.

Run as `python dynet_xor_static.py out.npz` with DyNet installed to record DyNet's
numbers (tests/data/dynet_xor_static.npz); the test runs it with `import autobatch as dy`.
"""
import sys

import numpy as np

rng = np.random.default_rng(5)
W0 = rng.uniform(-0.5, 0.5, (8, 2))
V0 = rng.uniform(-0.5, 0.5, (1, 8))
B0 = rng.uniform(-0.1, 0.1, 8)


def run(dy, iterations=30):
    m = dy.ParameterCollection()
    W = m.add_parameters((8, 2), init=dy.NumpyInitializer(W0))
    V = m.add_parameters((1, 8), init=dy.NumpyInitializer(V0))
    b = m.add_parameters(8, init=dy.NumpyInitializer(B0))
    trainer = dy.SimpleSGDTrainer(m, 0.2)
    dy.renew_cg()
    x = dy.vecInput(2)
    y = dy.scalarInput(0)
    h = dy.tanh((W * x) + b)
    y_pred = dy.logistic(V * h)
    loss = dy.binary_log_loss(y_pred, y)
    losses = []
    for _ in range(iterations):
        total = 0.0
        for mi in range(4):
            x1, x2 = mi % 2, (mi // 2) % 2
            x.set([1.0 if x1 else -1.0, 1.0 if x2 else -1.0])
            y.set(1.0 if x1 != x2 else 0.0)
            total += loss.scalar_value()
            loss.backward()
            trainer.update()
        losses.append(total / 4)
    x.set([1.0, -1.0])
    return {"losses": np.array(losses), "W": W.as_array(), "V": V.as_array(), "b": b.as_array(),
            "pred": np.array(y_pred.value())}


if __name__ == "__main__":
    import dynet
    np.savez(sys.argv[1], **run(dynet))
