"""Data-parallel training over MPI: N processes train one model, each on its part of
every minibatch, and combine their gradients before every update::

    import autobatch as dy
    from autobatch import distributed as dist

    dist.init()                                      # size 1 when not started by mpiexec
    pc = dy.ParameterCollection(seed=1)
    ...                                              # build the model, the same on every rank
    dist.broadcast_parameters(pc)                    # every rank starts from rank 0's values
    trainer = dist.DistributedTrainer(dy.AdamTrainer(pc), reduce="sum")
    for epoch in range(epochs):
        mine = dist.shard(train, epoch=epoch, seed=1)      # this rank's part, reshuffled per epoch
        for k in range(0, len(mine), b):                   # b = the global minibatch / size()
            dy.renew_cg()
            loss = dy.esum([model.loss(x) for x in mine[k:k + b]])
            loss.backward()
            trainer.update()                         # gradients of all ranks combined, then the step
    dist.save("model", [pc])                         # written by rank 0 only

Started as ``mpiexec -n 2 python train.py``; see docs/distributed.md for clusters,
Slurm, timeouts and what scales. Importing this module never needs MPI; `init()` needs
mpi4py only when the program was started by an MPI launcher.

How gradients travel, per `update()`:

- dense gradients (every Parameters, and lookup tables when the trainer's sparse updates
  are off) are packed into a few large float32 buffers of at most `bucket_mb` each and
  reduced with one in-place ``Allreduce`` per buffer;
- lookup tables with sparse updates send only the rows this rank's backwards marked
  used: their ids and their gradient rows, all tables in one ``Allgatherv`` for the ids
  and one for the rows;
  every rank adds the rows of all ranks in rank order (so all ranks get the same bits) and
  marks them used, so the trainer updates the union of the touched rows and nothing else;
- with ``reduce="mean"`` the combined gradients are divided by the number of ranks (for
  losses averaged over each rank's minibatch), with ``reduce="sum"`` they are not (for
  DyNet-style summed losses: N ranks with minibatch B/N then make exactly the step of one
  process with minibatch B, up to float32 summation order);
- the wrapped trainer then clips on the global norm of the combined gradients and updates,
  identically on every rank.

Faults: `init()` makes an uncaught exception on any rank print its traceback and a line
naming the rank, then call ``MPI.COMM_WORLD.Abort`` so that the other ranks do not wait
forever in their next collective. `init(timeout=seconds)` (or the environment variable
AUTOBATCH_MPI_TIMEOUT) also aborts the job when a rank waits longer than that in one of
this module's collectives (a rank that hangs, or stopped calling `update()` early).
"""
import logging
import os
import shutil
import sys
import threading
import time

import numpy as np

from autobatch.io import formats

_log = logging.getLogger("autobatch.distributed")

LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")   # set by MPICH/Intel MPI, Open MPI

_MPI = None          # the mpi4py.MPI module, once init() found one
_comm = None         # MPI.COMM_WORLD, or None in a single process without MPI
_initialized = False
_watchdog = None
_previous_excepthook = None


# ------------------------------------------------------------ processes ----

def init(abort_on_error=True, timeout=None):
    """Start (or join) MPI and return the number of processes.

    Without an MPI launcher this is one process: `rank()` 0, `size()` 1, and every
    function of this module works (collectives do nothing), with or without mpi4py.
    `abort_on_error`: an uncaught exception on any rank aborts the whole job, naming the
    rank. `timeout` (seconds; default: AUTOBATCH_MPI_TIMEOUT, else none): abort when one of
    this module's collectives waits longer. Calling init() again only changes these."""
    global _MPI, _comm, _initialized
    if not _initialized:
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
            _MPI, _comm = MPI, MPI.COMM_WORLD
        _initialized = True
    if abort_on_error:
        _install_abort_hook()
    if timeout is None and os.environ.get("AUTOBATCH_MPI_TIMEOUT"):
        timeout = float(os.environ["AUTOBATCH_MPI_TIMEOUT"])
    if timeout is not None:
        _set_timeout(float(timeout))
    _log.info("rank %d of %d (%s)", rank(), size(), "MPI" if _comm is not None else "no MPI")
    return size()


def _launcher_size():
    for var in LAUNCHER_SIZE_VARS:
        try:
            return int(os.environ[var])
        except (KeyError, ValueError):
            continue
    return 1


def _world():
    if not _initialized:
        init()
    return _comm


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
            _comm.Barrier()


def find_mpiexec():
    """The `mpiexec` that belongs with this Python (the mpich wheel installs it beside
    the interpreter), else the one on PATH; None if there is none."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


# ---------------------------------------------------------------- faults ----

def _abort(message):
    """Say which rank gives up and why, then end every process of the job."""
    # CRITICAL reaches stderr even when the program configured no logging (logging's
    # last-resort handler), and a configured handler gets it with the others
    _log.critical("autobatch.distributed: rank %d of %d: %s; aborting all ranks (MPI_Abort)",
                 rank(), size(), message)
    for handler in _log.handlers + logging.getLogger().handlers + [logging.lastResort]:
        if handler is not None:
            handler.flush()
    time.sleep(0.5)       # MPI_Abort may end the launcher before it passed the message on
    if _comm is not None:
        _comm.Abort(1)
    os._exit(1)


def _abort_hook(exc_type, exc, tb):
    _previous_excepthook(exc_type, exc, tb)            # the traceback, as usual
    if size() > 1:
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


def _set_timeout(seconds):
    global _watchdog
    if seconds <= 0:
        raise ValueError(f"timeout must be positive, got {seconds}")
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


# --------------------------------------------------- values of all ranks ----

def _check_same_layout(arrays, what):
    """Raise unless every rank has as many arrays of the same sizes (the same model)."""
    mine = (len(arrays), sum(a.size for a in arrays), tuple(a.size for a in arrays))
    with _collective(f"checking the {what} of all ranks"):
        layouts = _comm.allgather(mine)
    for r, theirs in enumerate(layouts):
        if theirs != layouts[0]:
            raise ValueError(
                f"the ranks' {what} differ: rank 0 has {layouts[0][0]} arrays of "
                f"{layouts[0][1]} floats, rank {r} has {theirs[0]} of {theirs[1]} "
                "(every rank must build the same model in the same order)")


def _buckets(arrays, bucket_bytes):
    """Group 1-D float32 arrays, in order, into (buffer, [(array, buffer slice)]) of at
    most `bucket_bytes` (an array larger than that gets a buffer of its own)."""
    groups, current, current_size = [], [], 0
    for a in arrays:
        if current and 4 * (current_size + a.size) > bucket_bytes:
            groups.append(current)
            current, current_size = [], 0
        current.append(a)
        current_size += a.size
    if current:
        groups.append(current)
    out = []
    for group in groups:
        buf = np.empty(sum(a.size for a in group), dtype=np.float32)
        pairs, at = [], 0
        for a in group:
            pairs.append((a, buf[at:at + a.size]))
            at += a.size
        out.append((buf, group, pairs))
    return out


def broadcast_parameters(pc, root=0, bucket_mb=64):
    """Copy the values of every parameter of `pc` from rank `root` to all ranks (after
    building the model, and after `populate` or `load` on the root alone)."""
    if size() == 1:
        return
    arrays = [p._flat for p in pc.parameters_list() + pc.lookup_parameters_list()]
    _check_same_layout(arrays, "parameters")
    for buf, group, pairs in _buckets(arrays, bucket_mb * 2 ** 20):
        if rank() == root:
            np.concatenate(group, out=buf)
        with _collective("Bcast of parameter values"):
            _comm.Bcast(buf, root=root)
        for a, view in pairs:
            np.copyto(a, view)


def allreduce(value, op="sum"):
    """`value` (a number or an array) combined over all ranks: op "sum", "max" or "min"."""
    v = np.asarray(value, dtype=np.float64)
    if op not in ("sum", "max", "min"):
        raise ValueError(f"allreduce: op must be 'sum', 'max' or 'min', got {op!r}")
    if size() > 1:
        v = v.copy()
        with _collective(f"Allreduce ({op}) of a value"):
            _comm.Allreduce(_MPI.IN_PLACE, v, op={"sum": _MPI.SUM, "max": _MPI.MAX, "min": _MPI.MIN}[op])
    return float(v) if v.ndim == 0 else v.copy()


def allreduce_mean(value, weight=1.0):
    """The mean of `value` (a number or an array) over all ranks, weighted by `weight`:
    ``sum(value_r * weight_r) / sum(weight_r)``. For a metric over shards of different
    sizes, pass the shard's size (tokens, sentences) as the weight."""
    v = np.asarray(value, dtype=np.float64)
    total = allreduce(np.append(v.ravel() * float(weight), float(weight)))
    if total[-1] == 0:
        raise ZeroDivisionError("allreduce_mean: the weights of all ranks sum to 0")
    mean = total[:-1] / total[-1]
    return float(mean[0]) if v.ndim == 0 else mean.reshape(v.shape)


def shard(data, epoch=0, seed=0, shuffle=True, drop_last=True):
    """This rank's part of `data` (a sequence) for one epoch, as a list.

    With `shuffle`, the order is a permutation drawn from (seed, epoch), the same on
    every rank; rank r takes items r, r + N, r + 2N, ... of it. So the first b items of
    every rank together are the first N*b items of the permutation: N ranks with
    minibatch b see, step by step, the minibatches of one process with minibatch N*b
    (size 1 gets the whole permutation). `drop_last` drops the len(data) % N last items
    of the permutation so that every rank gets as many items (and takes as many
    training steps: a rank with an extra step would wait for the others forever); for
    evaluation pass drop_last=False and weight the metric (`allreduce_mean`)."""
    n, ranks, me = len(data), size(), rank()
    order = np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)
    if drop_last:
        order = order[:n - n % ranks]
    return [data[i] for i in order[me::ranks]]


def split_batch(batch, cost=None):
    """This rank's part of one global minibatch (the same sequence on every rank).

    Without `cost`, rank r takes items r, r + N, ... With `cost` (a function of an item:
    its length, its number of nodes...), the items go, largest first, to the rank with
    the least cost so far among those with fewer than ceil(len/N) items: every rank gets
    as many items (give or take one) and about as much work, so that no rank waits long
    for the others at the gradient exchange. Every rank computes the same assignment.
    Items keep their order within a part."""
    n, ranks, me = len(batch), size(), rank()
    if cost is None or ranks == 1:
        return list(batch[me::ranks])
    costs = [float(cost(x)) for x in batch]
    cap = -(-n // ranks)
    loads, counts, owner = [0.0] * ranks, [0] * ranks, [0] * n
    for i in sorted(range(n), key=lambda i: -costs[i]):          # stable: ties by position
        r = min((r for r in range(ranks) if counts[r] < cap), key=lambda r: loads[r])
        owner[i] = r
        loads[r] += costs[i]
        counts[r] += 1
    return [x for x, r in zip(batch, owner) if r == me]


def minibatches(data, batch_size, epoch=0, seed=0, cost=None):
    """This rank's parts of the global minibatches of one epoch: `data` in the order
    `shard(..., shuffle=True)` draws at size 1 (seeded by (seed, epoch), the same on
    every rank), cut into minibatches of `batch_size`, each split by `split_batch`. One
    process gets those minibatches whole. A last minibatch of fewer than N items is
    dropped, so that every rank gets a non-empty part of every step."""
    order = np.random.default_rng([seed, epoch]).permutation(len(data))
    for k in range(0, len(data), batch_size):
        batch = [data[i] for i in order[k:k + batch_size]]
        if len(batch) >= size():
            yield split_batch(batch, cost)


# ----------------------------------------------------------- save / load ----

def save(basename, objects):
    """`dy.save` on rank 0 only; the other ranks wait until the files are written."""
    if is_main():
        formats.save(basename, objects)
    barrier()


def load(basename, pc):
    """`dy.load` on every rank (the files must be readable by all of them: a shared file
    system, or copies); returns the loaded objects."""
    barrier()
    return formats.load(basename, pc)


def populate(pc, fname, key=""):
    """`pc.populate(fname)` on every rank (the file readable by all of them)."""
    barrier()
    pc.populate(fname, key=key)


# -------------------------------------------------------------- training ----

class DistributedTrainer:
    """Wraps a trainer: `update()` first combines the gradients of all ranks (see the
    module docstring), then runs the wrapped trainer's update on every rank. Everything
    else (learning rate, clipping threshold, status, ...) is the wrapped trainer's.

    `reduce`: "mean" divides the combined gradients by the number of ranks, "sum" does
    not. `bucket_mb`: the size of one dense buffer (one Allreduce each).
    `last_step` and `totals` report the communication: seconds spent combining
    (packing included) and inside MPI calls, and the bytes this rank sent."""

    def __init__(self, trainer, reduce="mean", bucket_mb=32):
        if reduce not in ("mean", "sum"):
            raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
        if bucket_mb <= 0:
            raise ValueError(f"bucket_mb must be positive, got {bucket_mb}")
        init()
        d = self.__dict__
        d["trainer"], d["reduce"], d["bucket_bytes"] = trainer, reduce, int(bucket_mb * 2 ** 20)
        d["last_step"] = {}
        d["totals"] = {"steps": 0, "seconds": 0.0, "mpi_seconds": 0.0, "bytes_sent": 0}
        d["_plan"], d["_plan_key"] = None, None

    def __getattr__(self, name):
        return getattr(self.__dict__["trainer"], name)

    def __setattr__(self, name, value):
        if name in self.__dict__:
            object.__setattr__(self, name, value)
        else:                        # trainer.learning_rate = ... sets the wrapped trainer's
            setattr(self.trainer, name, value)

    def update(self):
        """Combine the gradients of all ranks, then one step of the wrapped trainer."""
        if size() > 1:
            self.synchronize()
        self.trainer.update()

    def synchronize(self):
        """Combine the gradients of all ranks in place (what `update()` does before its
        step); for code that updates parameters itself."""
        dense, sparse = self._current_plan()
        t0 = time.perf_counter()
        mpi = [0.0]
        sent = self._reduce_dense(dense, mpi)
        rows, sparse_sent, received = self._exchange_sparse(sparse, mpi)
        seconds = time.perf_counter() - t0
        self.last_step.update({"seconds": seconds, "mpi_seconds": mpi[0],
                               "dense_bytes": sent, "sparse_bytes_sent": sparse_sent,
                               "sparse_rows_sent": rows, "sparse_bytes_received": received,
                               "collectives": len(dense) + (3 if sparse else 0)})
        t = self.totals
        t["steps"] += 1
        t["seconds"] += seconds
        t["mpi_seconds"] += mpi[0]
        t["bytes_sent"] += sent + sparse_sent

    def _current_plan(self):
        """(dense buckets, sparse tables), rebuilt when the model or the trainer's
        sparse setting changed."""
        tr = self.trainer
        reg = tr.model._registry      # the root's lists of every parameter, appended to
        key = (id(tr.model), len(reg.params), len(reg.lookups), id(reg.params[-1] if reg.params else None),
               id(reg.lookups[-1] if reg.lookups else None), tr.sparse_updates_enabled)
        if key != self._plan_key:
            params, lookups = tr.model.parameters_list(), tr.model.lookup_parameters_list()
            dense = [p._grad_flat for p in params]
            if tr.sparse_updates_enabled:
                sparse = lookups
            else:
                sparse, dense = [], dense + [lp._grad_flat for lp in lookups]
            _check_same_layout(dense + [lp._grad_flat for lp in sparse], "gradients")
            self.__dict__["_plan"] = (_buckets(dense, self.bucket_bytes), sparse)
            self.__dict__["_plan_key"] = key
        return self._plan

    def _reduce_dense(self, buckets, mpi):
        scale = np.float32(1.0 / size())
        for buf, group, pairs in buckets:
            np.concatenate(group, out=buf)
            t0 = time.perf_counter()
            with _collective("Allreduce of dense gradients"):
                _comm.Allreduce(_MPI.IN_PLACE, buf, op=_MPI.SUM)
            mpi[0] += time.perf_counter() - t0
            if self.reduce == "mean":
                buf *= scale
            for grad, view in pairs:
                np.copyto(grad, view)
        return sum(b[0].nbytes for b in buckets)

    def _exchange_sparse(self, tables, mpi):
        """Allgatherv of (row ids, rows) of every table; returns (rows sent, bytes sent,
        bytes received)."""
        if not tables:
            return 0, 0, 0
        n_ranks = size()
        ids = [lp.used_rows().astype(np.int32) if lp.is_updated() else np.empty(0, np.int32)
               for lp in tables]
        counts = np.array([len(i) for i in ids], dtype=np.int64)
        widths = np.array([lp.row_size for lp in tables], dtype=np.int64)
        send_ids = np.concatenate(ids)
        send_rows = np.concatenate([lp.grad[i].ravel() for lp, i in zip(tables, ids)])
        all_counts = np.empty((n_ranks, len(tables)), dtype=np.int64)
        t0 = time.perf_counter()
        with _collective("Allgather of sparse row counts"):
            _comm.Allgather(counts, all_counts)
        id_counts, row_counts = all_counts.sum(axis=1), all_counts @ widths
        all_ids = np.empty(int(id_counts.sum()), dtype=np.int32)
        all_rows = np.empty(int(row_counts.sum()), dtype=np.float32)
        with _collective("Allgatherv of sparse row ids"):
            _comm.Allgatherv(send_ids, [all_ids, id_counts])
        with _collective("Allgatherv of sparse gradient rows"):
            _comm.Allgatherv(send_rows, [all_rows, row_counts])
        mpi[0] += time.perf_counter() - t0
        for lp, mine in zip(tables, ids):
            lp.grad[mine] = 0            # added back below, in rank order like everyone's
        at_id = at_row = 0
        for r in range(n_ranks):
            for lp, n, w in zip(tables, all_counts[r], widths):
                rid = all_ids[at_id:at_id + n]
                lp.grad[rid] += all_rows[at_row:at_row + n * w].reshape(n, w)
                lp._used_mask[rid] = 1
                at_id, at_row = at_id + n, at_row + n * w
        if self.reduce == "mean":
            scale = np.float32(1.0 / n_ranks)
            for lp in tables:
                lp.grad[lp.used_rows()] *= scale
        sent = counts.nbytes + send_ids.nbytes + send_rows.nbytes
        return int(counts.sum()), sent, all_ids.nbytes + all_rows.nbytes


wrap = DistributedTrainer
