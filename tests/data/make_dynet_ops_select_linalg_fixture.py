"""Regenerate dynet_ops_select_linalg.npz: values and gradients of DyNet's select_rows, select_cols,
pickrange, strided_select, fold_rows, sparsemax, constrained_softmax, inverse, logdet,
trace_of_product, kmh_ngram, filter1d_narrow, kmax_pooling, circ_conv, circ_corr and
the contract3d ops, for tests/ops/test_dynet_ops_select_linalg.py. Run with an interpreter that has
dynet (e.g. /work/venv-dynet):

    python tests/data/make_dynet_ops_select_linalg_fixture.py

The cases are in dynet_ops_select_linalg_cases.py. Each output is weighted by fixed numbers r and
summed, and the gradient of that loss with respect to every input is stored:
"<case>/x<k>", "<case>/r", "<case>/y", "<case>/dx<k>".
"""
import os
import sys

import dynet as dy
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dynet_ops_select_linalg_cases import CASES, inputs, run  # noqa: E402


def main():
    out = {}
    for name, specs, build in CASES:
        xs = inputs(name, specs)
        y, r, grads = run(dy, name, specs, build, xs)
        out[f"{name}/y"], out[f"{name}/r"] = y, r
        for k, (x, g) in enumerate(zip(xs, grads)):
            out[f"{name}/x{k}"], out[f"{name}/dx{k}"] = x, g
    np.savez_compressed(os.path.join(HERE, "dynet_ops_select_linalg.npz"), **out)
    print(f"wrote {len(CASES)} cases")


if __name__ == "__main__":
    main()
