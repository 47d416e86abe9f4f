"""`DistributedTrainer` (also `wrap`): wraps a trainer so that `update()` (and
`update_subset()`) first combines the gradients of all ranks, dense ones in buckets with
one ``Allreduce`` each, sparse lookup rows with ``Allgatherv`` (the package docstring
says how), then runs the wrapped trainer's step on every rank; it measures the time and
bytes that combining costs."""
import time

import numpy as np

from autobatch.distributed import state
from autobatch.distributed.collectives import SAME_MODEL, _buckets, _check_same_layout, _layout
from autobatch.distributed.faults import _collective
from autobatch.distributed.processes import init, size
from autobatch.model.trainers import chosen_indices

# The wrapped trainer's methods the wrapper passes on as they are, audited: none steps
# the model. The settings and the status line; restart (zeroes the optimizer state, the
# same on every rank); update_epoch (DyNet's deprecated no-op); rule (the numpy rule, on
# arrays the caller gives). update() and update_subset() are the wrapper's own: they
# combine the gradients first. Every other method is refused, since it may step without
# combining (the trainer's private _update, a subclass's own step) and the ranks would
# then drift apart without an error.
PASSED_ON = frozenset({"set_clip_threshold", "get_clip_threshold", "set_sparse_updates",
                       "set_learning_rate", "restart", "status", "update_epoch", "rule"})


class DistributedTrainer:
    """Wraps a trainer: `update()` first combines the gradients of all ranks (see the
    docstring of autobatch.distributed), then runs the wrapped trainer's update on every
    rank; `update_subset()` does the same for the parameters it lists. The wrapped
    trainer's settings, counters and status are reached through the wrapper (learning
    rate, clipping threshold, `status()`, ...); its other methods are not (see
    PASSED_ON): call them on `.trainer`, after `synchronize()` if they step.

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
        trainer = self.__dict__["trainer"]
        value = getattr(trainer, name)
        if callable(value) and name not in PASSED_ON:
            raise AttributeError(
                f"DistributedTrainer does not pass on {name} of the wrapped "
                f"{type(trainer).__name__}: it may step the parameters without combining the "
                "gradients of all ranks, which would then drift apart. Use update() or "
                f"update_subset(), which combine first, or call .trainer.{name} (after "
                "synchronize() if it steps)")
        return value

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

    def update_subset(self, updated_params, updated_lookups):
        """Combine the gradients of the listed parameters over all ranks, then the wrapped
        trainer's `update_subset` on every rank (indices as there; every rank must list
        the same ones). The others keep their own gradients, not combined, until their
        update: combined now and again then, their first part would count N times
        with reduce="sum"."""
        ip, il = chosen_indices(self.trainer.model, updated_params, updated_lookups)
        if size() > 1:
            params, lookups = self.trainer.model.parameters_list(), self.trainer.model.lookup_parameters_list()
            self._combine(*self._plan_of([params[i] for i in ip], [lookups[i] for i in il]))
        self.trainer.update_subset(ip, il)

    def synchronize(self):
        """Combine the gradients of all ranks in place (what `update()` does before its
        step); for code that updates parameters itself."""
        self._combine(*self._current_plan())

    def _combine(self, dense, sparse, summed_tables):
        """Reduce the dense buckets and exchange the sparse tables' rows; record the cost.
        `summed_tables`: the lookup tables whose whole gradient is in the buckets (their
        rows now hold other ranks' terms, which no local backward marked)."""
        t0 = time.perf_counter()
        mpi = [0.0]
        sent = self._reduce_dense(dense, mpi)
        for lp in summed_tables:
            lp._grad_off_marks = True
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
        """_plan_of the whole model, rebuilt when the model or the trainer's sparse
        setting changed."""
        tr = self.trainer
        reg = tr.model._registry      # the root's lists of every parameter, appended to
        key = (id(tr.model), len(reg.params), len(reg.lookups), id(reg.params[-1] if reg.params else None),
               id(reg.lookups[-1] if reg.lookups else None), tr.sparse_updates_enabled)
        if key != self._plan_key:
            plan = self._plan_of(tr.model.parameters_list(), tr.model.lookup_parameters_list())
            self.__dict__["_plan"], self.__dict__["_plan_key"] = plan, key
        return self._plan

    def _plan_of(self, params, lookups):
        """(dense buckets, sparse tables) for the gradients of `params` and `lookups`,
        once every rank was found to combine the same ones (names and shapes)."""
        sparse_rows = self.trainer.sparse_updates_enabled
        _check_same_layout(_layout(params, lookups, sparse_rows), "gradients",
                           f"{SAME_MODEL}, set the same sparse updates and list the same "
                           "parameters to update_subset")
        dense = [p._grad_flat for p in params]
        if sparse_rows:
            sparse, summed_tables = list(lookups), []
        else:
            sparse, dense = [], dense + [lp._grad_flat for lp in lookups]
            summed_tables = list(lookups)
        return _buckets(dense, self.bucket_bytes), sparse, summed_tables

    def _reduce_dense(self, buckets, mpi):
        scale = np.float32(1.0 / size())
        for buf, group, pairs in buckets:
            np.concatenate(group, out=buf)
            t0 = time.perf_counter()
            with _collective("Allreduce of dense gradients"):
                state.comm.Allreduce(state.MPI.IN_PLACE, buf, op=state.MPI.SUM)
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
            state.comm.Allgather(counts, all_counts)
        id_counts, row_counts = all_counts.sum(axis=1), all_counts @ widths
        all_ids = np.empty(int(id_counts.sum()), dtype=np.int32)
        all_rows = np.empty(int(row_counts.sum()), dtype=np.float32)
        with _collective("Allgatherv of sparse row ids"):
            state.comm.Allgatherv(send_ids, [all_ids, id_counts])
        with _collective("Allgatherv of sparse gradient rows"):
            state.comm.Allgatherv(send_rows, [all_rows, row_counts])
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
