"""Shared set-up of the test suite (tests/README.md describes the folders).

tests/support (the helper modules: op cases, save-file editors, the DyNet file model,
the strategy names, the workers run in child processes) is put first on sys.path, so
that a test in any folder imports them by name (`from op_cases import ...`).

Fixtures: `strategy` runs a test once per built-in strategy ("none" first, then by
name: tests/support/strategy_names.py); `strategies` is that list, for a test that
loops over it itself. `alarm(seconds)` arms a real timer whose signal raises
KeyboardInterrupt, as a Ctrl-C would arrive (the interrupt tests).

AUTOBATCH_TEST_SPLIT=N runs the suite with N engine threads and every product and
batch split over them however small (dy.set_num_threads, _threads.set_split_thresholds),
so that the op cases, batching and fusion tests check the split paths too:

    AUTOBATCH_TEST_SPLIT=2 pytest -q tests

Otherwise the suite runs with the engine's default thread count (the cores this
process may run on, or AUTOBATCH_NUM_THREADS), as users get it; the header of pytest's
output says how many and why.
"""
import os
import signal
import sys

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)

import pytest

import autobatch as dy
from autobatch.runtime.threads import set_split_thresholds

from strategy_names import BUILTIN_STRATEGIES

if os.environ.get("AUTOBATCH_TEST_SPLIT"):
    dy.set_num_threads(int(os.environ["AUTOBATCH_TEST_SPLIT"]))
    set_split_thresholds(float(os.environ.get("AUTOBATCH_TEST_GEMM_MIN", 0)), int(os.environ.get("AUTOBATCH_TEST_ELEMS_MIN", 0)))


def pytest_report_header(config):
    from autobatch.runtime.threads import threads_reason
    return f"autobatch engine threads: {dy.get_num_threads()} ({threads_reason()})"


@pytest.fixture(params=BUILTIN_STRATEGIES)
def strategy(request):
    """The name of one built-in strategy; a test that takes it runs under each.
    A test that parametrizes `strategy` itself (a deliberate subset) overrides it."""
    return request.param


@pytest.fixture
def strategies():
    """The names of every built-in strategy ("none", the unbatched reference, first)."""
    return list(BUILTIN_STRATEGIES)


@pytest.fixture
def alarm():
    """A function arming a timer (`alarm(seconds)`; 0 disarms) whose SIGALRM raises
    KeyboardInterrupt; the previous handler comes back after the test."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGALRM, interrupt)
    yield lambda seconds: signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)
