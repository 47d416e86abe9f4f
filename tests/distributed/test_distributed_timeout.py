"""init(timeout=...) and AUTOBATCH_MPI_TIMEOUT: a finite number of seconds > 0. NaN and
infinities would turn the watchdog off without a word (the time waited is never more
than them), so a hung rank would hang forever: they are refused, before MPI starts."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import autobatch as dy
from autobatch import distributed as dist

PACKAGE_ROOT = pathlib.Path(dy.__file__).resolve().parent.parent


def watchdog_state():
    """(the watchdog, its timeout): None before any timeout was set in this process
    (another test may have set one, e.g. the tagger example's)."""
    w = dist.faults._watchdog
    return w, (w.timeout if w is not None else None)


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -float("inf"), np.float32("nan"),
                                     np.float64("inf"), 0, 0.0, -1, -1e-9], ids=repr)
def test_a_timeout_that_is_not_a_finite_positive_number_is_refused(timeout):
    before = watchdog_state()
    with pytest.raises(ValueError, match=r"init: timeout must be a finite number of seconds > 0"):
        dist.init(timeout=timeout)
    assert watchdog_state() == before          # nothing was started or changed


@pytest.mark.parametrize("timeout", [True, "3", b"3", [3], object()], ids=repr)
def test_a_timeout_that_is_not_a_number_is_a_type_error(timeout):
    before = watchdog_state()
    with pytest.raises(TypeError, match="init: timeout must be a number of seconds"):
        dist.init(timeout=timeout)
    assert watchdog_state() == before


@pytest.mark.parametrize("text, message", [
    ("nan", "must be a finite number of seconds > 0"), ("NaN", "must be a finite number of seconds > 0"),
    ("inf", "must be a finite number of seconds > 0"), ("-inf", "must be a finite number of seconds > 0"),
    ("infinity", "must be a finite number of seconds > 0"), ("0", "must be a finite number of seconds > 0"),
    ("-5", "must be a finite number of seconds > 0"), ("ten", "must be a number of seconds, got 'ten'"),
])
def test_the_environment_variable_is_checked_as_the_argument(monkeypatch, text, message):
    monkeypatch.setenv("AUTOBATCH_MPI_TIMEOUT", text)
    before = watchdog_state()
    with pytest.raises(ValueError, match=f"AUTOBATCH_MPI_TIMEOUT {message}"):
        dist.init()
    assert watchdog_state() == before


def test_a_refused_timeout_leaves_the_running_watchdog_as_it_was():
    # in a process of its own: the watchdog thread, once started, stays for the process
    code = ("from autobatch import distributed as dist\n"
            "dist.init(timeout=5)\n"
            "for bad in (float('nan'), float('inf')):\n"
            "    try:\n"
            "        dist.init(timeout=bad)\n"
            "    except ValueError:\n"
            "        pass\n"
            "    else:\n"
            "        raise SystemExit('accepted ' + repr(bad))\n"
            "w = dist.faults._watchdog\n"
            "assert w.is_alive() and w.timeout == 5.0, w.timeout\n")
    env = {k: v for k, v in os.environ.items() if k != "AUTOBATCH_MPI_TIMEOUT"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(env, PYTHONPATH=str(PACKAGE_ROOT)), cwd=PACKAGE_ROOT.parent)
    assert proc.returncode == 0, proc.stderr + proc.stdout
