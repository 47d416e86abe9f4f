"""python -m autobatch: the configuration report (version, BLAS, SIMD, strategy, extras)."""
import os
import pathlib
import subprocess
import sys

import pytest

import autobatch as dy
from autobatch import report
from autobatch.model import update_rules


def test_python_m_autobatch_prints_the_report(tmp_path):
    # the child imports the autobatch these tests import (not a source tree in its cwd)
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(dy.__file__).resolve().parent.parent))
    out = subprocess.run([sys.executable, "-m", "autobatch"], capture_output=True, text=True,
                         timeout=120, check=True, cwd=tmp_path, env=env).stdout
    info = dy.config_info()
    assert out.splitlines()[0] == f"autobatch {dy.__version__}"
    for label in ("BLAS library:", "BLAS kernel:", "BLAS threads:", "elementwise SIMD:", "update rules:",
                  "engine threads:", "default strategy:", "numpy, scipy:"):
        assert label in out, label
    assert f"default strategy: {dy.default_strategy()}" in out
    assert f"elementwise SIMD: {info['simd']}" in out
    assert f"update rules:     {info['update_simd']}" in out
    for module, _, _ in report.EXTRAS:
        assert f"    {module}:" in out, module


def test_config_info_values():
    info = dy.config_info()
    assert info["version"] == dy.__version__
    assert info["blas"] == dy.blas_info()
    assert info["blas"]["threads"] in (None, 1) or info["blas"]["threads"] >= 1
    assert info["simd"] in ("avx512f", "avx2", "default (sse2)", "portable (no target clones)")
    assert info["update_simd"] in update_rules.simd_levels()
    assert info["packed_gemm"] in ("avx512", "avx2", "off")
    assert info["default_strategy"] in info["strategies"]
    import numpy
    assert info["numpy"] == numpy.__version__


def test_config_info_finds_an_installed_extra():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (the test extra brings it: "
                                         "pip install '.[test]')")
    assert dy.config_info()["extras"]["mpi4py"] is not None


def test_an_absent_extra_says_so(monkeypatch):
    monkeypatch.setattr(report, "EXTRAS", report.EXTRAS + [("no_such_module_xyz", "no-such-dist",
                                                            "nothing")])
    info = report.config_info()
    assert info["extras"]["no_such_module_xyz"] is None
    assert "no_such_module_xyz: not installed" in report.format_config(info)


def test_the_threads_shown_follow_set_blas_threads():
    before = dy.blas_info()["threads"]
    if before is None or not dy.set_blas_threads(2):
        pytest.skip("this BLAS does not say or set its threads")
    try:
        assert "BLAS threads:     2" in report.format_config()
    finally:
        dy.set_blas_threads(before)


def test_the_engine_threads_shown_follow_set_num_threads():
    before = dy.get_num_threads()
    try:
        dy.set_num_threads(2)
        assert dy.config_info()["threads"] == 2
        assert "engine threads:   2" in report.format_config()
    finally:
        dy.set_num_threads(before)


def test_show_config_writes_to_a_file(tmp_path):
    path = tmp_path / "report.txt"
    with open(path, "w") as f:
        dy.show_config(file=f)
    assert path.read_text().startswith(f"autobatch {dy.__version__}\n")
