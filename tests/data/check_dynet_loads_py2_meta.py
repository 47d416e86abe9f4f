"""DyNet loads the protocol 0 and 1 `.meta` files that tests/support/dynet_pickles.py
writes as Python 2's DyNet did (tests/io/test_dynet_meta_grammar.py loads the same
files here), run with DyNet installed:

    /work/venv-new/bin/python tests/data/check_dynet_loads_py2_meta.py

For each `dy.save` DyNet made (tests/data/dynet_model/dynet_saved, dynet_saved2,
dynet_mlp), the objects of its `.meta` are rewritten in protocols 0 and 1 (and, as a
control, 2 to 5); DyNet's `dy.load` of each must give the parameters its own file gives.
Prints OK or raises."""
import os
import pickle
import shutil
import sys
import tempfile

import numpy as np

import dynet as dy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from dynet_pickles import meta
from make_dynet_model_fixture import OneLayerMLP  # noqa: F401  (the class the .meta names, for pickle)

MODEL = os.path.join(HERE, "dynet_model")


def entries(base):
    out = []
    with open(base + ".meta", "rb") as f:
        while f.peek(1):
            out.append(pickle.load(f))
    return out


def values(objects):
    arrays = []
    for o in objects:
        params = ([o] if isinstance(o, (dy.Parameters, dy.LookupParameters)) else
                  o.param_collection().parameters_list() + o.param_collection().lookup_parameters_list())
        arrays += [p.as_array() for p in params]
    return arrays


tmp = tempfile.mkdtemp()
for fixture in ("dynet_saved", "dynet_saved2", "dynet_mlp"):
    original = os.path.join(MODEL, fixture)
    expected = values(dy.load(original, dy.ParameterCollection()))
    for protocol in range(6):
        base = os.path.join(tmp, f"{fixture}_p{protocol}")
        with open(base + ".meta", "wb") as f:
            f.write(meta(entries(original), protocol))
        shutil.copyfile(original + ".data", base + ".data")
        got = values(dy.load(base, dy.ParameterCollection()))
        assert len(got) == len(expected), (fixture, protocol)
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)
        if protocol == 0:
            with open(base + ".meta", "rb") as f:
                print(fixture, "protocol 0 starts", f.read(40))
shutil.rmtree(tmp)
print("OK: DyNet loads the .meta files written as Python 2 wrote them (protocols 0, 1) and 2 to 5")
