"""Saving and loading parameters: `pc.save` / `pc.populate`, `dy.save` / `dy.load`.

Parameter file format (``.data``; also what `pc.save` writes). Loading it never runs
code: it is a text header line per record followed by raw numbers.

    AUTOBATCH-PARAMS 1\\n                                       magic line, once
    {"kind": "param", "name": "/W", "shape": [3, 4], "nbytes": 48, "crc32": 123}\\n
    <nbytes bytes: little-endian float32 values>
    {"kind": "lookup", "name": "/E", "shape": [1000, 8], ...}\\n
    <...>

- ``kind`` is "param" (Parameters) or "lookup" (LookupParameters); ``name`` the full
  name (or the name under the key given to `save`); ``shape`` the Python shape.
- Values are in engine storage order: column-major for matrices (as DyNet), one row
  after another for lookup tables. ``nbytes`` is ``4 * prod(shape)``; ``crc32`` is
  ``zlib.crc32`` of those bytes.

`dy.save(basename, objects)` writes ``basename.data`` (the records of every object,
each parameter once) and ``basename.meta``, a JSON document listing the objects:
``{"format": "autobatch-save", "version": 1, "objects": [...]}`` with one of

    {"kind": "param"|"lookup", "name": full name}
    {"kind": "collection", "name": "/enc/"}                        a ParameterCollection
    {"kind": "object", "name": "/lstm/", "class": "mod:Qualname",   anything with
     "spec": <JSON, tuples as {"__tuple__": [...]},                  param_collection();
              classes as {"__class__": "mod:Qualname"}>}             class/spec if it has
                                                                     spec and from_spec

Every read validates the whole file (magic, headers, sizes, checksums, trailing bytes)
and the match with the target before a single value is assigned; a failed `dy.load`
removes what it added, so the collection is left unchanged.
"""
import json
import os
import sys
import tempfile
import zlib

import numpy as np

from autobatch._core import LookupParameters, Parameters

MAGIC = b"AUTOBATCH-PARAMS 1\n"
META_FORMAT = "autobatch-save"
MAX_HEADER = 1 << 16
KINDS = {Parameters: "param", LookupParameters: "lookup"}


class ModelFileError(ValueError):
    """A model file is truncated, corrupt, or does not match what it is loaded into."""


# --------------------------------------------------------------- records ----

def _kind(p):
    return KINDS[type(p)] if type(p) in KINDS else ("lookup" if isinstance(p, LookupParameters) else "param")


def _record_bytes(name, p):
    payload = np.ascontiguousarray(p._flat, dtype="<f4").tobytes()
    header = {"kind": _kind(p), "name": name, "shape": list(p.shape()),
              "nbytes": len(payload), "crc32": zlib.crc32(payload)}
    return json.dumps(header).encode("utf-8") + b"\n" + payload


def _write_atomic(fname, data):
    directory = os.path.dirname(os.path.abspath(fname))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".autobatch-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, fname)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_records(fname, named_params, append=False):
    """Write `(name, parameter)` pairs; `append` adds to an existing file."""
    body = b"".join(_record_bytes(name, p) for name, p in named_params)
    if append and os.path.exists(fname) and os.path.getsize(fname) > 0:
        read_records(fname)  # refuse to append to a file that is not ours
        with open(fname, "ab") as f:
            f.write(body)
    else:
        _write_atomic(fname, MAGIC + body)


def _check_header(h, fname, at):
    def bad(msg):
        return ModelFileError(f"{fname}: corrupt record header at byte {at}: {msg}")
    if not isinstance(h, dict):
        raise bad("not a JSON object")
    kind, name, shape = h.get("kind"), h.get("name"), h.get("shape")
    if kind not in ("param", "lookup"):
        raise bad(f"unknown kind {kind!r}")
    if not isinstance(name, str) or not name.startswith("/"):
        raise bad(f"bad name {name!r}")
    if (not isinstance(shape, list) or not all(type(d) is int and d > 0 for d in shape)
            or not (2 <= len(shape) <= 5 if kind == "lookup" else 1 <= len(shape) <= 4)):
        raise bad(f"bad shape {shape!r} for a {kind}")
    if h.get("nbytes") != 4 * int(np.prod(shape)):
        raise bad(f"nbytes {h.get('nbytes')!r} does not match shape {shape}")
    if type(h.get("crc32")) is not int:
        raise bad("missing crc32")
    return kind, name, tuple(shape)


def read_records(fname):
    """All records of a parameter file as {name: (kind, shape, float32 flat array)}."""
    with open(fname, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        raise ModelFileError(f"{fname}: not an autobatch parameter file (bad magic line)")
    records, pos = {}, len(MAGIC)
    while pos < len(data):
        end_of_header = data.find(b"\n", pos, pos + MAX_HEADER)
        if end_of_header < 0:
            raise ModelFileError(f"{fname}: truncated or corrupt record header at byte {pos}")
        try:
            header = json.loads(data[pos:end_of_header].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ModelFileError(f"{fname}: corrupt record header at byte {pos}: {e}") from None
        kind, name, shape = _check_header(header, fname, pos)
        start, stop = end_of_header + 1, end_of_header + 1 + header["nbytes"]
        if stop > len(data):
            raise ModelFileError(f"{fname}: truncated: {name} needs {header['nbytes']} bytes, "
                                 f"{len(data) - start} left")
        payload = data[start:stop]
        if zlib.crc32(payload) != header["crc32"]:
            raise ModelFileError(f"{fname}: corrupt data for {name} (checksum mismatch)")
        if name in records:
            raise ModelFileError(f"{fname}: parameter {name} is stored twice")
        records[name] = (kind, shape, np.frombuffer(payload, dtype="<f4").astype(np.float32))
        pos = stop
    return records


# ----------------------------------------------------------- collections ----

def _all_params(pc):
    return pc.parameters_list() + pc.lookup_parameters_list()


def _prefix(key, pc):
    if not key:
        return pc.name()
    key = key if key.startswith("/") else "/" + key
    return key if key.endswith("/") else key + "/"


def save_collection(pc, fname, key="", append=False):
    prefix, own = _prefix(key, pc), len(pc.name())
    write_records(fname, [(prefix + p.name()[own:], p) for p in _all_params(pc)], append)


def _match(pc, records, prefix, fname):
    """Pair each parameter of `pc` with its record under `prefix`; raise on any mismatch."""
    own = len(pc.name())
    stored = {name[len(prefix):]: rec for name, rec in records.items() if name.startswith(prefix)}
    pairs = []
    for p in _all_params(pc):
        rel = p.name()[own:]
        if rel not in stored:
            raise ModelFileError(f"{fname}: no saved parameter {prefix + rel} for {p.name()}")
        kind, shape, values = stored.pop(rel)
        if kind != _kind(p):
            raise ModelFileError(f"{fname}: {prefix + rel} is saved as a {kind}, "
                                 f"{p.name()} is a {_kind(p)}")
        if shape != tuple(p.shape()):
            raise ModelFileError(f"{fname}: {prefix + rel} has shape {shape}, "
                                 f"{p.name()} has shape {tuple(p.shape())}")
        pairs.append((p, values))
    if stored:
        extra = ", ".join(prefix + rel for rel in stored)
        raise ModelFileError(f"{fname}: saved parameters missing from {pc.name()}: {extra}")
    return pairs


def _assign(pairs):
    for p, values in pairs:
        p._flat[:] = values   # in place: the engine holds pointers to this memory


def populate_collection(pc, fname, key=""):
    _assign(_match(pc, read_records(fname), _prefix(key, pc), fname))


def _split(component):
    """'W_3' -> ('W', 3); 'W' -> ('W', 0); '_2' -> ('', 2)."""
    base, sep, idx = component.rpartition("_")
    return (base, int(idx)) if sep and idx.isdigit() else (component, 0)


def _add_loaded(pc, rel, kind, shape, values):
    """Add a parameter whose name relative to `pc` is exactly `rel` (may contain
    sub-collection parts, e.g. "enc/W_1"), and keep pc's name counters ahead of it."""
    parts = rel.split("/")
    base, idx = _split(parts[0])
    counts = pc._name_counts if len(parts) == 1 else pc._collection_counts
    counts[base] = max(counts.get(base, 0), idx + 1)
    cls = LookupParameters if kind == "lookup" else Parameters
    p = cls(shape, name=pc.name() + rel, owner=pc)
    p._flat[:] = values
    (pc._registry.lookups if kind == "lookup" else pc._registry.params).append(p)
    return p


# ----------------------------------------------------------- dy.save/load ----

def _encode_spec(x, where):
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, tuple):
        return {"__tuple__": [_encode_spec(v, where) for v in x]}
    if isinstance(x, list):
        return [_encode_spec(v, where) for v in x]
    if isinstance(x, dict) and all(isinstance(k, str) and not k.startswith("__") for k in x):
        return {k: _encode_spec(v, where) for k, v in x.items()}
    if isinstance(x, type):
        return {"__class__": f"{x.__module__}:{x.__qualname__}"}
    raise TypeError(f"dy.save: the spec of {where} holds a {type(x).__name__}, which cannot "
                    "be saved without pickle (allowed: numbers, strings, None, lists, tuples, "
                    "str-keyed dicts, classes)")


def _resolve_class(ref):
    """A class from "module:Qualname", looked up only among modules already imported
    (loading a file never imports code)."""
    if not isinstance(ref, str) or ":" not in ref:
        raise ModelFileError(f"bad class reference {ref!r}")
    module_name, _, qualname = ref.partition(":")
    obj = sys.modules.get(module_name)
    if obj is None:
        raise ModelFileError(f"class {ref} lives in module {module_name!r}, which is not "
                             "imported; import it before loading (loading never imports code)")
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not isinstance(obj, type):
        raise ModelFileError(f"{ref} is not a class")
    return obj


def _decode_spec(x):
    if isinstance(x, list):
        return [_decode_spec(v) for v in x]
    if isinstance(x, dict):
        if set(x) == {"__tuple__"}:
            return tuple(_decode_spec(v) for v in x["__tuple__"])
        if set(x) == {"__class__"}:
            return _resolve_class(x["__class__"])
        return {k: _decode_spec(v) for k, v in x.items()}
    return x


def _is_collection(obj):
    return all(hasattr(obj, a) for a in ("parameters_list", "lookup_parameters_list",
                                         "add_subcollection", "name"))


def save(basename, objects):
    """Save parameters, lookup parameters, collections and objects with a
    `param_collection()` method (builders) to ``basename.data`` / ``basename.meta``."""
    entries, named = [], {}
    for obj in objects:
        if isinstance(obj, (Parameters, LookupParameters)):
            entries.append({"kind": _kind(obj), "name": obj.name()})
            named.setdefault(obj.name(), obj)
            continue
        if _is_collection(obj):
            pc, entry = obj, {"kind": "collection"}
        elif callable(getattr(obj, "param_collection", None)):
            pc, entry = obj.param_collection(), {"kind": "object"}
            cls = type(obj)
            if hasattr(obj, "spec") and callable(getattr(cls, "from_spec", None)):
                entry["class"] = f"{cls.__module__}:{cls.__qualname__}"
                entry["spec"] = _encode_spec(obj.spec, cls.__name__)
        else:
            raise TypeError(f"dy.save: cannot save a {type(obj).__name__}: expected Parameters, "
                            "LookupParameters, a ParameterCollection, or an object with "
                            "param_collection()")
        entry["name"] = pc.name()
        entries.append(entry)
        for p in _all_params(pc):
            named.setdefault(p.name(), p)
    meta = {"format": META_FORMAT, "version": 1, "objects": entries}
    write_records(basename + ".data", list(named.items()))
    _write_atomic(basename + ".meta", json.dumps(meta, indent=1).encode("utf-8"))


def _read_meta(fname):
    try:
        with open(fname, "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(f"{fname}: corrupt metadata: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != META_FORMAT or meta.get("version") != 1:
        raise ModelFileError(f"{fname}: not an autobatch save file (format/version)")
    entries = meta.get("objects")
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and e.get("kind") in ("param", "lookup", "collection", "object")
            and isinstance(e.get("name"), str) for e in entries):
        raise ModelFileError(f"{fname}: corrupt object list")
    return entries


def _load_entry(entry, records, pc, fname):
    kind, name = entry["kind"], entry["name"]
    if kind in ("param", "lookup"):
        if name not in records:
            raise ModelFileError(f"{fname}: missing parameter {name}")
        rkind, shape, values = records[name]
        if rkind != kind:
            raise ModelFileError(f"{fname}: {name} is stored as a {rkind}, listed as a {kind}")
        base = _split(name.rstrip("/").rpartition("/")[2])[0]
        add = pc.add_lookup_parameters if kind == "lookup" else pc.add_parameters
        p = add(shape, init=0.0, name=base)
        p._flat[:] = values
        return p
    if "class" in entry:
        cls = _resolve_class(entry["class"])
        if not callable(getattr(cls, "from_spec", None)):
            raise ModelFileError(f"{entry['class']} has no from_spec()")
        obj = cls.from_spec(_decode_spec(entry.get("spec")), pc)
        _assign(_match(obj.param_collection(), records, name, fname))
        return obj
    # a collection (or an object without spec): rebuild it as a new subcollection
    base = _split(name.rstrip("/").rpartition("/")[2])[0] if name != "/" else None
    sub = pc.add_subcollection(base or None)
    for rname, (rkind, shape, values) in records.items():
        if rname.startswith(name):
            _add_loaded(sub, rname[len(name):], rkind, shape, values)
    return sub


def load(basename, params):
    """Load the objects saved by `save(basename, ...)`, adding them to the collection
    `params`, and return them in the saved order (DyNet semantics): Parameters and
    LookupParameters come back as new parameters, collections as new subcollections,
    objects with spec/from_spec as `cls.from_spec(spec, params)` populated with the saved
    values. Their classes must already be imported. On any error nothing is added."""
    entries = _read_meta(basename + ".meta")
    records = read_records(basename + ".data")
    for e in entries:
        if e["kind"] in ("param", "lookup") and e["name"] not in records:
            raise ModelFileError(f"{basename}.data: missing parameter {e['name']}")
    snap = params._snapshot()
    try:
        return [_load_entry(e, records, params, basename + ".data") for e in entries]
    except BaseException:
        params._rollback(snap)
        raise


def load_generator(basename, params):
    """As `load`, yielding the objects (all are loaded and validated first)."""
    yield from load(basename, params)
