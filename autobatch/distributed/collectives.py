"""Values of all ranks: `broadcast_parameters` (rank 0's parameter values to every rank),
`allreduce` and `allreduce_mean` (a number or an array combined over the ranks), and the
helpers the trainer shares with them: the check that every rank has the same parameters
(names and shapes), and the packing of many arrays into a few large buffers (buckets),
one MPI call each."""
import numpy as np

from autobatch.distributed import state
from autobatch.distributed.faults import _collective
from autobatch.distributed.processes import rank, size


def _layout(params, lookups, sparse=False):
    """What every rank must agree on before values of `params` and `lookups` travel
    element by element: per parameter, in order, its kind, name and shape, and for the
    lookup tables whether only their used rows travel (`sparse`)."""
    kind = "lookup table (sparse rows)" if sparse else "lookup table"
    return ([("parameter", p.name(), tuple(p.shape())) for p in params] +
            [(kind, lp.name(), tuple(lp.shape())) for lp in lookups])


def _describe(entry):
    return "nothing" if entry is None else f"{entry[0]} {entry[1]} of shape {entry[2]}"


SAME_MODEL = "every rank must build the same model in the same order"


def _check_same_layout(layout, what, hint=SAME_MODEL):
    """Raise unless every rank has the same `layout` (from _layout), naming the first
    difference. Sizes alone are not enough: W of (3, 4) on one rank and (4, 3) on
    another hold as many floats, and would be averaged element by element."""
    with _collective(f"checking the {what} of all ranks"):
        layouts = state.comm.allgather(layout)
    first = layouts[0]
    for r, theirs in enumerate(layouts):
        if theirs == first:
            continue
        k = next(k for k in range(max(len(first), len(theirs)))
                 if k >= len(first) or k >= len(theirs) or first[k] != theirs[k])
        counts = (f" (rank 0 has {len(first)}, rank {r} has {len(theirs)})"
                  if len(first) != len(theirs) else "")
        raise ValueError(
            f"the ranks' {what} differ{counts}: at #{k} rank 0 has "
            f"{_describe(first[k] if k < len(first) else None)}, rank {r} has "
            f"{_describe(theirs[k] if k < len(theirs) else None)} ({hint})")


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
    params, lookups = pc.parameters_list(), pc.lookup_parameters_list()
    _check_same_layout(_layout(params, lookups), "parameters")
    arrays = [p._flat for p in params + lookups]
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
