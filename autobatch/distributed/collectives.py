"""Values of all ranks: `broadcast_parameters` (rank 0's parameter values to every rank),
`allreduce` and `allreduce_mean` (a number or an array combined over the ranks), and the
helpers the trainer shares with them: the check that every rank has the same arrays, and
the packing of many arrays into a few large buffers (buckets), one MPI call each."""
import numpy as np

from autobatch.distributed import state
from autobatch.distributed.faults import _collective
from autobatch.distributed.processes import rank, size


def _check_same_layout(arrays, what):
    """Raise unless every rank has as many arrays of the same sizes (the same model)."""
    mine = (len(arrays), sum(a.size for a in arrays), tuple(a.size for a in arrays))
    with _collective(f"checking the {what} of all ranks"):
        layouts = state.comm.allgather(mine)
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
            state.comm.Bcast(buf, root=root)
        for a, view in pairs:
            np.copyto(a, view)


def allreduce(value, op="sum"):
    """`value` (a number or an array) combined over all ranks: op "sum", "max" or "min"."""
    v = np.asarray(value, dtype=np.float64)
    if op not in ("sum", "max", "min"):
        raise ValueError(f"allreduce: op must be 'sum', 'max' or 'min', got {op!r}")
    if size() > 1:
        v = v.copy()
        MPI = state.MPI
        with _collective(f"Allreduce ({op}) of a value"):
            state.comm.Allreduce(MPI.IN_PLACE, v, op={"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op])
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
