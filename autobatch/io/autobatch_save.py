"""`dy.save` / `dy.load` in our format: ``basename.data`` holds the records of every
saved object (autobatch.io.autobatch_data), ``basename.meta`` says what they are.

Files are data (docs/security.md): loading reads numbers and names, checks them, and
never imports, looks up or calls anything a file names, except `from_spec` of a class
registered in code (`dy.register_savable`; the library's builders are registered).
Saving needs no registration: a class is written under its registered name or as
"module:QualName"; a file naming classes that are not registered is refused with one
message naming them all, before anything is rebuilt.

`dy.save(basename, objects)` writes ``basename.data`` (the records of every object;
objects may not overlap, so each parameter is stored once) and ``basename.meta``, a JSON document

    {"format": "autobatch-save", "version": 2,
     "data": {"records": n, "sha256": <the end record's sha256 of basename.data>},
     "objects": [...], "sha256": <sha256 of the document without this key, as
                                  json.dumps(sort_keys=True, separators=(",", ":"))>}

with one entry per saved object:

    {"kind": "param"|"lookup", "name": full name}
    {"kind": "collection", "name": "/enc/"}                        a ParameterCollection
    {"kind": "object", "name": "/lstm/", "class": "<class name>",  an object with
     "spec": <JSON, tuples as {"__tuple__": [...]},                param_collection()
              classes as {"__class__": "<class name>"}>}          (class/spec if it
                                                                  has spec/from_spec)

Every read validates the whole file (magic, headers, sizes, checksums, trailing bytes)
and the match with the target before a single value is assigned; `dy.load` also
requires every record to be used by exactly one object of the metadata, bounds what a
spec may allocate by the values the file holds for it, and removes what it added on any failure, so
the collection is left unchanged. Every damaged or hostile file raises
`ModelFileError`. Version 1 files (no end record, unchecksummed metadata) still
populate; `dy.load` takes a version 1 pair only with ``allow_v1=True``.
"""
import bisect
import hashlib
import json
import logging
import math

from autobatch.api.core import LookupParameters, Parameters
from autobatch.errors import ModelFileError
from autobatch.io import files, legacy_names
from autobatch.io.autobatch_data import MAX_NAME, NAME, parse_records, record_kind, write_records
from autobatch.io.collection_records import (add_loaded, all_params, assign, match,
                                             rolled_back_on_failure, split_name)
from autobatch.io.registry import class_name, savable_class
from autobatch.io.specs import (decode_spec, encode_spec, registered_class, spec_class_names,
                                unregistered_error)

_log = logging.getLogger("autobatch.io.autobatch_save")

META_FORMAT = "autobatch-save"
META_VERSION = 2


def is_collection(obj):
    """Whether obj is a ParameterCollection (by what it does: io imports no model code)."""
    return all(hasattr(obj, a) for a in ("parameters_list", "lookup_parameters_list",
                                         "add_subcollection", "name"))


def _meta_digest(meta):
    rest = {k: v for k, v in meta.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":"))
                          .encode("ascii")).hexdigest()


def save(basename, objects):
    """`dy.save` in our format (basename already checked by autobatch.io.formats)."""
    _log.debug("saving %s.data / %s.meta (autobatch's format)", basename, basename)
    entries, named = [], {}

    def add(p):
        if p.name() in named:
            raise ValueError(f"dy.save: {p.name()} would be saved twice: the objects overlap "
                             "(save a collection or its parts, not both)")
        named[p.name()] = p
    for obj in objects:
        if isinstance(obj, (Parameters, LookupParameters)):
            entries.append({"kind": record_kind(obj), "name": obj.name()})
            add(obj)
            continue
        if is_collection(obj):
            pc, entry = obj, {"kind": "collection"}
        elif callable(getattr(obj, "param_collection", None)):
            pc, entry = obj.param_collection(), {"kind": "object"}
            cls = type(obj)
            if hasattr(obj, "spec") and callable(getattr(cls, "from_spec", None)):
                # registered or not: dy.load rebuilds it once its class is registered
                entry["class"] = class_name(cls)
                entry["spec"] = encode_spec(obj.spec, cls.__name__)
        else:
            raise TypeError(f"dy.save: cannot save a {type(obj).__name__}: expected Parameters, "
                            "LookupParameters, a ParameterCollection, or an object with "
                            "param_collection()")
        entry["name"] = pc.name()
        entries.append(entry)
        for p in all_params(pc):
            add(p)
    digest = write_records(basename + ".data", list(named.items()))
    meta = {"format": META_FORMAT, "version": META_VERSION,
            "data": {"records": len(named), "sha256": digest}, "objects": entries}
    meta["sha256"] = _meta_digest(meta)
    files.write_atomic(basename + ".meta", json.dumps(meta, indent=1).encode("utf-8"))


def _check_entry(e):
    if not isinstance(e, dict) or not isinstance(e.get("name"), str) or len(e["name"]) > MAX_NAME:
        return False
    kind, name = e.get("kind"), e["name"]
    if kind in ("param", "lookup"):
        return set(e) == {"kind", "name"} and bool(NAME.fullmatch(name))
    if kind == "collection" or (kind == "object" and "class" not in e):
        return set(e) == {"kind", "name"} and (name == "/" or bool(NAME.fullmatch(name[:-1])) and name.endswith("/"))
    if kind == "object":
        return (set(e) == {"kind", "name", "class", "spec"} and isinstance(e["class"], str)
                and (name == "/" or bool(NAME.fullmatch(name[:-1])) and name.endswith("/")))
    return False


def _read_meta(fname, allow_v1, data):
    """(object entries, {"records", "sha256"} of the data file or None for version 1)."""
    meta = files.read_json(data, fname, "metadata")
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


class _Names:
    """The records' names sorted, and each one's place in the file."""

    def __init__(self, records):
        self.sorted = sorted(records)
        self.place = {n: i for i, n in enumerate(records)}


def _under(names, prefix):
    """The records' names that start with `prefix`, in file order: one range of the
    sorted names, found by bisection, so that a metadata of many objects costs no more
    than their records."""
    found, at = [], bisect.bisect_left(names.sorted, prefix)
    while at < len(names.sorted) and names.sorted[at].startswith(prefix):
        found.append(names.sorted[at])
        at += 1
    return sorted(found, key=names.place.__getitem__)


def _use(names, used, label):
    """Each record belongs to one object: so a load creates no more values than the
    file holds, however many objects the metadata lists."""
    twice = [n for n in names if n in used]
    if twice:
        raise ModelFileError(f"{label}: {twice[0]} belongs to two objects of the metadata")
    used.update(names)


def _load_entry(entry, records, pc, label, used, names):
    kind, name = entry["kind"], entry["name"]
    if kind in ("param", "lookup"):
        if name not in records:
            raise ModelFileError(f"{label}: missing parameter {name}")
        rkind, shape, values = records[name]
        if rkind != kind:
            raise ModelFileError(f"{label}: {name} is stored as a {rkind}, listed as a {kind}")
        _use([name], used, label)
        base = split_name(name.rpartition("/")[2])[0]
        add = pc.add_lookup_parameters if kind == "lookup" else pc.add_parameters
        p = add(shape, init=0.0, name=base)
        p._flat[:] = values
        return p
    names = _under(names, name)
    _use(names, used, label)
    if "class" in entry:
        cls = registered_class(entry["class"])
        if not callable(getattr(cls, "from_spec", None)):
            raise ModelFileError(f"{entry['class']} has no from_spec()")
        spec = decode_spec(entry["spec"])
        registry = pc._registry
        registry.load_budget = sum(math.prod(records[n][1]) for n in names)
        try:
            obj = cls.from_spec(spec, pc)
        finally:
            registry.load_budget = None
        assign(match(obj.param_collection(), {n: records[n] for n in names}, name, label))
        return obj
    # a collection (or an object without spec): rebuild it as a new subcollection
    base = split_name(name.rstrip("/").rpartition("/")[2])[0] if name != "/" else None
    sub = pc.add_subcollection(base or None)
    for rname in names:
        rkind, shape, values = records[rname]
        add_loaded(sub, rname[len(name):], rkind, shape, values)
    return sub


def load(basename, params, meta_bytes, allow_v1):
    """`dy.load` of our format, given the bytes of ``basename.meta`` (autobatch.io.formats
    has checked the arguments and read them)."""
    label = basename + ".data"
    entries, data_ref = _read_meta(basename + ".meta", allow_v1, meta_bytes)
    needed = [n for e in entries if "class" in e for n in [e["class"], *spec_class_names(e["spec"])]]
    missing = [n for n in needed if savable_class(n) is None]
    if missing:
        raise unregistered_error(basename + ".meta", missing)
    for e in entries:
        e["name"] = legacy_names.migrate(e["name"])
    records, _, digest = parse_records(files.read_all(label, None, label), label)
    if data_ref is not None and (digest != data_ref["sha256"] or len(records) != data_ref["records"]):
        raise ModelFileError(f"{basename}: .data and .meta are not from the same dy.save")
    for e in entries:
        if e["kind"] in ("param", "lookup") and e["name"] not in records:
            raise ModelFileError(f"{label}: missing parameter {e['name']}")
    with rolled_back_on_failure(params, f"{basename}: the saved objects cannot be rebuilt"):
        used = set()
        names = _Names(records)
        objects = [_load_entry(e, records, params, label, used, names) for e in entries]
        unused = [n for n in records if n not in used]
        if unused:
            raise ModelFileError(f"{label}: {len(unused)} saved parameter(s) belong to no object "
                                 f"of the metadata: {', '.join(unused[:5])}")
        return objects
