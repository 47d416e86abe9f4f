"""DyNet's global settings: the --dynet-* flags read at import (in subprocesses),
DynetParams, init, init_from_params and autobatch.config (DyNet's dynet_config)."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import autobatch as dy

# the directory holding the autobatch these tests import (the source tree after an
# in-place build, site-packages after `pip install .`: a fresh clone has no compiled
# engine in its source tree, so the child must not import that one)
ROOT = pathlib.Path(dy.__file__).resolve().parent.parent
PROBE = """
import json, autobatch as dy
pc = dy.ParameterCollection()
W = pc.add_parameters((3,))
dy.renew_cg()
print(json.dumps({"W": W.as_array().tolist(), "wd": pc.get_weight_decay(),
                  "strategy": dy.default_strategy(),
                  "noise": dy.random_normal(3).npvalue().tolist()}))
"""


def run(*flags):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", PROBE, *flags], capture_output=True, text=True,
                          env=env, cwd=str(ROOT), timeout=120)


def probe(*flags):
    r = run(*flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_seed_flag_makes_runs_repeatable():
    a, b, c = probe("--dynet-seed", "5"), probe("--dynet-seed", "5"), probe("--dynet-seed", "6")
    assert a == b
    assert a["W"] != c["W"] and a["noise"] != c["noise"]


def test_weight_decay_mem_autobatch_flags():
    got = probe("--dynet-weight-decay", "0.25", "--dynet-mem", "1024,512,512",
                "--dynet-autobatch", "2", "--dynet-profiling", "1", "--dynet-devices", "CPU")
    assert got["wd"] == 0.25 and got["strategy"] == "depth"
    assert probe("--dynet-autobatch", "1")["strategy"] == "agenda"
    assert probe()["wd"] == 0.0


@pytest.mark.parametrize("flags, error", [
    (["--dynet-gpus", "1"], "RuntimeError: .*CPU only"),
    (["--dynet-gpu"], "RuntimeError: .*CPU only"),
    (["--dynet-devices", "GPU:0"], "RuntimeError: .*CPU only"),
    (["--dynet-seed"], "ValueError: --dynet-seed expects a value"),
    (["--dynet-seed", "abc"], "ValueError: --dynet-seed"),
    (["--dynet-weight-decay", "1.5"], "ValueError: .*out of range"),
    (["--dynet-mem", "abc"], "ValueError: --dynet-mem"),
    (["--dynet-autobatch", "7"], "ValueError: .*autobatch"),
])
def test_bad_flags_are_clear_errors(flags, error):
    r = run(*flags)
    assert r.returncode != 0
    import re
    assert re.search(error, r.stderr), r.stderr[-500:]


@pytest.fixture
def restore_settings():
    before = dy.default_strategy()
    yield
    p = dy.DynetParams()
    p.init()
    dy.set_default_strategy(before)


def test_dynet_params_init(restore_settings):
    p = dy.DynetParams()
    p.set_mem(2048)
    p.set_random_seed(666)
    p.set_weight_decay(0.01)
    p.set_autobatch(2)
    p.set_profiling(0)
    p.set_shared_parameters(False)
    p.set_requested_gpus(0)
    p.init()
    assert dy.ParameterCollection().get_weight_decay() == pytest.approx(0.01)
    assert dy.default_strategy() == "depth"
    first = dy.ParameterCollection().add_parameters(4).as_array()
    dy.init_from_params(p)
    np.testing.assert_array_equal(dy.ParameterCollection().add_parameters(4).as_array(), first)
    with pytest.raises(RuntimeError, match="CPU only"):
        p.set_requested_gpus(1)
    for bad in (lambda: p.set_weight_decay(1.0), lambda: p.set_random_seed(-1),
                lambda: p.set_autobatch(9), lambda: p.from_config({"seed": "x"})):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(TypeError):
        dy.init_from_params({"seed": 1})
    p.set_cpu_mode()
    p.set_gpu_mask([0, 0])
    with pytest.raises(RuntimeError, match="CPU only"):
        p.set_gpu_mask([0, 1])
    with pytest.raises(ValueError):
        p.set_gpu_mask([2])
    p.from_args()      # pytest's argv has no --dynet-* flag: nothing changes
    assert p.random_seed == 666


def test_config_set_and_get(restore_settings):
    dy.config.set(mem=4, random_seed=9, weight_decay=0.5, autobatch=2)
    assert dy.config.get()["seed"] == 9 and dy.config.gpu() is None
    assert dy.ParameterCollection().get_weight_decay() == 0.5
    assert dy.default_strategy() == "depth"
    a = dy.ParameterCollection().add_parameters(3).as_array()
    dy.config.set(random_seed=9)
    np.testing.assert_array_equal(dy.ParameterCollection().add_parameters(3).as_array(), a)
    with pytest.raises(RuntimeError):
        dy.config.set_gpu()
    with pytest.raises(RuntimeError):
        dy.config.set(requested_gpus=1)
    params = dy.DynetParams()
    params.from_config(dy.config.get())
    assert params.random_seed == 9
