"""The MPI state of this process, in one place: set by `init()` (processes.py) and read
by every other part of autobatch.distributed at call time, as ``state.comm`` and so on,
never copied at import time (a copy would stay None after `init()`)."""

MPI = None           # the mpi4py.MPI module, once init() found one
comm = None          # MPI.COMM_WORLD, or None in a single process without MPI
initialized = False  # init() ran (with or without MPI)


def comm_rank_size():
    """(rank, size) of this process as things stand, without starting MPI: (0, 1) before
    `init()` and in a single process without MPI."""
    return (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
