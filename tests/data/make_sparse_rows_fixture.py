"""Records DyNet's values for tests/model/test_sparse_rows.py (tests/data/sparse_rows_dynet.json).
Run with DyNet (dynet38, DyNet 2.2):

    /work/venv-dynet/bin/python tests/data/make_sparse_rows_fixture.py

The runs are in sparse_rows_cases.py: momentum SGD and Adam, with lookups off the loss's
path, under nobackprop, after the loss, in graphs without backward or dropped by
cg_revert; each without weight decay and with set_weight_decay(0.1)."""
import json
import os
import sys

import dynet as dy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sparse_rows_cases import CASES, TRAINERS, run  # noqa: E402

WEIGHT_DECAYS = {"none": None, "0.1": 0.1}

out = {f"{case}/{trainer}/{wd}": run(dy, case, trainer, lam)
       for case in CASES for trainer in TRAINERS for wd, lam in WEIGHT_DECAYS.items()}
with open(os.path.join(HERE, "sparse_rows_dynet.json"), "w") as f:
    json.dump(out, f)
