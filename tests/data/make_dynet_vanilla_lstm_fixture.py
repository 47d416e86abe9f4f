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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dynet_ops_select_linalg_cases import write_fixture  # noqa: E402
from dynet_vanilla_lstm_cases import CASES  # noqa: E402


def main():
    write_fixture(dy, CASES, os.path.join(HERE, "dynet_vanilla_lstm.npz"))


if __name__ == "__main__":
    main()
