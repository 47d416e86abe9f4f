"""Helpers for the save/load tests: read, edit and re-sign saved files, so that a test
can play a hostile author (whose file has valid checksums) as well as bit rot."""
import json
import zlib

from autobatch.io import autobatch_data, autobatch_save


def split_records(data):
    """A version 2 parameter file as [(header dict, payload bytes)] (end record dropped)."""
    assert data.startswith(autobatch_data.MAGIC)
    out, pos = [], len(autobatch_data.MAGIC)
    while pos < len(data):
        eol = data.index(b"\n", pos)
        header = json.loads(data[pos:eol])
        if header["kind"] == "end":
            break
        stop = eol + 1 + header["nbytes"]
        out.append((header, data[eol + 1:stop]))
        pos = stop
    return out


def join_records(records, fix_crc=True):
    """A version 2 parameter file with a valid end record (and, by default, valid
    per-record checksums) from [(header dict, payload bytes)]."""
    encoded = []
    for header, payload in records:
        header = dict(header)
        if fix_crc:
            header["crc32"] = zlib.crc32(payload)
        encoded.append(json.dumps(header).encode() + b"\n" + payload)
    return autobatch_data._file_bytes(encoded)


def read_meta(base):
    with open(base + ".meta", "rb") as f:
        return json.loads(f.read())


def write_meta(base, meta, resign=True, data=None):
    """Write `meta`, re-signed (valid checksum) unless `resign` is False; with `data`
    (the bytes of base.data) also point it at that data file."""
    meta = json.loads(json.dumps(meta))
    if data is not None:
        recs, _, digest = autobatch_data.parse_records(data, "x")
        meta["data"] = {"records": len(recs), "sha256": digest}
    if resign:
        meta["sha256"] = autobatch_save._meta_digest(meta)
    with open(base + ".meta", "w") as f:
        json.dump(meta, f)


def write_data(base, records):
    data, _ = join_records(records)
    with open(base + ".data", "wb") as f:
        f.write(data)
    return data
