"""The classes `dy.load` may rebuild, by name. A file names a registered class by its
registered name, and nothing else (no import, no attribute lookup on modules). The
library's builders register themselves (autobatch.model); users register their own
classes in code with `dy.register_savable(cls)`."""

_SAVABLE = {}       # registered name -> class
_SAVABLE_NAME = {}  # class -> the name dy.save writes


def register_savable(cls, name=None):
    """Let `dy.save` / `dy.load` store and rebuild objects of `cls` (which then has a
    `spec` attribute and a `from_spec(spec, model)` classmethod), let specs name `cls`,
    and let specs hold instances of `cls` (a vocabulary), saved as their plain data (their
    `__dict__`, or what `__getstate__` returns) and rebuilt from it as pickle does
    (`cls.__new__`, then `__setstate__` or the attributes; `__init__` is not called). `name` (default ``"module:QualName"``, which is what files written before
    the registry used) is what files store; a file can name only registered classes.
    A name registered for another class is refused, except for a class of the same
    module and qualified name (a redefinition), which replaces it.
    Returns `cls`, so it can be used as a decorator.

    `dy.save` needs no registration (an unregistered class is written as
    "module:QualName"); `dy.load` rebuilds only registered classes."""
    if not isinstance(cls, type):
        raise TypeError(f"register_savable takes a class, got {type(cls).__name__}")
    if name is None:
        name = f"{cls.__module__}:{cls.__qualname__}"
    if not isinstance(name, str) or not name or len(name) > 200:
        raise TypeError(f"register_savable: name must be a non-empty str, got {name!r}")
    other = _SAVABLE.get(name)
    if (other is not None and other is not cls
            and (other.__module__, other.__qualname__) != (cls.__module__, cls.__qualname__)):
        # (a class defined again, as a re-run notebook cell does, replaces its old self)
        raise ValueError(f"register_savable: {name!r} is already registered for {other!r}")
    _SAVABLE[name] = cls
    _SAVABLE_NAME.setdefault(cls, name)
    return cls


def savable_class(name):
    """The class registered under `name`, or None (a dictionary lookup, nothing more)."""
    return _SAVABLE.get(name) if isinstance(name, str) else None


def savable_name(cls):
    """The name under which `cls` is registered, or None."""
    return _SAVABLE_NAME.get(cls)


def class_name(cls):
    """The name `dy.save` writes for `cls`: the name it is registered under, or else
    "module:QualName" (saving needs no registration; loading rebuilds only registered
    classes)."""
    name = _SAVABLE_NAME.get(cls)
    return name if name is not None else f"{cls.__module__}:{cls.__qualname__}"


def savable_classes():
    """{name: class} of every registered class."""
    return dict(_SAVABLE)
