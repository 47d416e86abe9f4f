"""Which format a model file is in, and partial save/load: one `Parameters` or
`LookupParameters` saved or populated under a key, `load_param` /
`load_lookup_param`, and a collection saved in DyNet's format.

Two formats are read, told apart by their first bytes: ours (autobatch.io.autobatch_data,
checksummed binary) and DyNet's text format (autobatch.io.dynet_text). Both are
validated whole before a value is assigned or a parameter is added.

Semantics follow DyNet's (python/_dynet.pyx, dynet/io.cc):

- `p.save(fname, key="", append=False)`: the parameter under the name `key` (default:
  its full name);
- `p.populate(fname, key)`: the values of the parameter of that name, whose shape must
  be p's; from a DyNet file also its gradient (zero when the file stores none);
- `pc.load_param(fname, key)` / `pc.load_lookup_param(fname, key)`: a new parameter of
  `pc` with the stored values;
- `pc.populate(fname, key)` of a DyNet file pairs, in order, the records whose names
  start with `key` (all when it is empty) with pc's parameters, and separately with its
  lookup parameters (DyNet matches by position, not by name); of our format, by name
  (autobatch.io.collection_records).
"""
import os
import sys

from autobatch.api import core
from autobatch.errors import ModelFileError
from autobatch.io import collection_records, dynet_text, files
from autobatch.io.autobatch_data import MAGIC, MAGIC_V1, NAME, parse_records, record_kind, write_records
from autobatch.io.collection_records import all_params, assign, key_prefix, match, split_name

FORMATS = (None, "autobatch", "dynet")


def read(src, what):
    """(records in file order, whether the file is DyNet's, label) of a path or binary
    file object in either format."""
    path, f = files.source(src, what)
    label = files.label(path, f)
    data = files.read_all(path, f, label)
    if data.startswith((MAGIC, MAGIC_V1)):
        records = parse_records(data, label)[0]
        return ([dynet_text.Record(kind, name, shape, values, None)
                 for name, (kind, shape, values) in records.items()], False, label)
    if dynet_text.is_dynet(data):
        return dynet_text.parse(data, label), True, label
    raise ModelFileError(f"{label}: neither an autobatch nor a DyNet model file (first bytes "
                         f"{data[:24]!r})")


def _existing_format(path):
    """The format of an existing, non-empty regular file (for append), else None."""
    if path is None or not os.path.isfile(path) or os.path.getsize(path) == 0:
        return None
    with open(path, "rb") as f:
        head = f.read(len(MAGIC))
    return "autobatch" if head in (MAGIC, MAGIC_V1) else "dynet"


def resolve_format(fmt, dest, append):
    """`format`: "autobatch" (our format), "dynet" (DyNet's text format) or None: ours,
    or the existing file's when appending to one."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be 'autobatch' or 'dynet', got {fmt!r}")
    if append:
        existing = _existing_format(files.source(dest, "save")[0])
        if fmt is None:
            return existing or "autobatch"
        if existing is not None and existing != fmt:
            raise ValueError(f"save(append=True, format={fmt!r}): {dest} is a {existing} file; "
                             "one file holds one format")
    return fmt or "autobatch"


def write_dynet(dest, named_params, append=False):
    """Write (name, parameter) pairs in DyNet's text format; `append` (paths only) adds
    them to an existing DyNet file, which is checked first and rewritten atomically."""
    path, f = files.source(dest, "save")
    names = [(record_kind(p), name) for name, p in named_params]
    if len(set(names)) != len(names):
        raise ValueError("save: a parameter would be stored twice under one name (the saved "
                         "objects overlap)")
    body = b"".join(dynet_text.record_bytes(record_kind(p), name, p) for name, p in named_params)
    if append:
        if path is None:
            raise TypeError("save(append=True) needs a path, not a file object")
        if os.path.isfile(path) and os.path.getsize(path) > 0:
            old = files.read_all(path, None, path)
            have = {(r.kind, r.name) for r in dynet_text.parse(old, path)}
            twice = [name for name, p in named_params if (record_kind(p), name) in have]
            if twice:
                raise ValueError(f"{path}: already holds {', '.join(twice[:5])}")
            body = old + body
    if path is None:
        f.write(body)
    else:
        files.write_atomic(path, body)


def save_one(p, fname, key="", append=False, format=None):
    """`p.save`: p under the name `key` (default: its full name)."""
    dynet_text.check_key(key, "save")
    name = key or p.name()
    fmt = resolve_format(format, fname, append)
    if fmt == "dynet":
        write_dynet(fname, [(name, p)], append)
        return
    if not NAME.fullmatch(name):
        raise ValueError(f"save: {name!r} is not a name this format stores ('/a/b': parts "
                         "separated by '/', without control characters); pass a key")
    write_records(fname, [(name, p)], append)


def populate_one(p, fname, key=""):
    """`p.populate`: p's values (and from a DyNet file its gradient) from the stored
    parameter named `key` (default: p's own name)."""
    dynet_text.check_key(key, "populate")
    records, dynet, label = read(fname, "populate")
    rec = dynet_text.find(records, record_kind(p), key or p.name(), label)
    if not dynet_text._same_shape(rec.kind, tuple(p.shape()), rec.shape):
        raise ModelFileError(f"{label}: {rec.name} has shape {rec.shape}, {p.name()} has "
                             f"shape {tuple(p.shape())}")
    dynet_text.assign([(p, rec)], dynet)


def load_one(pc, fname, key, kind):
    """`pc.load_param` / `pc.load_lookup_param`: a new parameter of pc with the values
    of the stored one named `key`; its name is pc's name + the key's last part."""
    where = "load_param" if kind == "param" else "load_lookup_param"
    dynet_text.check_key(key, where)
    if not key:
        raise ValueError(f"{where} needs the full name of a stored parameter as key")
    records, dynet, label = read(fname, where)
    return add_loaded(pc, dynet_text.find(records, kind, key, label), dynet)


def add_loaded(pc, rec, dynet):
    """A new parameter of pc holding a record's values; named pc's name + the last
    part of the stored name (without its "_<n>" suffix), as a user name must be."""
    base = split_name(rec.name.rstrip("/").rpartition("/")[2])[0]
    add = pc.add_parameters if rec.kind == "param" else pc.add_lookup_parameters
    try:
        pc._check_name(base)
    except ValueError:                      # a stored name that is not a valid user name
        base = ""
    p = add(rec.shape, init=0.0, name=base)
    dynet_text.assign([(p, rec)], dynet)
    return p


def save_collection_dynet(pc, fname, key="", append=False):
    """pc in DyNet's format; names as DyNet's `TextFileSaver`: full names, or `key` +
    the name relative to pc."""
    dynet_text.check_key(key, "save")
    own = len(pc.name())
    if key:
        key = key_prefix(key, pc)       # "/key/", as for our format
        named = [(key + p.name()[own:], p) for p in all_params(pc)]
    else:
        named = [(p.name(), p) for p in all_params(pc)]
    write_dynet(fname, named, append)


def populate_collection_dynet(pc, records, key, label, skip=None):
    dynet_text.assign(dynet_text.match_collection(pc, records, key, label, skip), True)


def save_collection(pc, fname, key="", append=False, format=None):
    """`pc.save`: our format by default, DyNet's with format="dynet"."""
    if resolve_format(format, fname, append) == "dynet":
        save_collection_dynet(pc, fname, key, append)
    else:
        collection_records.save_collection(pc, fname, key=key, append=append)


def populate_collection(pc, fname, key=""):
    """`pc.populate` of either format (see the module docstring for how each matches)."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")
    records, dynet, label = read(fname, "populate")
    if dynet:
        populate_collection_dynet(pc, records, key, label)
        return
    by_name = {r.name: (r.kind, r.shape, r.values) for r in records}
    assign(match(pc, by_name, key_prefix(key, pc), label))


core._set_parameter_files(sys.modules[__name__])     # p.save / p.populate (api/parameters.pxi)
