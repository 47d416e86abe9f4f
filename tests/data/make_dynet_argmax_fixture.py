"""Regenerate dynet_argmax.npz from the real DyNet (the cases are in dynet_argmax.py), so
that tests/ops/test_argmax.py compares without DyNet installed. Run with an interpreter
that has dynet:

    /work/venv-dynet/bin/python tests/data/make_dynet_argmax_fixture.py

Stores "<case>/input<i>", "<case>/dims" (the shape then the batch size), "<case>/value"
and "<case>/grad<i>" (the gradient of input i under dynet_ops_stats_losses.run's projection).
"""
import os
import sys

import dynet as dy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dynet_argmax import CASES  # noqa: E402
from dynet_ops_stats_losses import record  # noqa: E402

record(dy, CASES, os.path.join(HERE, "dynet_argmax.npz"))
