"""Pickles of DyNet's `.meta` objects in every protocol DyNet has written, made with
Python's own pickler: protocols 2 to 5 as Python 3 writes them, protocols 0 and 1 as
Python 2 wrote them (DyNet's `dy.save` under Python 2 used `pickle.dump`'s default,
protocol 0: ``(S'Parameters'\\np0\\nS'/W'\\np1\\ntp2\\n.``), its str being ``STRING`` /
``SHORT_BINSTRING`` / ``BINSTRING`` rather than Python 3's unicode opcodes.

A class or function (DyNet's `_dynet.VanillaLSTMBuilder`, `dy.rectify`, a user's
class) is written as a reference by its module and name without being looked up, so
this module works both here, with `Global` placeholders, and under DyNet
(tests/data/check_dynet_loads_py2_meta.py) with DyNet's real objects. Nothing here
imports autobatch."""
import _compat_pickle
import io
import pickle
import struct
from typing import ClassVar


class Global:
    """A reference to `module.name` (DyNet's `_dynet.GRUBuilder`, a user's
    `__main__.OneLayerMLP`) for the pickler to write."""

    def __init__(self, module, name):
        self.module, self.name = module, name


class _Pickler(pickle._Pickler):
    """Python's pure-Python pickler; str as Python 2 wrote it under protocols 0 and 1,
    references written from their names."""

    dispatch: ClassVar[dict] = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj):
        if self.proto >= 2:
            return pickle._Pickler.save_str(self, obj)
        if not self.bin:                              # protocol 0: S'...'\n (repr, ASCII)
            self.write(pickle.STRING + repr(obj).encode("ascii") + b"\n")
        else:
            data = obj.encode("latin-1")
            if len(data) < 256:
                self.write(pickle.SHORT_BINSTRING + bytes([len(data)]) + data)
            else:
                self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)
        self.memoize(obj)

    def save_reference(self, obj):
        module, name = ((obj.module, obj.name) if isinstance(obj, Global)
                        else (obj.__module__, obj.__qualname__))
        if self.proto < 3:               # Python 2's names (copy_reg, __builtin__), as pickle maps them
            module, name = _compat_pickle.REVERSE_NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.REVERSE_IMPORT_MAPPING.get(module, module)
        if self.proto >= 4:
            self.save(module)
            self.save(name)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + module.encode("utf-8") + b"\n" + name.encode("utf-8") + b"\n")
        self.memoize(obj)

    dispatch[str] = save_py2_str
    dispatch[Global] = save_reference
    dispatch[type] = save_reference

    def save_global(self, obj, name=None):          # functions (dy.rectify), other classes
        self.save_reference(obj)


def dumps(obj, protocol):
    f = io.BytesIO()
    _Pickler(f, protocol).dump(obj)
    return f.getvalue()


def meta(entries, protocol):
    """A `.meta`: one pickle per saved object, as DyNet's `dy.save` writes it."""
    return b"".join(dumps(e, protocol) for e in entries)
