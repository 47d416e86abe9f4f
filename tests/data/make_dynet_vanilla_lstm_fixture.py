"""Regenerate dynet_vanilla_lstm.npz: values and gradients of DyNet's vanilla_lstm_gates*,
vanilla_lstm_c and vanilla_lstm_h, for tests/ops/test_dynet_vanilla_lstm.py. Run with an
interpreter that has dynet (dynet38), from the repository's root:

    python tests/data/make_dynet_vanilla_lstm_fixture.py

The cases are in dynet_vanilla_lstm_cases.py; the keys as in dynet_ops_select_linalg.npz:
"<case>/x<k>", "<case>/r", "<case>/y", "<case>/dx<k>".
"""
import os
import sys

import dynet as dy
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dynet_ops_select_linalg_cases import inputs, run  # noqa: E402
from dynet_vanilla_lstm_cases import CASES  # noqa: E402


def main():
    out = {}
    for name, specs, build in CASES:
        xs = inputs(name, specs)
        y, r, grads = run(dy, name, specs, build, xs)
        out[f"{name}/y"], out[f"{name}/r"] = y, r
        for k, (x, g) in enumerate(zip(xs, grads)):
            out[f"{name}/x{k}"], out[f"{name}/dx{k}"] = x, g
    np.savez_compressed(os.path.join(HERE, "dynet_vanilla_lstm.npz"), **out)
    print(f"wrote {len(CASES)} cases")


if __name__ == "__main__":
    main()
