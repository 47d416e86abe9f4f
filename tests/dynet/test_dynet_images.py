"""A DyNet program on images (3-D values with a batch, 4-D filters, broadcasting, a
batch-changing reshape, conv2d_bias, maxpooling2d, sum_dim, transpose) runs with its
import line changed and gives DyNet's values and gradients under every strategy."""
import pathlib

import numpy as np
import pytest

import autobatch as dy

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"


def run_as_autobatch(strategy):
    source = (DATA / "dynet_images.py").read_text()
    assert source.count("import dynet as dy") == 1
    namespace = {"__name__": "dynet_images"}
    exec(compile(source.replace("import dynet as dy", "import autobatch as dy"),
                 str(DATA / "dynet_images.py"), "exec"), namespace)
    before = dy.default_strategy()
    dy.set_default_strategy(strategy)
    try:
        return namespace["run"]()
    finally:
        dy.set_default_strategy(before)


# deliberately a subset of the built-in strategies (not the shared `strategy` fixture of
# tests/conftest.py): each run execs the whole DyNet image program
# and compares with its recording; kept to these four cases
@pytest.mark.parametrize("strategy", ["none", "depth", "agenda", "critical"])
def test_matches_dynet(strategy):
    want = np.load(DATA / "dynet_images.npz")       # recorded with DyNet 2.2 (dynet38)
    got = run_as_autobatch(strategy)
    assert set(got) == set(want.files)
    for key in want.files:
        assert got[key].shape == want[key].shape, key
        np.testing.assert_allclose(got[key], want[key], rtol=2e-5, atol=1e-5, err_msg=key)
