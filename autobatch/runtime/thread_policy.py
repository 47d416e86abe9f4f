"""How many threads the engine uses when nobody says: the cores this process may run
on, shared with the other MPI ranks of its node, capped at the pool's maximum.

`default_threads()` returns the count and a sentence saying how it was chosen (the
line of ``python -m autobatch``); `from_environment()` reads AUTOBATCH_NUM_THREADS
first. Pure Python: the pool itself is in threads.pyx and pool.h.
"""
import os

ENV_VAR = "AUTOBATCH_NUM_THREADS"
MAX_THREADS = 64                  # AB_MAX_THREADS of pool.h

# the number of ranks an MPI launcher started on this node, by launcher
LOCAL_RANKS_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE",     # Open MPI
                    "MPI_LOCALNRANKS",                # MPICH's and Intel MPI's hydra
                    "MV2_COMM_WORLD_LOCAL_SIZE")      # MVAPICH2


def usable_cores():
    """(cores this process may run on, where the figure comes from): the affinity mask
    (taskset, cgroups' cpusets, an MPI launcher's binding), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0)), "os.sched_getaffinity"
    except (AttributeError, OSError):        # not Linux
        return os.cpu_count() or 1, "os.cpu_count"


def local_ranks():
    """(MPI ranks started on this node, the variable that says so), or (1, None)."""
    for var in LOCAL_RANKS_VARS:
        try:
            n = int(os.environ[var])
        except (KeyError, ValueError):
            continue
        if n > 1:
            return n, var
    return 1, None


def default_threads():
    """(threads, why) when neither set_num_threads nor AUTOBATCH_NUM_THREADS chose.

    Every core of the affinity mask, except under an MPI launcher that started several
    ranks on this node without binding them (each rank's mask is the whole machine):
    then the cores are shared out, at least one each. A rank that its launcher bound to
    some cores uses those."""
    cores, source = usable_cores()
    ranks, var = local_ranks()
    machine = os.cpu_count() or cores
    if ranks > 1 and cores >= machine:
        n = max(1, cores // ranks)
        why = f"default: {cores} cores shared by {ranks} MPI ranks on this node ({var})"
    else:
        n = cores
        why = f"default: the {cores} core{'s' if cores != 1 else ''} this process may run on ({source})"
    if n > MAX_THREADS:
        n = MAX_THREADS
        why += f", capped at {MAX_THREADS}"
    return n, why


def from_environment():
    """(threads, why): AUTOBATCH_NUM_THREADS when set to a count (``auto`` or empty:
    the default), else default_threads(). ValueError for anything else."""
    value = os.environ.get(ENV_VAR, "").strip()
    if value in ("", "auto"):
        return default_threads()
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{ENV_VAR} must be a positive integer or auto, got {value!r}")
    return n, f"{ENV_VAR}={n}"
