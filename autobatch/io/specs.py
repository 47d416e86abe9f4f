"""The spec of a saved object (what `from_spec` rebuilds it from) as JSON: numbers,
strings, None, lists, str-keyed dicts, tuples as {"__tuple__": [...]}, other dicts as
{"__items__": [[key, value], ...]} (a defaultdict with "__defaultdict__": "int", ...),
sets as {"__set__": [...]}, classes as {"__class__": "<name>"} and instances of classes
(a vocabulary in a parser's spec) as {"__object__": "<name>", "__state__": <their plain
data>}. A class's name is the one it is registered under, or "module:QualName": saving
needs no registration. Decoding never imports or looks up anything but the registry of
savable classes: a file naming classes that are not registered is refused, naming them
all (`unregistered_error`); an instance is rebuilt as pickle rebuilds one, from its data
alone (see `rebuild_object`), never by calling what a file names."""
import collections

from autobatch.errors import ModelFileError
from autobatch.io.registry import class_name, savable_class, savable_name

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
        return {"__class__": class_name(x)}
    if isinstance(x, dict):           # keys that JSON cannot hold as they are (ints, tuples)
        return {"__items__": _items(x, where)}
    if isinstance(x, (set, frozenset)):
        return {"__set__": [encode_spec(v, where) for v in x]}
    cls = type(x)
    if savable_name(cls) is None:
        why = not_plain_data(cls)
        if why is not None:
            raise TypeError(f"dy.save: the spec of {where} holds a {cls.__qualname__}, which "
                            f"cannot be saved as plain data: {why}. A spec holds numbers, "
                            "strings, None, lists, tuples, dicts, sets, classes and instances "
                            "of Python classes whose state (their __dict__, or what "
                            "__getstate__ returns) is such data")
    return {"__object__": class_name(cls), "__state__": encode_spec(object_state(x, where), where)}


def not_plain_data(cls):
    """Why an instance of the unregistered class `cls` cannot be saved as its plain data
    (its state, rebuilt as pickle rebuilds it), or None if it can."""
    if cls.__module__ == "autobatch" or cls.__module__.startswith("autobatch."):
        return "it is one of this library's own objects"
    if not cls.__flags__ & (1 << 9):            # Py_TPFLAGS_HEAPTYPE: a class defined in Python
        return f"{cls.__module__}.{cls.__qualname__} is a built-in or extension type"
    if cls.__reduce_ex__ is not object.__reduce_ex__ or cls.__reduce__ is not object.__reduce__:
        return ("its class (or a base) defines __reduce__ or __reduce_ex__, so pickle saves it "
                "by naming code to call, not as data")
    return None


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
        raise unregistered_error("a file", [ref])
    return cls


MAX_LISTED = 100         # classes an unregistered-class refusal lists


def unregistered_error(label, names):
    """The refusal of a file that names the classes `names` (strings, as the file gives
    them), which are not registered: one message naming them all and the calls that
    register them."""
    names = list(dict.fromkeys(str(n)[:200] for n in names))
    shown = names[:MAX_LISTED]
    more = f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""

    def call(name):
        module, colon, qualname = name.partition(":")
        short = qualname.rpartition("<locals>.")[2]
        if colon and all(p.isidentifier() for p in [*module.split("."), *short.split(".")]):
            return f"dy.register_savable({short})"
        return f"dy.register_savable(<the class>, name={name!r})"
    example = next((n for n in shown if ":" in n), None)
    elsewhere = ""
    if example is not None:
        qualname = example.partition(":")[2]
        elsewhere = (f" (each class is found by the name the file gives it, \"module:QualName\"; "
                     f"a class that now lives in another module takes that name: "
                     f"dy.register_savable({qualname.rpartition('.')[2]}, name={example!r}))")
    return ModelFileError(
        f"{label} needs classes that are not registered: "
        f"{', '.join(n if n.isprintable() else repr(n) for n in shown)}{more}. Loading "
        "never imports or runs code a file names; it rebuilds only classes registered in "
        "code. If you trust the file, register them before dy.load: "
        f"{'; '.join(call(n) for n in shown)}{elsewhere}")


def spec_class_names(spec):
    """The class names a JSON spec gives ("__class__" and "__object__"), walked without
    decoding anything (to list every class a file needs before rebuilding one)."""
    names, todo = [], [(spec, 0)]
    while todo:
        x, depth = todo.pop()
        if depth > MAX_SPEC_DEPTH + 1:
            continue                    # decode_spec refuses it
        if isinstance(x, dict):
            for key in ("__class__", "__object__"):
                if isinstance(x.get(key), str):
                    names.append(x[key])
            todo.extend((v, depth + 1) for v in reversed(list(x.values())))
        elif isinstance(x, list):
            todo.extend((v, depth + 1) for v in reversed(x))
    return names


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
