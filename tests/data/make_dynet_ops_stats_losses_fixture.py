"""Regenerate dynet_ops_stats_losses.npz from the real DyNet (the cases are in dynet_ops_stats_losses.py), so
that tests/ops/test_dynet_ops_stats_losses.py compares without DyNet installed. Run with an
interpreter that has dynet:

    /work/venv-dynet/bin/python tests/data/make_dynet_ops_stats_losses_fixture.py

Stores "<case>/input<i>" (input i as given), "<case>/dims" (the shape then the batch
size), "<case>/value" and "<case>/grad<i>" (the gradient of input i).
"""
import os
import sys

import dynet as dy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dynet_ops_stats_losses import CASES, record  # noqa: E402

record(dy, CASES, os.path.join(HERE, "dynet_ops_stats_losses.npz"))
