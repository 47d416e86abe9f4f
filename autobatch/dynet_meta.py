"""`dy.save` / `dy.load` in DyNet's format: a ``.data`` text model file
(autobatch.dynet_format) and a ``.meta`` of one pickle per saved object, as DyNet's
python/_dynet.pyx writes them::

    ("Parameters", "/W")                       a Parameters, by full name
    ("LookupParameters", "/E")                 a LookupParameters
    (_dynet.VanillaLSTMBuilder, (1, 2, 3, False, 1.0), "/vanilla-lstm-builder/")
                                               a builder: class, spec, collection name

Reading never unpickles. `pickletools.genops` splits the stream into opcodes (it
executes nothing) and `_Reader` runs only the opcodes that build strings, numbers,
booleans, None, tuples and lists, and class references to ``_dynet.<Name>`` (or
``dynet.<Name>``) for the names in `DYNET_BUILDERS`; a reference is kept as a name and
mapped to our builder by that table, never imported. Any other opcode or module is
refused with ModelFileError. Writing emits the same opcodes by hand (protocol 2), so
DyNet's `pickle.load` reads them.
"""
import io
import math
import pickletools
import struct

from autobatch import dynet_format, model_files
from autobatch._core import LookupParameters, Parameters
from autobatch.serialization import ModelFileError, _all_params, _read_all, _write_atomic

MAX_OPS = 10000          # opcodes in one object's pickle
MAX_OBJECTS = 100000

# DyNet's builder class -> (our class's public name in autobatch, the spec's fields).
# Our class is built with DyNet's positional arguments and then populated positionally,
# as DyNet's own load does.
DYNET_BUILDERS = {
    "SimpleRNNBuilder": ("SimpleRNNBuilder", ("layers", "input_dim", "hidden_dim")),
    "VanillaLSTMBuilder": ("VanillaLSTMBuilder", ("layers", "input_dim", "hidden_dim",
                                                  "ln_lstm", "forget_bias")),
    "LSTMBuilder": ("VanillaLSTMBuilder", ("layers", "input_dim", "hidden_dim",   # dynet38's
                                           "ln_lstm", "forget_bias")),     # (see _spec_args)
    "CoupledLSTMBuilder": ("CoupledLSTMBuilder", ("layers", "input_dim", "hidden_dim")),
    "GRUBuilder": ("GRUBuilder", ("layers", "input_dim", "hidden_dim")),
    "CompactVanillaLSTMBuilder": ("CompactVanillaLSTMBuilder", ("layers", "input_dim", "hidden_dim")),
    "BiRNNBuilder": ("BiRNNBuilder", ("num_layers", "input_dim", "hidden_dim",
                                      "rnn_builder_factory", "builder_layers")),
}


class _ClassRef:
    """A class named by a file (kept as a name; never imported)."""

    def __init__(self, name):
        self.name = name


def _ours(name):
    """Our builder class for DyNet's class `name` (the public one of that name in
    `autobatch`, for a name of the table only), or None."""
    import autobatch
    entry = DYNET_BUILDERS.get(name)
    return getattr(autobatch, entry[0], None) if entry else None


def is_pickle(data):
    return data[:1] == b"\x80"


# ---------------------------------------------------------------- reading ----

class _Reader:
    """Runs the data-only subset of pickle's opcodes for one object."""

    def __init__(self, label):
        self.label = label
        self.stack, self.marks, self.memo = [], [], {}

    def bad(self, msg):
        return ModelFileError(f"{self.label}: {msg} (DyNet's .meta holds tuples of names, "
                              "numbers and builder classes; nothing else is read)")

    def pop_mark(self):
        if not self.marks:
            raise self.bad("corrupt pickle (no MARK)")
        at = self.marks.pop()
        items, self.stack[at:] = self.stack[at:], []
        return items

    def pop(self, n=1):
        if len(self.stack) < n:
            raise self.bad("corrupt pickle (stack underflow)")
        items, self.stack[len(self.stack) - n:] = self.stack[len(self.stack) - n:], []
        return items

    def global_ref(self, module, name):
        if module not in ("_dynet", "dynet") or name not in DYNET_BUILDERS:
            raise self.bad(f"the file names {module!s:.40}.{name!s:.60}, which is not one "
                           "of DyNet's builders")
        return _ClassRef(name)

    def step(self, op, arg):
        name, st = op.name, self.stack
        if name in ("PROTO", "FRAME"):
            return
        if name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "BININT",
                    "BININT1", "BININT2", "LONG1", "BINFLOAT", "FLOAT", "LONG"):
            st.append(arg)
        elif name == "INT":          # protocol 0: True/False are INT 01 / 00
            st.append(arg)
        elif name in ("NONE", "NEWTRUE", "NEWFALSE"):
            st.append({"NONE": None, "NEWTRUE": True, "NEWFALSE": False}[name])
        elif name == "MARK":
            self.marks.append(len(st))
        elif name == "TUPLE":
            st.append(tuple(self.pop_mark()))
        elif name in ("EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            n = {"EMPTY_TUPLE": 0, "TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}[name]
            st.append(tuple(self.pop(n)) if n else ())
        elif name == "EMPTY_LIST":
            st.append([])
        elif name == "LIST":
            st.append(self.pop_mark())
        elif name in ("APPEND", "APPENDS"):
            items = self.pop(1) if name == "APPEND" else self.pop_mark()
            if not st or not isinstance(st[-1], list):
                raise self.bad("corrupt pickle (append to a non-list)")
            st[-1].extend(items)
        elif name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
            if not st:
                raise self.bad("corrupt pickle (memo of nothing)")
            self.memo[len(self.memo) if name == "MEMOIZE" else arg] = st[-1]
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            if arg not in self.memo:
                raise self.bad("corrupt pickle (memo)")
            st.append(self.memo[arg])
        elif name == "GLOBAL":
            module, _, cls = arg.partition(" ")
            st.append(self.global_ref(module, cls))
        elif name == "STACK_GLOBAL":
            module, cls = self.pop(2)
            if not isinstance(module, str) or not isinstance(cls, str):
                raise self.bad("corrupt pickle (STACK_GLOBAL)")
            st.append(self.global_ref(module, cls))
        else:
            raise self.bad(f"the pickle uses {name}, which only code (not data) needs")


def read_meta(data, label):
    """The objects of a DyNet .meta, in order: ("Parameters", name),
    ("LookupParameters", name) or (_ClassRef, spec tuple, collection name)."""
    f, out = io.BytesIO(data), []
    while f.tell() < len(data):
        if len(out) >= MAX_OBJECTS:
            raise ModelFileError(f"{label}: more than {MAX_OBJECTS} objects")
        reader, count, stopped = _Reader(label), 0, False
        try:
            for op, arg, _ in pickletools.genops(f):
                count += 1
                if count > MAX_OPS:
                    raise reader.bad(f"an object of more than {MAX_OPS} opcodes")
                if op.name == "STOP":
                    stopped = True
                    break
                reader.step(op, arg)
        except ModelFileError:
            raise
        except Exception as e:       # genops: unknown opcode, truncated argument ...
            raise ModelFileError(f"{label}: corrupt pickle: {type(e).__name__}: {str(e)[:200]}") from None
        if not stopped or len(reader.stack) != 1 or reader.marks:
            raise ModelFileError(f"{label}: corrupt or truncated pickle")
        out.append(_check_entry(reader.stack[0], label))
    return out


def _check_entry(e, label):
    if (isinstance(e, tuple) and len(e) == 2 and e[0] in ("Parameters", "LookupParameters")
            and isinstance(e[1], str) and e[1]):
        return e
    if (isinstance(e, tuple) and len(e) == 3 and isinstance(e[0], _ClassRef)
            and isinstance(e[1], tuple) and isinstance(e[2], str) and e[2].startswith("/")):
        return e
    raise ModelFileError(f"{label}: an object of the metadata is not one DyNet writes: {e!r:.200}")


# ---------------------------------------------------------- rebuilding ----

def _spec_args(ref, spec, label):
    """Our class and DyNet's positional constructor arguments, checked."""
    if ref.name == "LSTMBuilder" and len(spec) == 3:
        # an older DyNet, whose LSTMBuilder was the coupled one (spec of 3 fields)
        ref = _ClassRef("CoupledLSTMBuilder")
    cls = _ours(ref.name)
    if cls is None:
        raise ModelFileError(f"{label}: DyNet's {ref.name} is not available here")
    fields = DYNET_BUILDERS[ref.name][1]
    if not 3 <= len(spec) <= len(fields):
        raise ModelFileError(f"{label}: {ref.name} spec {spec!r:.200} has {len(spec)} fields")
    args = []
    for field, v in zip(fields, spec):
        ok = {"ln_lstm": lambda x: isinstance(x, bool),
              "forget_bias": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)
              and math.isfinite(x),
              "rnn_builder_factory": lambda x: isinstance(x, _ClassRef) and _ours(x.name) is not None,
              "builder_layers": lambda x: x is None}.get(
            field, lambda x: type(x) is int and 0 < x < 2 ** 31)
        if not ok(v):
            raise ModelFileError(f"{label}: {ref.name}: bad {field} {v!r:.60}")
        args.append(_ours(v.name) if isinstance(v, _ClassRef) else v)
    if ref.name == "BiRNNBuilder":
        args = args[:4]             # builder_layers is None: built from the factory
    return cls, args


def _layer_norm_params(p):
    """A layer-normalised LSTM's gains and biases: DyNet keeps them out of the builder's
    collection, so its files lack them; a load gives them their initial values (as
    DyNet's own load, which makes them anew)."""
    return p.name().rpartition("/")[2].startswith("ln_")


def _rebuild(ref, spec, name, records, pc, label):
    cls, args = _spec_args(ref, spec, label)
    prefix = name if name.endswith("/") else name + "/"
    registry = pc._registry
    registry.load_budget = sum(r.values.size for r in records if r.name.startswith(prefix))
    layer_norm = cls is _ours("VanillaLSTMBuilder") and len(args) > 3 and args[3]
    if layer_norm:                  # gains and biases: 4H, 4H, 4H, 4H, H, H per layer
        registry.load_budget += 18 * args[0] * args[2]
    try:
        if ref.name == "BiRNNBuilder":
            obj = cls(*args[:3], pc, args[3])
        else:
            obj = cls(*args[:3], pc, *args[3:])
    finally:
        registry.load_budget = None
    model_files.populate_collection_dynet(obj.param_collection(), records, name, label,
                                          _layer_norm_params if layer_norm else None)
    return obj


def load(basename, pc, meta_bytes):
    """DyNet's dy.load: the objects of `meta_bytes` (basename.meta) added to pc, in
    order. On any failure pc is rolled back and ModelFileError raised."""
    snap = pc._snapshot()
    try:
        return _load(basename, pc, meta_bytes)
    except BaseException as e:
        pc._rollback(snap)
        if isinstance(e, (ModelFileError, MemoryError)) or not isinstance(e, Exception):
            raise
        raise ModelFileError(f"{basename}: DyNet's saved objects cannot be rebuilt here: "
                             f"{type(e).__name__}: {str(e)[:300]}") from e


def _load(basename, pc, meta_bytes):
    label = basename + ".data"
    entries = read_meta(meta_bytes, basename + ".meta")
    records = dynet_format.parse(_read_all(label, None, label), label)
    objects = []
    for e in entries:
        if e[0] in ("Parameters", "LookupParameters"):
            kind = "param" if e[0] == "Parameters" else "lookup"
            rec = dynet_format.find(records, kind, e[1], label)
            objects.append(model_files.add_loaded(pc, rec, True))
        else:
            objects.append(_rebuild(e[0], e[1], e[2], records, pc, label))
    return objects


# ---------------------------------------------------------------- writing ----

def _emit(x, out, where):
    if x is None:
        out.append(b"N")
    elif x is True or x is False:
        out.append(b"\x88" if x else b"\x89")
    elif isinstance(x, int):
        if not -2 ** 31 <= x < 2 ** 31:
            raise ValueError(f"dy.save(format='dynet'): {where}: int {x} out of range")
        out.append(b"J" + struct.pack("<i", x))
    elif isinstance(x, float):
        out.append(b"G" + struct.pack(">d", x))
    elif isinstance(x, str):
        b = x.encode("utf-8")
        out.append(b"X" + struct.pack("<I", len(b)) + b)
    elif isinstance(x, tuple):
        out.append(b"(")
        for v in x:
            _emit(v, out, where)
        out.append(b"t")
    elif isinstance(x, _ClassRef):
        out.append(b"c_dynet\n" + x.name.encode("ascii") + b"\n")
    else:
        raise TypeError(f"dy.save(format='dynet'): {where}: cannot write a {type(x).__name__}")


def _pickle(obj, where):
    out = [b"\x80\x02"]
    _emit(obj, out, where)
    out.append(b".")
    return b"".join(out)


def _dynet_name(cls):
    """DyNet's class name for one of our builders."""
    for dynet_name, (ours, _) in DYNET_BUILDERS.items():
        if dynet_name != "LSTMBuilder" and _ours(dynet_name) is cls:
            return dynet_name
    return None


def _builder_entry(obj):
    """(class ref, DyNet spec) of one of our builders."""
    name = _dynet_name(type(obj))
    if name is None:
        raise TypeError(f"dy.save(format='dynet'): DyNet has no {type(obj).__name__}; save it "
                        "in our format (the default)")
    spec = obj.spec
    fields = DYNET_BUILDERS[name][1]
    if name == "BiRNNBuilder":
        factory = _dynet_name(spec["rnn_builder_factory"])
        if factory is None:
            raise TypeError("dy.save(format='dynet'): the BiRNNBuilder's layers are not a "
                            "DyNet builder")
        return _ClassRef(name), (spec["num_layers"], spec["input_dim"], spec["hidden_dim"],
                                 _ClassRef(factory), None)
    defaults = {"ln_lstm": False, "forget_bias": 1.0}
    missing = [f for f in fields if f not in defaults and (not isinstance(spec, dict) or f not in spec)]
    if missing:
        raise TypeError(f"dy.save(format='dynet'): the spec of this {type(obj).__name__} does "
                        f"not give DyNet's {missing or fields}")
    return _ClassRef(name), tuple(spec.get(f, defaults.get(f)) for f in fields)


def save(basename, objects):
    """DyNet's dy.save: `basename.meta` (pickles DyNet reads) and `basename.data`."""
    meta, named = [], []
    for obj in objects:
        if isinstance(obj, (Parameters, LookupParameters)):
            tag = "Parameters" if isinstance(obj, Parameters) else "LookupParameters"
            meta.append(_pickle((tag, obj.name()), tag))
            named.append((obj.name(), obj))
            continue
        if not callable(getattr(obj, "param_collection", None)):
            raise TypeError(f"dy.save(format='dynet'): cannot save a {type(obj).__name__}: "
                            "DyNet's files hold Parameters, LookupParameters and builders")
        ref, spec = _builder_entry(obj)
        pc = obj.param_collection()
        meta.append(_pickle((ref, spec, pc.name()), type(obj).__name__))
        # DyNet's files have no room for a layer-normalised LSTM's gains and biases
        # (DyNet keeps them outside the builder's collection); its load makes them anew
        skip = ref.name == "VanillaLSTMBuilder" and spec[3]
        named.extend((p.name(), p) for p in _all_params(pc) if not (skip and _layer_norm_params(p)))
    model_files.write_dynet(basename + ".data", named)
    _write_atomic(basename + ".meta", b"".join(meta))
