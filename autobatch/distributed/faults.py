"""What happens when a rank fails or hangs: the abort that ends every process of the
job (naming the rank), the exception hook that `init()` installs, and the watchdog that
`init(timeout=...)` starts, which aborts when one collective waits too long. Every MPI
call that waits for the other ranks runs inside ``with _collective(what):``."""
import logging
import math
import os
import sys
import threading
import time

import numpy as np

from autobatch.distributed import state

_log = logging.getLogger("autobatch.distributed")

_watchdog = None                 # the _Watchdog, once a timeout was set
_previous_excepthook = None      # sys.excepthook before _install_abort_hook


def _abort(message):
    """Say which rank gives up and why, then end every process of the job."""
    # CRITICAL reaches stderr even when the program configured no logging (logging's
    # last-resort handler), and a configured handler gets it with the others
    rank, size = state.comm_rank_size()
    _log.critical("autobatch.distributed: rank %d of %d: %s; aborting all ranks (MPI_Abort)",
                  rank, size, message)
    for handler in _log.handlers + logging.getLogger().handlers + [logging.lastResort]:
        if handler is not None:
            handler.flush()
    time.sleep(0.5)       # MPI_Abort may end the launcher before it passed the message on
    if state.comm is not None:
        state.comm.Abort(1)
    os._exit(1)


def _abort_hook(exc_type, exc, tb):
    _previous_excepthook(exc_type, exc, tb)            # the traceback, as usual
    if state.comm_rank_size()[1] > 1:
        _abort(f"failed with {exc_type.__name__}: {exc}")


def _install_abort_hook():
    global _previous_excepthook
    if sys.excepthook is not _abort_hook:
        _previous_excepthook = sys.excepthook
        sys.excepthook = _abort_hook


class _Watchdog(threading.Thread):
    """Aborts the job when the collective in progress has waited `timeout` seconds."""

    def __init__(self, timeout):
        super().__init__(name="autobatch-mpi-watchdog", daemon=True)
        self.timeout = timeout
        self.current = None            # (what, time.monotonic() at its start) or None

    def run(self):
        while True:
            time.sleep(min(1.0, self.timeout / 4))
            current = self.current
            if current is not None and time.monotonic() - current[1] > self.timeout:
                _abort(f"waited more than {self.timeout:g} s in {current[0]}: another rank "
                       "has stopped, hangs, or took a different number of steps "
                       "(timeout set by init(timeout=...) or AUTOBATCH_MPI_TIMEOUT)")


def _checked_timeout(value, source):
    """`value` as seconds (a float > 0). NaN and infinities are refused: the watchdog
    compares the time waited with them, which is never more than NaN or inf, so it would
    be off without a word and a hung rank would hang forever. `source` names where the
    value came from, for the message."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{source} must be a number of seconds, got {type(value).__name__} {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{source} must be a finite number of seconds > 0, got {value!r}")
    return seconds


def _set_timeout(seconds):
    """Start the watchdog (or change its timeout) for `seconds` from _checked_timeout."""
    global _watchdog
    if _watchdog is None:
        _watchdog = _Watchdog(seconds)
        _watchdog.start()
    _watchdog.timeout = seconds


class _collective:
    """`with _collective(what):` around an MPI call that waits for the other ranks."""
    __slots__ = ("what",)

    def __init__(self, what):
        self.what = what

    def __enter__(self):
        if _watchdog is not None:
            _watchdog.current = (self.what, time.monotonic())

    def __exit__(self, *exc):
        if _watchdog is not None:
            _watchdog.current = None
