"""The spec of a saved object (what `from_spec` rebuilds it from) as JSON: numbers,
strings, None, lists, str-keyed dicts, tuples as {"__tuple__": [...]}, other dicts as
{"__items__": [[key, value], ...]} (a defaultdict with "__defaultdict__": "int", ...),
sets as {"__set__": [...]}, registered
classes as {"__class__": "<registered name>"} and instances of registered classes (a
vocabulary in a parser's spec) as {"__object__": "<registered name>", "__state__": <their
plain data>}. Decoding never imports or looks up anything but the registry of savable
classes; an instance is rebuilt as pickle rebuilds one, from its data alone (see
`rebuild_object`), never by calling what a file names."""
import collections

from autobatch.errors import ModelFileError
from autobatch.io.registry import savable_class, savable_name

MAX_SPEC_DEPTH = 32      # nesting of a spec
# the defaults a saved defaultdict may have (a file names one of these, nothing else)
FACTORIES = {"int": int, "float": float, "str": str, "list": list, "dict": dict, "set": set, "None": None}


def encode_spec(x, where):
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, tuple):
        return {"__tuple__": [encode_spec(v, where) for v in x]}
    if isinstance(x, list):
        return [encode_spec(v, where) for v in x]
    if type(x) is collections.defaultdict:
        if x.default_factory not in FACTORIES.values():
            raise TypeError(f"dy.save: the spec of {where} holds a defaultdict whose default is "
                            f"{x.default_factory!r:.60}: only {', '.join(FACTORIES)} can be saved")
        factory = next(k for k, v in FACTORIES.items() if v is x.default_factory)
        return {"__defaultdict__": factory, "__items__": _items(x, where)}
    if isinstance(x, dict) and type(x) is not dict:
        raise TypeError(f"dy.save: the spec of {where} holds a {type(x).__qualname__}: save a "
                        "dict (or a defaultdict) instead")
    if isinstance(x, dict) and all(isinstance(k, str) and not k.startswith("__") for k in x):
        return {k: encode_spec(v, where) for k, v in x.items()}
    if isinstance(x, type):
        name = savable_name(x)
        if name is None:
            raise TypeError(f"dy.save: the spec of {where} names the class {x.__qualname__}, "
                            f"which is not registered: call dy.register_savable({x.__qualname__}) "
                            "(in code, before dy.save and dy.load) so that dy.load may name it")
        return {"__class__": name}
    if isinstance(x, dict):           # keys that JSON cannot hold as they are (ints, tuples)
        return {"__items__": _items(x, where)}
    if isinstance(x, (set, frozenset)):
        return {"__set__": [encode_spec(v, where) for v in x]}
    name = savable_name(type(x))
    if name is not None:
        return {"__object__": name, "__state__": encode_spec(object_state(x, where), where)}
    cls = type(x).__qualname__
    raise TypeError(f"dy.save: the spec of {where} holds a {cls}, which cannot be saved "
                    "without pickle. Register its class, in code before dy.save and dy.load: "
                    f"dy.register_savable({cls}); a {cls} is then saved as its plain data (its "
                    "__dict__, or what its __getstate__ returns: numbers, strings, None, lists, "
                    "tuples, str-keyed dicts, registered classes and their instances) and "
                    "rebuilt from it by dy.load")


def _items(d, where):
    return [[encode_spec(k, where), encode_spec(v, where)] for k, v in d.items()]


def object_state(x, where):
    """What an instance is saved as: what pickle would save (`__getstate__`, by default
    its __dict__; for __slots__ a pair (dict or None, slots))."""
    getstate = getattr(x, "__getstate__", None)
    if not callable(getstate):
        raise TypeError(f"dy.save: the spec of {where} holds a {type(x).__qualname__} without a state")
    return getstate()


def rebuild_object(cls, state):
    """An instance of the registered class `cls` rebuilt from its saved state as pickle
    rebuilds one: `cls.__new__(cls)` (no __init__), then its `__setstate__(state)` if it
    has one, or the state's attributes set. Only a registered class's own code runs."""
    obj = cls.__new__(cls)
    setstate = getattr(obj, "__setstate__", None)
    if callable(setstate):
        setstate(state)
        return obj
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    for part in (state, slots):
        if part is not None and (not isinstance(part, dict) or not all(isinstance(k, str) for k in part)):
            raise ModelFileError(f"the saved state of a {cls.__qualname__} is not a dict of "
                                 "attributes (and it has no __setstate__)")
    if state:
        obj.__dict__.update(state)      # as pickle does: the instance's dict, no __setattr__
    for k, v in (slots or {}).items():
        setattr(obj, k, v)
    return obj


def registered_class(ref):
    """The class registered under `ref`: a dictionary lookup; never an import or a
    getattr on a module."""
    cls = savable_class(ref)
    if cls is None:
        raise ModelFileError(f"class {ref!r:.200} is not registered for loading: a file can "
                             "name only classes registered in code with dy.register_savable")
    return cls


def _hashed(kind, items, depth):
    """A dict of [key, value] pairs, or a set, whose keys must be hashable values."""
    if kind is dict and not all(isinstance(kv, list) and len(kv) == 2 for kv in items):
        raise ModelFileError("bad spec object: __items__ must be [key, value] pairs")
    try:
        if kind is dict:
            return {decode_spec(k, depth + 1): decode_spec(v, depth + 1) for k, v in items}
        return {decode_spec(v, depth + 1) for v in items}
    except TypeError:
        raise ModelFileError("bad spec object: a dict key or set item that is not hashable") from None


def decode_spec(x, depth=0):
    if depth > MAX_SPEC_DEPTH:
        raise ModelFileError(f"spec nested deeper than {MAX_SPEC_DEPTH}")
    if isinstance(x, list):
        return [decode_spec(v, depth + 1) for v in x]
    if isinstance(x, dict):
        special = [k for k in x if k.startswith("__")]
        if special == ["__tuple__"] and len(x) == 1 and isinstance(x["__tuple__"], list):
            return tuple(decode_spec(v, depth + 1) for v in x["__tuple__"])
        if special == ["__class__"] and len(x) == 1:
            return registered_class(x["__class__"])
        if special == ["__items__"] and len(x) == 1 and isinstance(x["__items__"], list):
            return _hashed(dict, x["__items__"], depth)
        if (sorted(special) == ["__defaultdict__", "__items__"] and len(x) == 2
                and x["__defaultdict__"] in FACTORIES and isinstance(x["__items__"], list)):
            return collections.defaultdict(FACTORIES[x["__defaultdict__"]],
                                           _hashed(dict, x["__items__"], depth))
        if special == ["__set__"] and len(x) == 1 and isinstance(x["__set__"], list):
            return _hashed(set, x["__set__"], depth)
        if sorted(special) == ["__object__", "__state__"] and len(x) == 2:
            return rebuild_object(registered_class(x["__object__"]), decode_spec(x["__state__"], depth + 1))
        if special:
            raise ModelFileError(f"bad spec object with keys {sorted(x)[:5]}")
        return {k: decode_spec(v, depth + 1) for k, v in x.items()}
    return x
