"""DyNet's text model format: read it (a model trained with DyNet loads here) and write
it on request (``format="dynet"``: a model trained here loads in DyNet).

What DyNet's `TextFileSaver` writes (`pc.save`, `Parameters.save`, the ``.data`` of
`dy.save`): per parameter one header line and one line of values, or two when the
gradient is not zero::

    #Parameter# /W {2,3} 97 ZERO_GRAD
    +0.00000000e+00 +3.00000000e+00 +1.00000000e+00 ... (6 values, column-major)
    #LookupParameter# /E {2,4} 258 FULL_GRAD
    <8 values: row 0, then row 1 ...>
    <8 gradient values>

- the dimensions are DyNet's `Dim`: a lookup table of 4 rows of shape (2,) is
  ``{2,4}`` (the rows last); a parameter's are its Python shape;
- the byte count is that of the value line(s): 16 characters per value (``%+.8e`` and a
  space) plus the newline, twice with ``FULL_GRAD``;
- values are in storage order: column-major, a lookup table row after row.

What DyNet's `dy.save` writes to ``.meta``: one pickle per object, ``("Parameters",
name)``, ``("LookupParameters", name)`` or ``(class, spec tuple, collection name)``.
This module never unpickles. It walks the pickle's opcodes (`pickletools.genops`
parses, it executes nothing) and accepts only the handful that build tuples of strings,
numbers, booleans and None, and class references of the form ``_dynet.<Name>``, which
it maps through the table `DYNET_BUILDERS` to our own builders. Anything else (a
REDUCE, an import of another module, ...) is refused.

Reading checks the whole file (headers, names, dimensions against the bytes present,
every value's characters and width) before a single value is assigned, so a damaged
file raises `ModelFileError` and changes nothing. Sizes come from the header and are
checked against the bytes the file really holds before anything is allocated.
"""
import collections
import math
import re

import numpy as np

from autobatch.errors import ModelFileError
from autobatch.io.assign_all import assign_all

WIDTH = 16                      # "+1.23456789e-01 ": DyNet's FLOAT32_WIDTH
MAX_HEADER = 1 << 16
MAX_NAME = 4096
_HEADER = re.compile(rb"#(Parameter|LookupParameter)# ([^\s#]+) \{([0-9]{1,10}(?:,[0-9]{1,10}){0,4})\} "
                     rb"([0-9]{1,19})(?: (ZERO_GRAD|FULL_GRAD))?")

Record = collections.namedtuple("Record", "kind name shape values grads")
"""One parameter of a file: kind "param" or "lookup", its name, its Python shape, its
values (float32, storage order) and its gradient (or None: zero, or not stored)."""


def _error(*args):
    return ModelFileError(*args)


def is_dynet(data):
    """Whether file bytes are DyNet's text format (an empty file is: DyNet writes one
    for an empty collection)."""
    return data == b"" or data.startswith((b"#Parameter# ", b"#LookupParameter# "))


# ---------------------------------------------------------------- reading ----

def _floats(line, n, label, name):
    """The n values of one line "v v ... v \\n", each 16 characters wide (a sign, digits,
    '.', 'e': NaN and infinities are not DyNet-readable and are refused)."""
    if len(line) != n * WIDTH + 1 or line[-1:] != b"\n" or line.count(b" ") != n:
        raise _error(f"{label}: corrupt values of {name} (line length or spacing)")
    body = np.frombuffer(line, dtype=np.uint8, count=n * WIDTH)
    if n and not np.all(body[WIDTH - 1::WIDTH] == 32):
        raise _error(f"{label}: corrupt values of {name} (a value is not {WIDTH} characters wide)")
    if line[:-1].replace(b" ", b"").translate(None, b"0123456789+-.e"):
        raise _error(f"{label}: corrupt values of {name} (a character that is not part of a number)")
    try:
        with np.errstate(over="ignore"):
            values = np.frombuffer(line, dtype=f"S{WIDTH}", count=n).astype(np.float32)
    except ValueError:
        raise _error(f"{label}: corrupt values of {name} (a value is not a number)") from None
    if not np.all(np.isfinite(values)):        # "+1.0000000e+99" fits the width
        raise _error(f"{label}: corrupt values of {name} (a value overflows float32)")
    return values


def _shape(kind, dims, label, name):
    if any(d >= 2 ** 31 for d in dims):         # (a dimension of 0: an empty tensor, as DyNet writes)
        raise _error(f"{label}: bad dimensions {dims} for {name}")
    if kind == "param":
        if len(dims) > 4:
            raise _error(f"{label}: {name} has {len(dims)} dimensions (at most 4)")
        return tuple(dims)
    if len(dims) < 2:
        raise _error(f"{label}: lookup parameter {name} has dimensions {dims}: "
                     "expected the row's dimensions and the number of rows")
    return (dims[-1],) + tuple(dims[:-1])


def parse(data, label):
    """Every record of a DyNet text model file, in file order. The whole file is
    checked; any damage raises ModelFileError."""
    records, names, pos = [], set(), 0
    while pos < len(data):
        eol = data.find(b"\n", pos, pos + MAX_HEADER)
        if eol < 0:
            raise _error(f"{label}: truncated or corrupt header at byte {pos}")
        m = _HEADER.fullmatch(data[pos:eol])
        if m is None:
            raise _error(f"{label}: corrupt header at byte {pos}: {data[pos:min(eol, pos + 100)]!r}")
        kind = "param" if m.group(1) == b"Parameter" else "lookup"
        name = m.group(2).decode("utf-8", "replace")
        if len(name) > MAX_NAME:
            raise _error(f"{label}: name at byte {pos} is longer than {MAX_NAME} characters")
        dims = [int(d) for d in m.group(3).split(b",")]
        shape = _shape(kind, dims, label, name)
        n = math.prod(dims)                      # exact: Python ints do not wrap
        lines = 1 if m.group(5) == b"ZERO_GRAD" else 2    # no flag: an old file, with gradients
        if int(m.group(4)) != lines * (n * WIDTH + 1):
            raise _error(f"{label}: {name}: byte count {int(m.group(4))} does not match "
                         f"dimensions {dims} ({lines * (n * WIDTH + 1)} expected)")
        start = eol + 1
        stop = start + lines * (n * WIDTH + 1)
        if stop > len(data):                     # checked before anything is allocated
            raise _error(f"{label}: truncated: {name} needs {stop - start} bytes, "
                         f"{len(data) - start} left")
        values = _floats(data[start:start + n * WIDTH + 1], n, label, name)
        grads = _floats(data[start + n * WIDTH + 1:stop], n, label, name) if lines == 2 else None
        if (kind, name) in names:
            raise _error(f"{label}: {name} is stored twice")
        names.add((kind, name))
        records.append(Record(kind, name, shape, values, grads))
        pos = stop
    return records


# ---------------------------------------------------------------- writing ----

def _dims(kind, shape):
    dims = shape if kind == "param" else tuple(shape[1:]) + (shape[0],)
    return "{" + ",".join(str(int(d)) for d in dims) + "}"


def check_key(key, where):
    """DyNet's rule for a stored name: no space, no '#' (its header would not parse)."""
    if not isinstance(key, str):
        raise TypeError(f"{where}: key must be a str, got {type(key).__name__}")
    if re.search(r"[\s#]", key):
        raise ValueError(f"{where}: a key may not contain spaces or '#': {key!r}")


def check_name(name):
    """A name DyNet's header can hold: not empty, no space, no '#'."""
    check_key(name, "save")
    if not name:
        raise ValueError("save: a parameter without a name: pass a key")


def _line(flat, name):
    flat = np.asarray(flat, dtype=np.float32)
    if not np.all(np.isfinite(flat)):
        raise ValueError(f"save(format='dynet'): {name} holds NaN or infinite values, which "
                         "DyNet's text format cannot store")
    return (("%+.8e " * flat.size) % tuple(flat.tolist()) + "\n").encode("ascii")


def record_bytes(kind, name, p):
    """One parameter in DyNet's text format; its gradient is stored when not zero."""
    check_name(name)
    values = _line(p._flat, name)
    grad = p._grad_flat
    full = bool(np.any(grad))
    body = values + (_line(grad, name) if full else b"")
    tag = "Parameter" if kind == "param" else "LookupParameter"
    header = (f"#{tag}# {name} {_dims(kind, tuple(p.shape()))} {len(body)} "
              f"{'FULL_GRAD' if full else 'ZERO_GRAD'}\n")
    return header.encode("utf-8") + body


# ---------------------------------------------------------- assigning ----

def _squeeze(shape):
    """DyNet compares dimensions without trailing 1s ({3} is {3,1})."""
    shape = tuple(shape)
    while len(shape) > 1 and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def _same_shape(kind, a, b):
    if kind == "lookup":
        return a[0] == b[0] and _squeeze(a[1:]) == _squeeze(b[1:])
    return _squeeze(a) == _squeeze(b)


def assign(pairs, dynet):
    """Each record's values to its parameter, in place (the engine holds pointers to
    this memory); from a DyNet file also its gradient, zero when the file stores none
    (as DyNet's loader does). All or nothing under a Ctrl-C (autobatch.io.assign_all)."""
    targets, sources = [], []
    for p, rec in pairs:
        targets.append(p._flat)
        sources.append(rec.values)
        if rec.grads is not None or dynet:
            targets.append(p._grad_flat)
            sources.append(rec.grads)           # None: zeros
    assign_all(targets, sources)
    for p, rec in pairs:
        if rec.grads is not None and hasattr(p, "_grad_off_marks"):
            p._grad_off_marks = True            # a table's stored gradient: no row marked


def match_collection(pc, records, key, label, skip=None):
    """DyNet's populate: the records under `key` (all when key is empty) are paired in
    order with the collection's parameters, and separately its lookup parameters;
    counts and dimensions must agree. Parameters `skip(p)` is true of are left out.
    Returns (parameter, record) pairs."""
    prefix = key if not key or key.endswith("/") else key + "/"
    chosen = [r for r in records if r.name.startswith(prefix)]
    pairs = []
    for kind, mine in (("param", pc.parameters_list()), ("lookup", pc.lookup_parameters_list())):
        mine = [p for p in mine if skip is None or not skip(p)]
        theirs = [r for r in chosen if r.kind == kind]
        if len(theirs) != len(mine):
            what = "parameters" if kind == "param" else "lookup parameters"
            raise _error(f"{label}: {len(theirs)} {what} stored under {key or 'the file'!r}, "
                         f"{len(mine)} in {pc.name()} (DyNet matches them in order)")
        for p, r in zip(mine, theirs):
            if not _same_shape(kind, tuple(p.shape()), r.shape):
                raise _error(f"{label}: {r.name} has shape {r.shape}, {p.name()} has shape "
                             f"{tuple(p.shape())}")
            pairs.append((p, r))
    return pairs


def find(records, kind, key, label):
    for r in records:
        if r.kind == kind and r.name == key:
            return r
    what = "parameter" if kind == "param" else "lookup parameter"
    raise _error(f"{label}: no {what} named {key!r} in the file")
