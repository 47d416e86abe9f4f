"""Our parameter file (``.data``; also what `pc.save` writes): a text header line per
record followed by raw numbers, then an end record.

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
"""
import hashlib
import json
import math
import os
import re
import zlib

import numpy as np

from autobatch.api.core import LookupParameters, Parameters
from autobatch.errors import ModelFileError
from autobatch.io import files, legacy_names

MAGIC = b"AUTOBATCH-PARAMS 2\n"
MAGIC_V1 = b"AUTOBATCH-PARAMS 1\n"
MAX_HEADER = 1 << 16     # bytes of one record header line
MAX_NAME = 4096          # characters of a parameter name
KINDS = {Parameters: "param", LookupParameters: "lookup"}
_HEADER_KEYS = {"kind", "name", "shape", "nbytes", "crc32"}
NAME = re.compile(r"(?:/[^/\x00-\x1f\x7f]{1,255})+")   # "/a/b_1": no empty parts


def record_kind(p):
    """The kind of record a parameter is stored as: "param" or "lookup"."""
    return KINDS[type(p)] if type(p) in KINDS else ("lookup" if isinstance(p, LookupParameters) else "param")


def _record_bytes(name, p):
    payload = np.ascontiguousarray(p._flat, dtype="<f4").tobytes()
    header = {"kind": record_kind(p), "name": name, "shape": list(p.shape()),
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
    path, f = files.source(dest, "save")
    new = [_record_bytes(name, p) for name, p in named_params]
    if append:
        if path is None:
            raise TypeError("save(append=True) needs a path, not a file object")
        if os.path.exists(path) and os.path.getsize(path) > 0:
            records, spans, _ = parse_records(files.read_all(path, None, path), path)  # ours only
            twice = [name for name, _ in named_params if name in records]
            if twice:
                raise ValueError(f"{path}: already holds {', '.join(twice[:5])}; appending "
                                 "them again would make the file unreadable")
            new = spans + new
    data, digest = _file_bytes(new)
    if path is None:
        f.write(data)
    else:
        files.write_atomic(path, data)
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
    if not isinstance(name, str) or len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise bad(f"bad name {name!r:.100}")
    if (not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape)
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
        header = files.read_json(data[pos:eol], label, f"record header at byte {pos}")
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
    path, f = files.source(src, "read_records")
    label = files.label(path, f)
    return parse_records(files.read_all(path, f, label), label)[0]
