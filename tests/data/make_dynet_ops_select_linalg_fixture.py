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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dynet_ops_select_linalg_cases import CASES, write_fixture  # noqa: E402


def main():
    write_fixture(dy, CASES, os.path.join(HERE, "dynet_ops_select_linalg.npz"))


if __name__ == "__main__":
    main()
