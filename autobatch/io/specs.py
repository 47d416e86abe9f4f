"""The spec of a saved object (what `from_spec` rebuilds it from) as JSON: numbers,
strings, None, lists, str-keyed dicts, tuples as {"__tuple__": [...]} and registered
classes as {"__class__": "<registered name>"}. Decoding never imports or looks up
anything but the registry of savable classes."""
from autobatch.errors import ModelFileError
from autobatch.io.registry import savable_class, savable_name

MAX_SPEC_DEPTH = 32      # nesting of a spec


def encode_spec(x, where):
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, tuple):
        return {"__tuple__": [encode_spec(v, where) for v in x]}
    if isinstance(x, list):
        return [encode_spec(v, where) for v in x]
    if isinstance(x, dict) and all(isinstance(k, str) and not k.startswith("__") for k in x):
        return {k: encode_spec(v, where) for k, v in x.items()}
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


def registered_class(ref):
    """The class registered under `ref`: a dictionary lookup; never an import or a
    getattr on a module."""
    cls = savable_class(ref)
    if cls is None:
        raise ModelFileError(f"class {ref!r:.200} is not registered for loading: a file can "
                             "name only classes registered in code with dy.register_savable")
    return cls


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
        if special:
            raise ModelFileError(f"bad spec object with keys {sorted(x)[:5]}")
        return {k: decode_spec(v, depth + 1) for k, v in x.items()}
    return x
