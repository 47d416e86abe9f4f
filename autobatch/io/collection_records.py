"""A collection's parameters and the records of a file: which record belongs to which
parameter, writing a collection's records, adding loaded parameters, and putting a
collection back as it was when a load fails."""
import contextlib

from autobatch.api.core import LookupParameters, Parameters
from autobatch.errors import ModelFileError
from autobatch.io.assign_all import assign_all
from autobatch.io.autobatch_data import record_kind, write_records


def all_params(pc):
    """Every parameter of pc's tree: its Parameters, then its LookupParameters."""
    return pc.parameters_list() + pc.lookup_parameters_list()


def key_prefix(key, pc):
    """The name prefix records of pc have under `key` ("/key/"; pc's own name if empty)."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")
    if not key:
        return pc.name()
    key = key if key.startswith("/") else "/" + key
    return key if key.endswith("/") else key + "/"


def save_collection(pc, dest, key="", append=False):
    prefix, own = key_prefix(key, pc), len(pc.name())
    write_records(dest, [(prefix + p.name()[own:], p) for p in all_params(pc)], append)


def match(pc, records, prefix, label):
    """Pair each parameter of `pc` with its record under `prefix`; raise on any mismatch."""
    own = len(pc.name())
    stored = {name[len(prefix):]: rec for name, rec in records.items() if name.startswith(prefix)}
    pairs = []
    for p in all_params(pc):
        rel = p.name()[own:]
        if rel not in stored:
            raise ModelFileError(f"{label}: no saved parameter {prefix + rel} for {p.name()}")
        kind, shape, values = stored.pop(rel)
        if kind != record_kind(p):
            raise ModelFileError(f"{label}: {prefix + rel} is saved as a {kind}, "
                                 f"{p.name()} is a {record_kind(p)}")
        if shape != tuple(p.shape()):
            raise ModelFileError(f"{label}: {prefix + rel} has shape {shape}, "
                                 f"{p.name()} has shape {tuple(p.shape())}")
        pairs.append((p, values))
    if stored:
        extra = ", ".join(prefix + rel for rel in list(stored)[:5])
        raise ModelFileError(f"{label}: saved parameters missing from {pc.name()}: {extra}"
                             + (" ..." if len(stored) > 5 else ""))
    return pairs


def assign(pairs):
    """Give each parameter the values paired with it, all or none of them under a
    Ctrl-C (autobatch.io.assign_all); in place: the engine holds pointers to this memory."""
    assign_all([p._flat for p, _ in pairs], [values for _, values in pairs])


def split_name(component):
    """'W_3' -> ('W', 3); 'W' -> ('W', 0); '_2' -> ('', 2)."""
    base, sep, idx = component.rpartition("_")
    return (base, int(idx)) if sep and idx.isdigit() else (component, 0)


def add_loaded(pc, rel, kind, shape, values):
    """Add a parameter whose name relative to `pc` is exactly `rel` (may contain
    sub-collection parts, e.g. "enc/W_1"), and keep pc's name counters ahead of it."""
    parts = rel.split("/")
    base, idx = split_name(parts[0])
    counts = pc._name_counts if len(parts) == 1 else pc._collection_counts
    counts[base] = max(counts.get(base, 0), idx + 1)
    cls = LookupParameters if kind == "lookup" else Parameters
    p = cls(shape, name=pc.name() + rel, owner=pc)
    p._flat[:] = values
    (pc._registry.lookups if kind == "lookup" else pc._registry.params).append(p)
    return p


@contextlib.contextmanager
def rolled_back_on_failure(params, what):
    """Run the body (a load into the collection params); if it fails, params is put back
    as it was, and an error that is not already a ModelFileError (or MemoryError, or
    not an Exception, like KeyboardInterrupt) becomes ModelFileError("what: ...")."""
    snap = params._snapshot()
    try:
        yield
    except BaseException as e:
        params._rollback(snap)
        if isinstance(e, (ModelFileError, MemoryError)) or not isinstance(e, Exception):
            raise
        raise ModelFileError(f"{what}: {type(e).__name__}: {str(e)[:300]}") from e
