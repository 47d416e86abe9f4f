"""Saving and loading parameters: `pc.save` / `pc.populate`, `dy.save` / `dy.load`.

Files are data (docs/security.md): loading reads numbers and names, checks them, and
never imports, looks up or calls anything a file names, except `from_spec` of a class
registered in code (`dy.register_savable`; the library's builders are registered).

Parameter file (``.data``; also what `pc.save` writes): a text header line per record
followed by raw numbers, then an end record.

    AUTOBATCH-PARAMS 2\\n                                       magic line, once
    {"kind": "param", "name": "/W", "shape": [3, 4], "nbytes": 48, "crc32": 123}\\n
    <nbytes bytes: little-endian float32 values>
    {"kind": "lookup", "name": "/E", "shape": [1000, 8], ...}\\n
    <...>
    {"kind": "end", "records": 2, "sha256": "<hex>"}\\n                  nothing after it

- ``kind`` is "param" (Parameters) or "lookup" (LookupParameters); ``name`` the full
  name (or the name under the key given to `save`); ``shape`` the Python shape.
- Values are in engine storage order: column-major for matrices (as DyNet), one row
  after another for lookup tables. ``nbytes`` is ``4 * prod(shape)``; ``crc32`` is
  ``zlib.crc32`` of those bytes. The end record's ``sha256`` covers every byte before
  it (magic, headers, values), so a damaged name or a lost record is caught too.

`dy.save(basename, objects)` writes ``basename.data`` (the records of every object;
objects may not overlap, so each parameter is stored once) and ``basename.meta``, a JSON document

    {"format": "autobatch-save", "version": 2,
     "data": {"records": n, "sha256": <the end record's sha256 of basename.data>},
     "objects": [...], "sha256": <sha256 of the document without this key, as
                                  json.dumps(sort_keys=True, separators=(",", ":"))>}

with one entry per saved object:

    {"kind": "param"|"lookup", "name": full name}
    {"kind": "collection", "name": "/enc/"}                        a ParameterCollection
    {"kind": "object", "name": "/lstm/", "class": "<registered name>",  an object with
     "spec": <JSON, tuples as {"__tuple__": [...]},                     param_collection()
              registered classes as {"__class__": "<registered name>"}>}  (class/spec if
                                                                   it is registered)

Every read validates the whole file (magic, headers, sizes, checksums, trailing bytes)
and the match with the target before a single value is assigned; `dy.load` also
requires every record to be used by exactly one object of the metadata, bounds what a
spec may allocate by the values the file holds for it, and removes what it added on any failure, so
the collection is left unchanged. Every damaged or hostile file raises
`ModelFileError`. Version 1 files (no end record, unchecksummed metadata) still
populate; `dy.load` takes a version 1 pair only with ``allow_v1=True``.
"""
import contextlib
import hashlib
import io
import json
import logging
import math
import os
import re
import stat
import tempfile
import zlib

import numpy as np

from autobatch.api.core import LookupParameters, Parameters
from autobatch import legacy_names
from autobatch.builders import savable_class, savable_name

_log = logging.getLogger("autobatch.serialization")

MAGIC = b"AUTOBATCH-PARAMS 2\n"
MAGIC_V1 = b"AUTOBATCH-PARAMS 1\n"
META_FORMAT = "autobatch-save"
META_VERSION = 2
MAX_HEADER = 1 << 16     # bytes of one record header line
MAX_NAME = 4096          # characters of a parameter name
MAX_SPEC_DEPTH = 32      # nesting of a spec
KINDS = {Parameters: "param", LookupParameters: "lookup"}
_HEADER_KEYS = {"kind", "name", "shape", "nbytes", "crc32"}
_NAME = re.compile(r"(?:/[^/\x00-\x1f\x7f]{1,255})+")   # "/a/b_1": no empty parts


class ModelFileError(ValueError):
    """A model file is truncated, corrupt, hostile, or does not match what it is loaded into."""


# ------------------------------------------------------------ file access ----

def _source(src, what, files=True):
    """(path, None) for a str/bytes/os.PathLike path, (None, src) for a file object.
    Anything else, an int in particular (it would be taken as a file descriptor and
    closed), is a TypeError."""
    if isinstance(src, (str, bytes, os.PathLike)):
        return os.fsdecode(os.fspath(src)), None
    if files and not isinstance(src, (int, float)) and (hasattr(src, "read") or hasattr(src, "write")):
        return None, src
    hint = " (file descriptors are not accepted: pass a path or an open file)" if isinstance(src, int) else ""
    raise TypeError(f"{what}: expected a path{' or a binary file object' if files else ''}, "
                    f"got {type(src).__name__}{hint}")


def _label(path, f):
    name = path if path is not None else getattr(f, "name", None)
    return name if isinstance(name, str) else "<file object>"


def _regular_size(fd, label):
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ModelFileError(f"{label}: not a regular file (devices, pipes, sockets and "
                             "directories are refused: a model file is read whole)")
    return st.st_size


def _read_regular(f, fd, label):
    """The rest of a regular file, read with one allocation of its actual size."""
    left = max(_regular_size(fd, label) - f.tell(), 0)
    data = f.read(left + 1)
    if not isinstance(data, bytes):
        raise TypeError(f"{label}: open the file in binary mode ('rb')")
    if len(data) > left:
        raise ModelFileError(f"{label}: the file grew while it was being read")
    return data


def _read_all(path, f, label):
    if path is not None:
        # O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused below)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            _regular_size(fd, label)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as fh:
            return _read_regular(fh, fd, label)
    if isinstance(f, io.TextIOBase):
        raise TypeError(f"{label}: open the file in binary mode ('rb')")
    if not callable(getattr(f, "read", None)):
        raise TypeError(f"{label}: expected a path or a readable binary file object")
    try:
        fd = f.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if isinstance(fd, int) and not isinstance(fd, bool):
        return _read_regular(f, fd, label)
    data = f.read()     # an in-memory file (io.BytesIO): its size is already allocated
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"{label}: open the file in binary mode ('rb')")
    return bytes(data)


def _write_atomic(fname, data):
    """Write a new file under a temporary name, then rename it: a reader never sees half a
    file. A destination that exists and is not a regular file (/dev/null, a FIFO) is
    written to, never replaced."""
    if os.path.exists(fname) and not os.path.isfile(fname):
        with open(fname, "wb") as f:
            f.write(data)
        return
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


def _unique_keys(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("a key appears twice in one object")
    return d


def _json(text, label, what):
    """Parse JSON from a file; every way it can fail is a ModelFileError."""
    try:
        return json.loads(text.decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        # ValueError: bad JSON or an integer of thousands of digits; RecursionError: nesting
        raise ModelFileError(f"{label}: corrupt {what}: {type(e).__name__}: {str(e)[:200]}") from None


# --------------------------------------------------------------- records ----

def _kind(p):
    return KINDS[type(p)] if type(p) in KINDS else ("lookup" if isinstance(p, LookupParameters) else "param")


def _record_bytes(name, p):
    payload = np.ascontiguousarray(p._flat, dtype="<f4").tobytes()
    header = {"kind": _kind(p), "name": name, "shape": list(p.shape()),
              "nbytes": len(payload), "crc32": zlib.crc32(payload)}
    return json.dumps(header).encode("utf-8") + b"\n" + payload


def _file_bytes(records):
    """A whole parameter file from encoded records, and its sha256."""
    body = MAGIC + b"".join(records)
    digest = hashlib.sha256(body).hexdigest()
    end = {"kind": "end", "records": len(records), "sha256": digest}
    return body + json.dumps(end).encode("utf-8") + b"\n", digest


def write_records(dest, named_params, append=False):
    """Write `(name, parameter)` pairs to a path or binary file object; `append` (paths
    only) adds them to an existing file, which is rewritten atomically. Returns the
    file's sha256 (the end record's)."""
    path, f = _source(dest, "save")
    new = [_record_bytes(name, p) for name, p in named_params]
    if append:
        if path is None:
            raise TypeError("save(append=True) needs a path, not a file object")
        if os.path.exists(path) and os.path.getsize(path) > 0:
            records, spans, _ = parse_records(_read_all(path, None, path), path)  # ours only
            twice = [name for name, _ in named_params if name in records]
            if twice:
                raise ValueError(f"{path}: already holds {', '.join(twice[:5])}; appending "
                                 "them again would make the file unreadable")
            new = spans + new
    data, digest = _file_bytes(new)
    if path is None:
        f.write(data)
    else:
        _write_atomic(path, data)
    return digest


def _check_header(h, label, at):
    def bad(msg):
        return ModelFileError(f"{label}: corrupt record header at byte {at}: {msg}")
    if not isinstance(h, dict):
        raise bad("not a JSON object")
    if set(h) != _HEADER_KEYS:
        raise bad(f"fields {sorted(h)}, expected {sorted(_HEADER_KEYS)}")
    kind, name, shape, nbytes = h["kind"], h["name"], h["shape"], h["nbytes"]
    if kind not in ("param", "lookup"):
        raise bad(f"unknown kind {kind!r}")
    if not isinstance(name, str) or len(name) > MAX_NAME or not _NAME.fullmatch(name):
        raise bad(f"bad name {name!r:.100}")
    if (not isinstance(shape, list) or not all(type(d) is int and d > 0 for d in shape)
            or not (2 <= len(shape) <= 5 if kind == "lookup" else 1 <= len(shape) <= 4)):
        raise bad(f"bad shape {shape!r:.100} for a {kind}")
    if type(nbytes) is not int or nbytes != 4 * math.prod(shape):   # exact: no int64 wrap
        raise bad(f"nbytes {nbytes!r:.40} does not match shape {shape}")
    if type(h["crc32"]) is not int:
        raise bad("missing crc32")
    return kind, name, tuple(shape), nbytes


def _check_end(h, data, at, eol, count, label):
    if set(h) != {"kind", "records", "sha256"} or h["records"] != count or type(h["records"]) is not int:
        raise ModelFileError(f"{label}: corrupt end record at byte {at} (or records lost: "
                             f"{count} read, {h.get('records')!r:.40} written)")
    digest = hashlib.sha256(data[:at]).hexdigest()
    if h["sha256"] != digest:
        raise ModelFileError(f"{label}: corrupt file (sha256 of its contents does not match)")
    if eol + 1 != len(data):
        raise ModelFileError(f"{label}: {len(data) - eol - 1} unexpected bytes after the end record")
    return digest


def parse_records(data, label):
    """Check a whole parameter file. Returns ({name: (kind, shape, float32 values)},
    [bytes of each record], the file's sha256 or None for a version 1 file). The values
    are read-only views of `data`."""
    if data.startswith(MAGIC):
        version = 2
    elif data.startswith(MAGIC_V1):
        version = 1
    else:
        raise ModelFileError(f"{label}: not an autobatch parameter file (bad magic line)")
    records, spans, pos = {}, [], len(MAGIC)
    while pos < len(data):
        eol = data.find(b"\n", pos, pos + MAX_HEADER)
        if eol < 0:
            raise ModelFileError(f"{label}: truncated or corrupt record header at byte {pos}")
        header = _json(data[pos:eol], label, f"record header at byte {pos}")
        if version == 2 and isinstance(header, dict) and header.get("kind") == "end":
            return records, spans, _check_end(header, data, pos, eol, len(records), label)
        kind, name, shape, nbytes = _check_header(header, label, pos)
        name = legacy_names.migrate(name)   # builders' names before they took DyNet's
        start, stop = eol + 1, eol + 1 + nbytes
        if stop > len(data):
            raise ModelFileError(f"{label}: truncated: {name} needs {nbytes} bytes, "
                                 f"{len(data) - start} left")
        if zlib.crc32(data[start:stop]) != header["crc32"]:
            raise ModelFileError(f"{label}: corrupt data for {name} (checksum mismatch)")
        if name in records:
            raise ModelFileError(f"{label}: parameter {name} is stored twice")
        records[name] = (kind, shape, np.frombuffer(data, dtype="<f4", count=nbytes // 4, offset=start))
        spans.append(data[pos:stop])
        pos = stop
    if version == 2:
        raise ModelFileError(f"{label}: truncated (no end record)")
    return records, spans, None


def read_records(src):
    """All records of a parameter file (path or binary file object) as
    {name: (kind, shape, float32 flat array)}."""
    path, f = _source(src, "read_records")
    label = _label(path, f)
    return parse_records(_read_all(path, f, label), label)[0]


# ----------------------------------------------------------- collections ----

def _all_params(pc):
    return pc.parameters_list() + pc.lookup_parameters_list()


def _prefix(key, pc):
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")
    if not key:
        return pc.name()
    key = key if key.startswith("/") else "/" + key
    return key if key.endswith("/") else key + "/"


def save_collection(pc, dest, key="", append=False):
    prefix, own = _prefix(key, pc), len(pc.name())
    write_records(dest, [(prefix + p.name()[own:], p) for p in _all_params(pc)], append)


def _match(pc, records, prefix, label):
    """Pair each parameter of `pc` with its record under `prefix`; raise on any mismatch."""
    own = len(pc.name())
    stored = {name[len(prefix):]: rec for name, rec in records.items() if name.startswith(prefix)}
    pairs = []
    for p in _all_params(pc):
        rel = p.name()[own:]
        if rel not in stored:
            raise ModelFileError(f"{label}: no saved parameter {prefix + rel} for {p.name()}")
        kind, shape, values = stored.pop(rel)
        if kind != _kind(p):
            raise ModelFileError(f"{label}: {prefix + rel} is saved as a {kind}, "
                                 f"{p.name()} is a {_kind(p)}")
        if shape != tuple(p.shape()):
            raise ModelFileError(f"{label}: {prefix + rel} has shape {shape}, "
                                 f"{p.name()} has shape {tuple(p.shape())}")
        pairs.append((p, values))
    if stored:
        extra = ", ".join(prefix + rel for rel in list(stored)[:5])
        raise ModelFileError(f"{label}: saved parameters missing from {pc.name()}: {extra}"
                             + (" ..." if len(stored) > 5 else ""))
    return pairs


def _assign(pairs):
    for p, values in pairs:
        p._flat[:] = values   # in place: the engine holds pointers to this memory


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


# ----------------------------------------------------------------- specs ----

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
        name = savable_name(x)
        if name is None:
            raise TypeError(f"dy.save: the spec of {where} names the class {x.__qualname__}, "
                            "which is not registered: call dy.register_savable on it so that "
                            "dy.load may name it")
        return {"__class__": name}
    raise TypeError(f"dy.save: the spec of {where} holds a {type(x).__name__}, which cannot "
                    "be saved without pickle (allowed: numbers, strings, None, lists, tuples, "
                    "str-keyed dicts, registered classes)")


def _registered(ref):
    """The class registered under `ref`: a dictionary lookup; never an import or a
    getattr on a module."""
    cls = savable_class(ref)
    if cls is None:
        raise ModelFileError(f"class {ref!r:.200} is not registered for loading: a file can "
                             "name only classes registered in code with dy.register_savable")
    return cls


def _decode_spec(x, depth=0):
    if depth > MAX_SPEC_DEPTH:
        raise ModelFileError(f"spec nested deeper than {MAX_SPEC_DEPTH}")
    if isinstance(x, list):
        return [_decode_spec(v, depth + 1) for v in x]
    if isinstance(x, dict):
        special = [k for k in x if k.startswith("__")]
        if special == ["__tuple__"] and len(x) == 1 and isinstance(x["__tuple__"], list):
            return tuple(_decode_spec(v, depth + 1) for v in x["__tuple__"])
        if special == ["__class__"] and len(x) == 1:
            return _registered(x["__class__"])
        if special:
            raise ModelFileError(f"bad spec object with keys {sorted(x)[:5]}")
        return {k: _decode_spec(v, depth + 1) for k, v in x.items()}
    return x


# ----------------------------------------------------------- dy.save/load ----

def _is_collection(obj):
    return all(hasattr(obj, a) for a in ("parameters_list", "lookup_parameters_list",
                                         "add_subcollection", "name"))


def _meta_digest(meta):
    rest = {k: v for k, v in meta.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":"))
                          .encode("ascii")).hexdigest()


def save(basename, objects, format=None):
    """Save parameters, lookup parameters, collections and objects with a
    `param_collection()` method (builders) to ``basename.data`` / ``basename.meta``.
    An object with `spec` and `from_spec` is saved with its spec, so `load` rebuilds
    it; its class must be registered (`dy.register_savable`).

    format="dynet" writes DyNet's files instead (autobatch.dynet_meta), which DyNet's
    `dy.load` reads: Parameters, LookupParameters and the builders DyNet has."""
    basename = _source(basename, "dy.save", files=False)[0]
    if format == "dynet":
        from autobatch import dynet_meta
        return dynet_meta.save(basename, list(objects))
    if format not in (None, "autobatch"):
        raise ValueError(f"dy.save: format must be 'autobatch' or 'dynet', got {format!r}")
    _log.debug("saving %s.data / %s.meta (autobatch's format)", basename, basename)
    entries, named = [], {}

    def add(p):
        if p.name() in named:
            raise ValueError(f"dy.save: {p.name()} would be saved twice: the objects overlap "
                             "(save a collection or its parts, not both)")
        named[p.name()] = p
    for obj in objects:
        if isinstance(obj, (Parameters, LookupParameters)):
            entries.append({"kind": _kind(obj), "name": obj.name()})
            add(obj)
            continue
        if _is_collection(obj):
            pc, entry = obj, {"kind": "collection"}
        elif callable(getattr(obj, "param_collection", None)):
            pc, entry = obj.param_collection(), {"kind": "object"}
            cls = type(obj)
            if hasattr(obj, "spec") and callable(getattr(cls, "from_spec", None)):
                name = savable_name(cls)
                if name is None:
                    raise TypeError(f"dy.save: {cls.__qualname__} has spec and from_spec but is "
                                    f"not registered: call dy.register_savable({cls.__name__}) "
                                    "(in code, before dy.save and dy.load) so dy.load may rebuild it")
                entry["class"] = name
                entry["spec"] = _encode_spec(obj.spec, cls.__name__)
        else:
            raise TypeError(f"dy.save: cannot save a {type(obj).__name__}: expected Parameters, "
                            "LookupParameters, a ParameterCollection, or an object with "
                            "param_collection()")
        entry["name"] = pc.name()
        entries.append(entry)
        for p in _all_params(pc):
            add(p)
    digest = write_records(basename + ".data", list(named.items()))
    meta = {"format": META_FORMAT, "version": META_VERSION,
            "data": {"records": len(named), "sha256": digest}, "objects": entries}
    meta["sha256"] = _meta_digest(meta)
    _write_atomic(basename + ".meta", json.dumps(meta, indent=1).encode("utf-8"))


def _check_entry(e):
    if not isinstance(e, dict) or not isinstance(e.get("name"), str) or len(e["name"]) > MAX_NAME:
        return False
    kind, name = e.get("kind"), e["name"]
    if kind in ("param", "lookup"):
        return set(e) == {"kind", "name"} and bool(_NAME.fullmatch(name))
    if kind == "collection" or (kind == "object" and "class" not in e):
        return set(e) == {"kind", "name"} and (name == "/" or bool(_NAME.fullmatch(name[:-1])) and name.endswith("/"))
    if kind == "object":
        return (set(e) == {"kind", "name", "class", "spec"} and isinstance(e["class"], str)
                and (name == "/" or bool(_NAME.fullmatch(name[:-1])) and name.endswith("/")))
    return False


def _read_meta(fname, allow_v1, data):
    """(object entries, {"records", "sha256"} of the data file or None for version 1)."""
    meta = _json(data, fname, "metadata")
    if not isinstance(meta, dict) or meta.get("format") != META_FORMAT:
        raise ModelFileError(f"{fname}: not an autobatch save file")
    version = meta.get("version")
    if type(version) is int and version == 1:
        if not allow_v1:
            raise ModelFileError(f"{fname}: written by an older autobatch whose metadata has no "
                                 "checksum; load it with dy.load(..., allow_v1=True) if you trust "
                                 "it, then dy.save it again")
        if set(meta) != {"format", "version", "objects"}:
            raise ModelFileError(f"{fname}: corrupt metadata (fields {sorted(meta)[:8]})")
        data_ref = None
    elif type(version) is int and version == META_VERSION:
        if set(meta) != {"format", "version", "data", "objects", "sha256"}:
            raise ModelFileError(f"{fname}: corrupt metadata (fields {sorted(meta)[:8]})")
        if meta["sha256"] != _meta_digest(meta):
            raise ModelFileError(f"{fname}: corrupt metadata (checksum mismatch)")
        data_ref = meta["data"]
        if (not isinstance(data_ref, dict) or set(data_ref) != {"records", "sha256"}
                or type(data_ref["records"]) is not int or not isinstance(data_ref["sha256"], str)):
            raise ModelFileError(f"{fname}: corrupt metadata (data reference)")
    else:
        raise ModelFileError(f"{fname}: unsupported save format version {version!r:.40}")
    entries = meta["objects"]
    if not isinstance(entries, list) or not all(_check_entry(e) for e in entries):
        raise ModelFileError(f"{fname}: corrupt object list")
    return entries, data_ref


def _under(records, name):
    return [rname for rname in records if rname.startswith(name)]


def _use(names, used, label):
    """Each record belongs to one object: so a load creates no more values than the
    file holds, however many objects the metadata lists."""
    twice = [n for n in names if n in used]
    if twice:
        raise ModelFileError(f"{label}: {twice[0]} belongs to two objects of the metadata")
    used.update(names)


def _load_entry(entry, records, pc, label, used):
    kind, name = entry["kind"], entry["name"]
    if kind in ("param", "lookup"):
        if name not in records:
            raise ModelFileError(f"{label}: missing parameter {name}")
        rkind, shape, values = records[name]
        if rkind != kind:
            raise ModelFileError(f"{label}: {name} is stored as a {rkind}, listed as a {kind}")
        _use([name], used, label)
        base = _split(name.rpartition("/")[2])[0]
        add = pc.add_lookup_parameters if kind == "lookup" else pc.add_parameters
        p = add(shape, init=0.0, name=base)
        p._flat[:] = values
        return p
    names = _under(records, name)
    _use(names, used, label)
    if "class" in entry:
        cls = _registered(entry["class"])
        if not callable(getattr(cls, "from_spec", None)):
            raise ModelFileError(f"{entry['class']} has no from_spec()")
        spec = _decode_spec(entry["spec"])
        registry = pc._registry
        registry.load_budget = sum(math.prod(records[n][1]) for n in names)
        try:
            obj = cls.from_spec(spec, pc)
        finally:
            registry.load_budget = None
        _assign(_match(obj.param_collection(), records, name, label))
        return obj
    # a collection (or an object without spec): rebuild it as a new subcollection
    base = _split(name.rstrip("/").rpartition("/")[2])[0] if name != "/" else None
    sub = pc.add_subcollection(base or None)
    for rname in names:
        rkind, shape, values = records[rname]
        _add_loaded(sub, rname[len(name):], rkind, shape, values)
    return sub


def load(basename, params, allow_v1=False):
    """Load the objects saved by `save(basename, ...)`, adding them to the collection
    `params`, and return them in the saved order (DyNet semantics): Parameters and
    LookupParameters come back as new parameters, collections as new subcollections,
    objects with spec/from_spec as `cls.from_spec(spec, params)` populated with the saved
    values; `cls` must be registered (`dy.register_savable`). Any damaged or hostile
    file raises ModelFileError and adds nothing. `allow_v1` accepts files written
    before the metadata had a checksum.

    Files written by DyNet's `dy.save` (a ``.meta`` of pickles) load too, read as data
    (autobatch.dynet_meta): Parameters, LookupParameters, and DyNet's builders rebuilt
    as ours from their spec and populated in order, as DyNet's `dy.load` does."""
    basename = _source(basename, "dy.load", files=False)[0]
    if not _is_collection(params) or not hasattr(params, "_snapshot"):
        raise TypeError(f"dy.load: params must be a ParameterCollection, got {type(params).__name__}")
    label = basename + ".data"
    meta_bytes = _read_all(basename + ".meta", None, basename + ".meta")
    if meta_bytes[:1] == b"\x80":         # DyNet's .meta: pickles, read as data only
        from autobatch import dynet_meta
        return dynet_meta.load(basename, params, meta_bytes)
    entries, data_ref = _read_meta(basename + ".meta", allow_v1, meta_bytes)
    for e in entries:
        e["name"] = legacy_names.migrate(e["name"])
    records, _, digest = parse_records(_read_all(label, None, label), label)
    if data_ref is not None and (digest != data_ref["sha256"] or len(records) != data_ref["records"]):
        raise ModelFileError(f"{basename}: .data and .meta are not from the same dy.save")
    for e in entries:
        if e["kind"] in ("param", "lookup") and e["name"] not in records:
            raise ModelFileError(f"{label}: missing parameter {e['name']}")
    with _rolled_back_on_failure(params, f"{basename}: the saved objects cannot be rebuilt"):
        used = set()
        objects = [_load_entry(e, records, params, label, used) for e in entries]
        unused = [n for n in records if n not in used]
        if unused:
            raise ModelFileError(f"{label}: {len(unused)} saved parameter(s) belong to no object "
                                 f"of the metadata: {', '.join(unused[:5])}")
        return objects


@contextlib.contextmanager
def _rolled_back_on_failure(params, what):
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


def load_generator(basename, params, allow_v1=False):
    """As `load`, yielding the objects (all are loaded and validated first)."""
    yield from load(basename, params, allow_v1)
