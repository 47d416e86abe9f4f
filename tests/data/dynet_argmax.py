"""The cases of dynet_argmax.npz: DyNet's argmax (one-hot of the first largest element)
in both gradient modes, on vectors, ties and batches. Each case is (name,
f(dy, xs) -> Expression, inputs), run by dynet_ops_stats_losses.run: make_dynet_argmax_fixture.py
records DyNet's dims, value and input gradient; tests/ops/test_argmax.py compares."""
import numpy as np

V = np.array([0.3, -2.0, 1.5, 0.1, 1.2])
TIES = np.array([0.5, 2.0, -1.0, 2.0, 2.0])
B = np.array([[0.3, -2.0, 1.5, 0.1], [4.0, 4.0, 0.0, -1.0], [-3.0, -2.0, -5.0, -2.0]]).T
MODES = {"zero": "zero_gradient", "straight": "straight_through_gradient"}


def _argmax(mode):
    return lambda dy, x: dy.argmax(x[0], mode)


CASES = []
for _short, _mode in MODES.items():
    CASES += [
        (f"argmax_{_short}_vec", _argmax(_mode), [(V, False)]),
        (f"argmax_{_short}_ties", _argmax(_mode), [(TIES, False)]),
        (f"argmax_{_short}_one", _argmax(_mode), [(np.array([-0.7]), False)]),
        (f"argmax_{_short}_batched", _argmax(_mode), [(B, True)]),
        # keyword, then a product after it: the gradient reaches W only straight through
        (f"argmax_{_short}_keyword", lambda dy, x, m=_mode: dy.argmax(x[0] * 2.0, gradient_mode=m),
         [(V[::-1].copy(), False)]),
    ]
