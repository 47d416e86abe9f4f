"""Records DyNet's numbers for tests/model/test_graph_reads.py (tests/data/graph_reads_dynet.json).
Run with DyNet (DyNet 2.2):

    python tests/data/make_graph_reads_fixture.py

The cases are in graph_reads_cases.py: parameters and lookups changed (set_value,
init_row, scale, clip_inplace, zero, trainer steps of every trainer, sparse and dense,
with and without weight decay) after a graph computed with them."""
import json
import os
import sys

import dynet as dy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from graph_reads_cases import run

with open(os.path.join(HERE, "graph_reads_dynet.json"), "w") as f:
    json.dump(run(dy), f)
