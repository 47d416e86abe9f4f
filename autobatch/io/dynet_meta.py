"""`dy.save` / `dy.load` in DyNet's format: a ``.data`` text model file
(autobatch.io.dynet_text) and a ``.meta`` of pickles (autobatch.io.dynet_pickle, read as
data), with DyNet's semantics (python/_dynet.pyx, `_save_one` / `_load_one`):

- Parameters and LookupParameters are found by their full name in ``.data``
  (`load_param`), and come back as new parameters of the collection;
- DyNet's builders are rebuilt as ours from their spec (DyNet's positional
  constructor arguments, checked field by field), a user's registered class by its
  `from_spec(spec, model)` (a file naming users' classes that are not registered is
  refused, naming them all); then their collection is populated from the records under
  its name, in order, as DyNet's `populate` does.

A rebuilt object may allocate only as many values as ``.data`` holds for it, each
record belongs to at most one object (a ``.meta`` naming one record many times does not
make many copies), and on any failure the collection is rolled back.
"""
import bisect
import collections
import math

from autobatch.api import core
from autobatch.api.core import LookupParameters, Parameters
from autobatch.errors import ModelFileError
from autobatch.io import dynet_text, files, parameter_files
from autobatch.io.collection_records import all_params, rolled_back_on_failure
from autobatch.io.dynet_pickle import (DYNET_BUILDERS, ClassRef, dynet_class_name, FuncRef,
                                       Instance, our_class, pickle_object, UserRef, user_name,
                                       read_meta)
from autobatch.io.registry import savable_class
from autobatch.io.specs import MAX_SPEC_DEPTH, rebuild_object


# ---------------------------------------------------------- rebuilding ----

def _spec_args(ref, spec, label):
    """Our class and DyNet's positional constructor arguments, checked."""
    if ref.name == "LSTMBuilder" and len(spec) == 3:
        # an older DyNet, whose LSTMBuilder was the coupled one (spec of 3 fields)
        ref = ClassRef("CoupledLSTMBuilder")
    cls = our_class(ref.name)
    if cls is None:
        raise ModelFileError(f"{label}: DyNet's {ref.name} is not available here")
    fields = DYNET_BUILDERS[ref.name][1]
    if not 3 <= len(spec) <= len(fields):
        raise ModelFileError(f"{label}: {ref.name}'s spec has {len(spec)} fields")
    args = []
    for field, v in zip(fields, spec):
        ok = {"ln_lstm": lambda x: isinstance(x, bool),
              "forget_bias": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)
              and math.isfinite(x),
              "rnn_builder_factory": lambda x: isinstance(x, ClassRef) and our_class(x.name) is not None,
              "builder_layers": lambda x: x is None}.get(
            field, lambda x: type(x) is int and 0 < x < 2 ** 31)
        if not ok(v):
            shown = repr(v)[:60] if isinstance(v, (bool, int, float, type(None))) else f"a {type(v).__name__}"
            raise ModelFileError(f"{label}: {ref.name}: bad {field} ({shown})")
        args.append(our_class(v.name) if isinstance(v, ClassRef) else v)
    if ref.name == "BiRNNBuilder":
        args = args[:4]             # builder_layers is None: built from the factory
    return cls, args


def _layer_norm_params(p):
    """A layer-normalised LSTM's gains and biases: DyNet keeps them out of the builder's
    collection, so its files lack them; a load gives them their initial values (as
    DyNet's own load, which makes them anew)."""
    return p.name().rpartition("/")[2].startswith("ln_")


def _resolve(x, label, depth=0):
    """A user's spec with its references made objects: DyNet's functions and builders
    ours of the same name, user classes the registered ones."""
    if depth > MAX_SPEC_DEPTH:
        raise ModelFileError(f"{label}: a spec nested deeper than {MAX_SPEC_DEPTH}")
    if isinstance(x, Instance):
        return rebuild_object(savable_class(x.name), _resolve(x.state, label, depth + 1))
    if isinstance(x, FuncRef):
        return getattr(core, x.name)
    if isinstance(x, UserRef):
        return savable_class(x.name)
    if not isinstance(x, (ClassRef, tuple, list, dict, str, int, float, type(None))):
        raise ModelFileError(f"{label}: a spec holds {getattr(x, 'name', '?')}, which a pickle "
                             "names only to rebuild an instance")
    if isinstance(x, ClassRef):
        cls = our_class(x.name)
        if cls is None:
            raise ModelFileError(f"{label}: DyNet's {x.name} is not available here")
        return cls
    if isinstance(x, (tuple, list)):
        return type(x)(_resolve(v, label, depth + 1) for v in x)
    if type(x) is collections.defaultdict:
        return collections.defaultdict(x.default_factory,
                                       {k: _resolve(v, label, depth + 1) for k, v in x.items()})
    if isinstance(x, dict):
        return {k: _resolve(v, label, depth + 1) for k, v in x.items()}
    return x


class _Records:
    """The records of a ``.data``, found by name or by name prefix in time proportional
    to what is found (a ``.meta`` of 100,000 objects costs no more than their records),
    each handed to one object at most."""

    def __init__(self, records, label):
        self.records, self.label, self.used = records, label, set()
        self.index = {(r.kind, r.name): i for i, r in enumerate(records)}
        self.order = sorted(range(len(records)), key=lambda i: records[i].name)
        self.names = [records[i].name for i in self.order]

    def _use(self, found):
        for i in found:
            if i in self.used:
                raise ModelFileError(f"{self.label}: {self.records[i].name} belongs to two objects "
                                     "of the metadata (a record is loaded once)")
        self.used.update(found)
        return [self.records[i] for i in sorted(found)]      # in file order

    def named(self, kind, name):
        """The record of `kind` named `name`."""
        i = self.index.get((kind, name))
        if i is None:
            return dynet_text.find([], kind, name, self.label)      # raises: not found
        return self._use([i])[0]

    def under(self, prefix):
        """The records whose names start with `prefix` (a range of the sorted names)."""
        found, at = [], bisect.bisect_left(self.names, prefix)
        while at < len(self.names) and self.names[at].startswith(prefix):
            found.append(self.order[at])
            at += 1
        return self._use(found)


def _rebuild_user(ref, spec, name, records, pc, label):
    """DyNet's load of a user's class: `cls.from_spec(spec, model)`, then its collection
    populated in order from `records` (those under `name`). `cls` is the class code
    registered under the file's "module:QualName"; it may allocate only as many values
    as the file holds for it."""
    cls = savable_class(ref.name)
    if not callable(getattr(cls, "from_spec", None)):
        raise ModelFileError(f"{label}: {ref.name} has no from_spec(spec, model)")
    registry = pc._registry
    registry.load_budget = sum(r.values.size for r in records)
    try:
        obj = cls.from_spec(_resolve(spec, label), pc)
    finally:
        registry.load_budget = None
    if not callable(getattr(obj, "param_collection", None)):
        raise ModelFileError(f"{label}: {ref.name}.from_spec made an object without param_collection()")
    parameter_files.populate_collection_dynet(obj.param_collection(), records, name, label)
    return obj


def _rebuild(ref, spec, name, records, pc, label):
    if isinstance(ref, UserRef):
        return _rebuild_user(ref, spec, name, records, pc, label)
    cls, args = _spec_args(ref, spec, label)
    budget = sum(r.values.size for r in records)
    layer_norm = cls is our_class("VanillaLSTMBuilder") and len(args) > 3 and args[3]
    if layer_norm:
        # gains and biases (4H, 4H, 4H, 4H, H, H per layer) that DyNet's files lack. The
        # file holds 4H(in + H + 1) >= 12H values per layer, so a real file has at least
        # 2/3 of a value for each of them; with fewer, the spec is not the file's
        extra = 18 * args[0] * args[2]
        if 2 * extra > 3 * budget:
            raise ModelFileError(f"{label}: a layer-normalised LSTM of {args[0]} layers of "
                                 f"{args[2]} cannot be made of the {budget} values the file "
                                 f"holds for {name}")
        budget += extra
    registry = pc._registry
    registry.load_budget = budget
    try:
        if ref.name == "BiRNNBuilder":
            obj = cls(*args[:3], pc, args[3])
        else:
            obj = cls(*args[:3], pc, *args[3:])
    finally:
        registry.load_budget = None
    parameter_files.populate_collection_dynet(obj.param_collection(), records, name, label,
                                          _layer_norm_params if layer_norm else None)
    return obj


def load(basename, pc, meta_bytes):
    """DyNet's dy.load: the objects of `meta_bytes` (basename.meta) added to pc, in
    order. On any failure pc is rolled back and ModelFileError raised."""
    with rolled_back_on_failure(pc, f"{basename}: DyNet's saved objects cannot be rebuilt here"):
        return _load(basename, pc, meta_bytes)


def _load(basename, pc, meta_bytes):
    label = basename + ".data"
    entries = read_meta(meta_bytes, basename + ".meta")
    records = _Records(dynet_text.parse(files.read_all(label, None, label), label), label)
    objects = []
    for e in entries:
        if e[0] in ("Parameters", "LookupParameters"):
            kind = "param" if e[0] == "Parameters" else "lookup"
            objects.append(parameter_files.add_loaded(pc, records.named(kind, e[1]), True))
        else:
            prefix = e[2] if e[2].endswith("/") else e[2] + "/"
            objects.append(_rebuild(e[0], e[1], e[2], records.under(prefix), pc, label))
    return objects


# ---------------------------------------------------------------- writing ----

def _builder_entry(obj):
    """(class ref, DyNet spec) of one of our builders, or of a user's class with spec and
    from_spec, named by the "module:QualName" it is registered under or its own (DyNet's
    load calls that class's from_spec with the spec)."""
    name = dynet_class_name(type(obj))
    if name is None:
        registered = user_name(type(obj))
        if (registered is None or not hasattr(obj, "spec")
                or not callable(getattr(type(obj), "from_spec", None))):
            raise TypeError(f"dy.save(format='dynet'): DyNet has no {type(obj).__name__}: "
                            "DyNet's files hold its builders and objects of your classes with "
                            "spec and from_spec(spec, model); save in our format (the default)")
        return UserRef(registered), obj.spec
    spec = obj.spec
    fields = DYNET_BUILDERS[name][1]
    if name == "BiRNNBuilder":
        factory = dynet_class_name(spec["rnn_builder_factory"])
        if factory is None:
            raise TypeError("dy.save(format='dynet'): the BiRNNBuilder's layers are not a "
                            "DyNet builder")
        return ClassRef(name), (spec["num_layers"], spec["input_dim"], spec["hidden_dim"],
                                 ClassRef(factory), None)
    defaults = {"ln_lstm": False, "forget_bias": 1.0}
    missing = [f for f in fields if f not in defaults and (not isinstance(spec, dict) or f not in spec)]
    if missing:
        raise TypeError(f"dy.save(format='dynet'): the spec of this {type(obj).__name__} does "
                        f"not give DyNet's {missing or fields}")
    return ClassRef(name), tuple(spec.get(f, defaults.get(f)) for f in fields)


def save(basename, objects):
    """DyNet's dy.save: `basename.meta` (pickles DyNet reads) and `basename.data`."""
    meta, named = [], []
    for obj in objects:
        if isinstance(obj, (Parameters, LookupParameters)):
            tag = "Parameters" if isinstance(obj, Parameters) else "LookupParameters"
            meta.append(pickle_object((tag, obj.name()), tag))
            named.append((obj.name(), obj))
            continue
        if not callable(getattr(obj, "param_collection", None)):
            raise TypeError(f"dy.save(format='dynet'): cannot save a {type(obj).__name__}: "
                            "DyNet's files hold Parameters, LookupParameters and builders")
        ref, spec = _builder_entry(obj)
        pc = obj.param_collection()
        meta.append(pickle_object((ref, spec, pc.name()), type(obj).__name__))
        # DyNet's files have no room for a layer-normalised LSTM's gains and biases
        # (DyNet keeps them outside the builder's collection); its load makes them anew
        skip = type(ref) is ClassRef and ref.name == "VanillaLSTMBuilder" and spec[3]
        named.extend((p.name(), p) for p in all_params(pc) if not (skip and _layer_norm_params(p)))
    parameter_files.write_dynet(basename + ".data", named)
    files.write_atomic(basename + ".meta", b"".join(meta))
