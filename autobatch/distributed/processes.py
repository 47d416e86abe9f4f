"""The processes of the job: `init()` (which finds mpi4py, or runs as one process, and
installs the fault handling of faults.py), `rank()`, `size()`, `is_main()`, `barrier()`,
and `find_mpiexec()` with the check that a launcher did not start several processes
without mpi4py. The MPI state that init() sets lives in state.py."""
import logging
import os
import shutil
import sys

from autobatch.distributed import state
from autobatch.distributed.faults import (_checked_timeout, _collective, _install_abort_hook,
                                          _set_timeout)

_log = logging.getLogger("autobatch.distributed")

LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")   # set by MPICH/Intel MPI, Open MPI


def init(abort_on_error=True, timeout=None):
    """Start (or join) MPI and return the number of processes.

    Without an MPI launcher this is one process: `rank()` 0, `size()` 1, and every
    function of this module works (collectives do nothing), with or without mpi4py.
    `abort_on_error`: an uncaught exception on any rank aborts the whole job, naming the
    rank. `timeout` (seconds; default: AUTOBATCH_MPI_TIMEOUT, else none): abort when one of
    this module's collectives waits longer (a finite number > 0: NaN or infinity would
    turn the watchdog off, so they are refused, as anything else that is not a number).
    Calling init() again only changes these."""
    # checked before MPI starts, so that a bad value changes nothing
    if timeout is not None:
        timeout = _checked_timeout(timeout, "init: timeout")
    elif os.environ.get("AUTOBATCH_MPI_TIMEOUT"):
        timeout = _checked_timeout(_environment_seconds("AUTOBATCH_MPI_TIMEOUT"), "AUTOBATCH_MPI_TIMEOUT")
    if not state.initialized:
        try:
            from mpi4py import MPI
        except ImportError:
            launched = _launcher_size()
            if launched > 1:
                raise RuntimeError(
                    f"this process was started by an MPI launcher as one of {launched} "
                    "processes, but mpi4py is not installed, so each would train alone: "
                    "pip install 'autobatch[mpi]'") from None
        else:
            state.MPI, state.comm = MPI, MPI.COMM_WORLD
        state.initialized = True
    if abort_on_error:
        _install_abort_hook()
    if timeout is not None:
        _set_timeout(timeout)
    _log.info("rank %d of %d (%s)", rank(), size(), "MPI" if state.comm is not None else "no MPI")
    return size()


def _environment_seconds(var):
    text = os.environ[var]
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{var} must be a number of seconds, got {text!r}") from None


def _launcher_size():
    for var in LAUNCHER_SIZE_VARS:
        try:
            return int(os.environ[var])
        except (KeyError, ValueError):
            continue
    return 1


def _world():
    if not state.initialized:
        init()
    return state.comm


def rank():
    """This process's number, 0 ... size() - 1."""
    comm = _world()
    return comm.Get_rank() if comm is not None else 0


def size():
    """The number of processes training together (1 without mpiexec)."""
    comm = _world()
    return comm.Get_size() if comm is not None else 1


def is_main():
    """True on rank 0, the rank that prints, saves and evaluates."""
    return rank() == 0


def barrier():
    """Wait until every rank got here."""
    if size() > 1:
        with _collective("Barrier"):
            state.comm.Barrier()


def find_mpiexec():
    """The `mpiexec` that belongs with this Python (the mpich wheel installs it beside
    the interpreter), else the one on PATH; None if there is none."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")
