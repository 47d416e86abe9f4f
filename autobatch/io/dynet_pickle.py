"""DyNet's ``.meta`` files (what its `dy.save` writes): one pickle per saved object,
read here as data and written by hand.

    ("Parameters", "/W")                       a Parameters, by full name
    ("LookupParameters", "/E")                 a LookupParameters
    (_dynet.VanillaLSTMBuilder, (1, 2, 3, False, 1.0), "/vanilla-lstm-builder/")
                                               a builder: class, spec, collection name
    (__main__.OneLayerMLP, (10, 20, 4, _dynet.rectify), "/_0/")
                                               a user's class (DyNet's saving tutorial)

Reading never unpickles. `pickletools.genops` splits the stream into opcodes (it
executes nothing) and `_Reader` runs only the opcodes that build strings, numbers,
booleans, None, tuples, lists and dicts, and references by name: DyNet's builders and
functions (``_dynet.<Name>``, the names of `DYNET_BUILDERS` and `DYNET_FUNCTIONS`,
mapped to ours by those tables) and a user's classes (``module.QualName``, kept as the
name "module:QualName"; never this library's own classes, which a file names as
DyNet's). A reference is kept as a name; nothing is imported. A file naming a user's
class that code has not registered under "module:QualName" (`dy.register_savable`) is
refused once it is read, with one message naming every such class. An instance of a
user's class in a spec (a vocabulary) is read from the opcodes pickle writes for one
(`_Reader.instance`) and kept as its class's name and state (`Instance`); a
defaultdict (a vocabulary's counts) from `collections.defaultdict` of one of the
factories of autobatch.io.specs.FACTORIES, by REDUCE. Any other opcode or name is
refused with ModelFileError. Every
protocol DyNet has written is read: 0 and 1 (Python 2's `pickle.dump`, strings as
``S'...'``), 2 to 5 (Python 3's).

Memo references (``BINGET``) let a few bytes name one list many times, and nested,
stand for a tree exponentially larger than the file. An object is therefore measured
as the tree it stands for, with every reference expanded (in time linear in the file:
each shared part is counted once), and refused when that tree has more than
`EXPANSION` values per byte of its pickle, or refers to itself: whatever reads the spec
afterwards works in time and memory proportional to the file.

Writing emits the same opcodes by hand (protocol 2, no memo), so that DyNet's
`pickle.load` reads them. A user's class is written under the "module:QualName" it is
registered under, or its own: writing needs no registration.
"""
import collections
import io
import pickletools
import struct

from autobatch.api import core
from autobatch.api.core import ELEMENTWISE_FUNCTIONS
from autobatch.errors import ModelFileError
from autobatch.io.registry import savable_class, savable_name
from autobatch.io.specs import (FACTORIES, MAX_SPEC_DEPTH, not_plain_data, object_state,
                                unregistered_error)

MAX_OPS = 2_000_000      # opcodes in one object's pickle (a spec with a 100,000-word vocabulary)
MAX_OBJECTS = 100000
EXPANSION = 4            # values an object's tree may hold per byte of its pickle

# DyNet's builder class -> (the name our class is registered under in autobatch.io.registry,
# the spec's fields). Our class is built with DyNet's positional arguments and then
# populated positionally, as DyNet's own load does.
DYNET_BUILDERS = {
    "SimpleRNNBuilder": ("autobatch.builders:SimpleRNNBuilder", ("layers", "input_dim", "hidden_dim")),
    "VanillaLSTMBuilder": ("autobatch.builders:VanillaLSTMBuilder",
                           ("layers", "input_dim", "hidden_dim", "ln_lstm", "forget_bias")),
    "LSTMBuilder": ("autobatch.builders:VanillaLSTMBuilder",            # dynet38's (see _spec_args)
                    ("layers", "input_dim", "hidden_dim", "ln_lstm", "forget_bias")),
    "CoupledLSTMBuilder": ("autobatch.builders:CoupledLSTMBuilder", ("layers", "input_dim", "hidden_dim")),
    "GRUBuilder": ("autobatch.builders:GRUBuilder", ("layers", "input_dim", "hidden_dim")),
    "CompactVanillaLSTMBuilder": ("autobatch.lstm_builders:CompactVanillaLSTMBuilder",
                                  ("layers", "input_dim", "hidden_dim")),
    "BiRNNBuilder": ("autobatch.builders:BiRNNBuilder",
                     ("num_layers", "input_dim", "hidden_dim", "rnn_builder_factory", "builder_layers")),
}


class ClassRef:
    """One of DyNet's builder classes named by a file (kept as a name; never imported)."""

    def __init__(self, name):
        self.name = name


class FuncRef(ClassRef):
    """One of DyNet's functions named by a file (an activation in a spec): one of
    DYNET_FUNCTIONS, resolved to ours of the same name."""


class UserRef(ClassRef):
    """A class of the user's, named "module:QualName" by a file: loadable only if code
    registered a class under that name (dy.register_savable); the whole file is refused
    otherwise (`read_meta`)."""


class Instance:
    """An instance of a user's registered class in a spec (a parser's vocabulary):
    the class's name and the state pickle stored (NEWOBJ then BUILD; Python 2's
    copy_reg._reconstructor or INST). Rebuilt by autobatch.io.specs.rebuild_object:
    cls.__new__, then the state, as pickle does; nothing the file names is called."""

    def __init__(self, name):
        self.name, self.state, self.built = name, None, False


class _Marker:
    """A name a pickle uses only to rebuild an instance (copy_reg._reconstructor,
    object): allowed there, refused anywhere else."""

    def __init__(self, name):
        self.name = name


class _Factory(_Marker):
    """The default of a defaultdict (int, float, ...): allowed only as the argument of
    `collections.defaultdict` in a REDUCE."""


_RECONSTRUCTOR, _OBJECT = _Marker("copy_reg._reconstructor"), _Marker("object")
_DEFAULTDICT = _Marker("collections.defaultdict")
_MARKERS = {("copy_reg", "_reconstructor"): _RECONSTRUCTOR, ("copyreg", "_reconstructor"): _RECONSTRUCTOR,
            ("__builtin__", "object"): _OBJECT, ("builtins", "object"): _OBJECT,
            ("collections", "defaultdict"): _DEFAULTDICT}
_MARKERS.update({(module, name): _Factory(name) for name, factory in FACTORIES.items()
                 if factory is not None for module in ("__builtin__", "builtins")})
# Python 3 pickles int and str for Python 2 (protocols 0 to 2) as long and unicode
_MARKERS.update({("__builtin__", "long"): _Factory("int"), ("__builtin__", "unicode"): _Factory("str")})


# DyNet's functions a spec may name (DyNet's tutorial passes dy.rectify to its MLP)
DYNET_FUNCTIONS = frozenset(ELEMENTWISE_FUNCTIONS) | {"softmax", "log_softmax"}


def our_class(name):
    """Our builder class for DyNet's class `name` (for a name of the table only: a
    lookup in the registry of savable classes), or None."""
    entry = DYNET_BUILDERS.get(name)
    return savable_class(entry[0]) if entry else None


# ---------------------------------------------------------------- reading ----

class _Reader:
    """Runs the data-only subset of pickle's opcodes for one object."""

    def __init__(self, label):
        self.label = label
        self.stack, self.marks, self.memo = [], [], {}
        self.missing = []        # the users' classes named that are not registered

    def bad(self, msg):
        return ModelFileError(f"{self.label}: {msg} (a DyNet .meta is read as data: names, "
                              "numbers, tuples, lists, dicts, DyNet's builders and functions, "
                              "registered classes; nothing else)")

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

    def set_items(self, items):
        st = self.stack
        if len(items) % 2 or not st or not isinstance(st[-1], dict):
            raise self.bad("corrupt pickle (set items of a non-dict)")
        for k, v in zip(items[::2], items[1::2]):
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise self.bad("a dict key that is not a str or an int")
            st[-1][k] = v

    def global_ref(self, module, name):
        """A reference by name: DyNet's builders and functions by a table, a user's class
        through the registry (a dictionary lookup); never an import."""
        if module in ("_dynet", "dynet") and name in DYNET_BUILDERS:
            return ClassRef(name)
        if module in ("_dynet", "dynet") and name in DYNET_FUNCTIONS:
            return FuncRef(name)
        if (module, name) in _MARKERS:
            return _MARKERS[(module, name)]
        registered = f"{module}:{name}"
        # this library's classes are registered too, but DyNet never names them: a file
        # that does would reach them past the checks of DyNet's specs (`_spec_args`)
        ours = module == "autobatch" or module.startswith("autobatch.")
        if ours:
            raise self.bad(f"the file names {module!s:.60}.{name!s:.60}, a class of this library: "
                           "DyNet's files name DyNet's builders (_dynet.<Name>)")
        if len(registered) > 200 or not module or not name:
            raise self.bad(f"the file names {module!s:.60}.{name!s:.60}, not a class's name")
        if savable_class(registered) is None:
            self.missing.append(registered)      # refused once the file is read, all named
        return UserRef(registered)

    def step(self, op, arg):
        name, st = op.name, self.stack
        if name in ("PROTO", "FRAME"):
            return
        if name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "BININT",
                    "BININT1", "BININT2", "LONG1", "BINFLOAT", "FLOAT", "LONG"):
            st.append(arg)
        elif name in ("STRING", "BINSTRING", "SHORT_BINSTRING"):
            st.append(arg)           # Python 2's str (protocols 0 and 1), read as str
        elif name == "INT":          # protocols 0 and 1: True/False are INT 01 / 00
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
        elif name == "EMPTY_DICT":
            st.append({})
        elif name == "DICT":         # protocol 0: MARK k v k v ... DICT
            items = self.pop_mark()
            st.append({})
            self.set_items(items)
        elif name in ("SETITEM", "SETITEMS"):
            self.set_items(self.pop(2) if name == "SETITEM" else self.pop_mark())
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
        elif name in ("NEWOBJ", "REDUCE", "INST", "OBJ", "BUILD"):
            self.instance(name, arg)
        else:
            raise self.bad(f"the pickle uses {name}, which only code (not data) needs")

    def instance(self, name, arg):
        """The opcodes pickle rebuilds an instance with, for a registered class only:
        NEWOBJ (cls, ()), REDUCE of copy_reg._reconstructor (cls, object, None), INST
        and OBJ without arguments; then BUILD with its state."""
        st = self.stack
        if name == "BUILD":
            (state,) = self.pop(1)
            if not st or not isinstance(st[-1], Instance) or st[-1].built:
                raise self.bad("the pickle uses BUILD on something that is not a new instance")
            st[-1].state, st[-1].built = state, True
            return
        if name == "INST":
            module, _, qualname = arg.partition(" ")
            cls, args = self.global_ref(module, qualname), tuple(self.pop_mark())
        elif name == "OBJ":
            items = self.pop_mark()
            cls, args = (items[0], tuple(items[1:])) if items else (None, ())
        else:
            cls, args = self.pop(2)
            if name == "REDUCE" and cls is _DEFAULTDICT:
                if (not isinstance(args, tuple) or len(args) != 1
                        or not (args[0] is None or type(args[0]) is _Factory)):
                    raise self.bad("the pickle makes a defaultdict whose default is not one of "
                                   f"{', '.join(FACTORIES)}")
                st.append(collections.defaultdict(FACTORIES[args[0].name] if args[0] else None))
                return
            if name == "REDUCE":
                if (cls is not _RECONSTRUCTOR or not isinstance(args, tuple) or len(args) != 3
                        or args[1] is not _OBJECT or args[2] is not None):
                    raise self.bad("the pickle uses REDUCE, which only code (not data) needs")
                cls, args = args[0], ()
        if type(cls) is not UserRef or args != ():
            raise self.bad(f"the pickle makes an instance by {name} of something that is not a "
                           "class registered here, or with arguments")
        st.append(Instance(cls.name))


def read_meta(data, label):
    """The objects of a DyNet .meta, in order: ("Parameters", name),
    ("LookupParameters", name) or (ClassRef, spec tuple, collection name)."""
    f, out, missing = io.BytesIO(data), [], []
    while f.tell() < len(data):
        if len(out) >= MAX_OBJECTS:
            raise ModelFileError(f"{label}: more than {MAX_OBJECTS} objects")
        start = f.tell()
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
        missing.extend(reader.missing)
        if missing:
            continue                  # the other objects are read for the names they need
        entry = _check_entry(reader.stack[0], label)
        _Sizer(EXPANSION * (f.tell() - start), reader.bad).size(entry, 0)
        out.append(entry)
    if missing:
        raise unregistered_error(label, missing)
    return out


class _Sizer:
    """The number of values in the tree an object stands for once every memo reference
    is expanded: each shared list, tuple or dict is measured once (so the time is
    linear in the pickle), and the count stops at `limit`."""

    def __init__(self, limit, bad):
        self.limit, self.bad = limit, bad
        self.known, self.open = {}, set()

    def size(self, x, depth):
        if isinstance(x, Instance):
            if depth > MAX_SPEC_DEPTH:
                raise self.bad(f"a spec nested deeper than {MAX_SPEC_DEPTH}")
            return 1 + self.size(x.state, depth + 1)
        if not isinstance(x, (tuple, list, dict)):
            return 1
        key = id(x)                  # x is alive until the load ends: ids are not reused
        if key in self.known:
            return self.known[key]
        if key in self.open:
            raise self.bad("the pickle holds a list or dict that contains itself")
        if depth > MAX_SPEC_DEPTH:
            raise self.bad(f"a spec nested deeper than {MAX_SPEC_DEPTH}")
        self.open.add(key)
        n = 1 + (len(x) if isinstance(x, dict) else 0)       # a dict's keys are scalars
        for v in (x.values() if isinstance(x, dict) else x):
            n += self.size(v, depth + 1)
            if n > self.limit:
                raise self.bad(f"an object whose memo references stand for more than "
                               f"{self.limit} values ({EXPANSION} per byte of its pickle)")
        self.open.discard(key)
        self.known[key] = n
        return n


def _check_entry(e, label):
    if (isinstance(e, tuple) and len(e) == 2 and e[0] in ("Parameters", "LookupParameters")
            and isinstance(e[1], str) and e[1]):
        return e
    if (isinstance(e, tuple) and len(e) == 3 and type(e[0]) in (ClassRef, UserRef)
            and (isinstance(e[1], tuple) or type(e[0]) is UserRef)
            and isinstance(e[2], str) and e[2].startswith("/")):
        return e
    shape = f"a tuple of {len(e)}" if isinstance(e, tuple) else f"a {type(e).__name__}"
    raise ModelFileError(f"{label}: an object of the metadata is not one DyNet writes ({shape})")


# ---------------------------------------------------------------- writing ----

def dynet_class_name(cls):
    """DyNet's class name for one of our builders."""
    for dynet_name, (ours, _) in DYNET_BUILDERS.items():
        if dynet_name != "LSTMBuilder" and our_class(dynet_name) is cls:
            return dynet_name
    return None


def _ref_of(x):
    """The reference DyNet's pickle.load resolves to the object x, or None: one of
    DyNet's functions or builders, or a class registered as "module:QualName" (the
    DyNet program's class of that name)."""
    for name in DYNET_FUNCTIONS:
        if getattr(core, name, None) is x:
            return FuncRef(name)
    if isinstance(x, type):
        dynet_name = dynet_class_name(x)
        if dynet_name is not None:
            return ClassRef(dynet_name)
        registered = user_name(x)
        if registered is not None:
            return UserRef(registered)
    return None


def user_name(cls):
    """The "module:QualName" DyNet's load finds a user's class by: the one it is
    registered under, else its own; None for this library's classes (DyNet has not
    them) and Python's built-in ones."""
    registered = savable_name(cls)
    if registered is None or ":" not in registered:
        registered = f"{cls.__module__}:{cls.__qualname__}"
    if registered.startswith(("autobatch:", "autobatch.", "builtins:")):
        return None
    return registered


def _emit(x, out, where, depth=0):
    """Protocol 2 opcodes that build x (no memo, no REDUCE)."""
    if depth > MAX_SPEC_DEPTH:
        raise ValueError(f"dy.save(format='dynet'): {where}: spec nested deeper than {MAX_SPEC_DEPTH}")
    if isinstance(x, UserRef):
        module, _, qualname = x.name.partition(":")
        out.append(b"c" + module.encode("utf-8") + b"\n" + qualname.encode("utf-8") + b"\n")
    elif isinstance(x, ClassRef):
        out.append(b"c_dynet\n" + x.name.encode("ascii") + b"\n")
    elif x is None:
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
    elif type(x) is collections.defaultdict:
        # collections.defaultdict(factory) by REDUCE, then its items: as pickle writes one
        factory = next((k for k, v in FACTORIES.items() if v is x.default_factory), None)
        if factory is None:
            raise TypeError(f"dy.save(format='dynet'): {where}: a defaultdict whose default is "
                            f"{x.default_factory!r:.60}: only {', '.join(FACTORIES)} can be saved")
        out.append(b"ccollections\ndefaultdict\n"
                   + (b"N" if factory == "None" else b"c__builtin__\n" + factory.encode() + b"\n")
                   + b"\x85R(")
        for v in (part for kv in x.items() for part in kv):
            _emit(v, out, where, depth + 1)
        out.append(b"u")
    elif isinstance(x, dict) and type(x) is not dict:
        raise TypeError(f"dy.save(format='dynet'): {where}: a spec holds a {type(x).__qualname__}: "
                        "save a dict (or a defaultdict) instead")
    elif isinstance(x, (tuple, list, dict)):
        kind = tuple if isinstance(x, tuple) else list if isinstance(x, list) else dict
        opening, closing = {tuple: (b"(", b"t"),           # MARK ... TUPLE
                            list: (b"](", b"e"),           # EMPTY_LIST MARK ... APPENDS
                            dict: (b"}(", b"u")}[kind]     # EMPTY_DICT MARK ... SETITEMS
        out.append(opening)
        for v in ([part for kv in x.items() for part in kv] if kind is dict else x):
            _emit(v, out, where, depth + 1)
        out.append(closing)
    elif _ref_of(x) is not None:
        _emit(_ref_of(x), out, where, depth)
    elif user_name(type(x)) is not None and (savable_name(type(x)) is not None
                                             or not_plain_data(type(x)) is None):
        # an instance of a user's class: NEWOBJ (cls, ()) and BUILD with its state, as
        # Python's pickle writes one, so that DyNet's load rebuilds it in the DyNet program
        _emit(UserRef(user_name(type(x))), out, where, depth)
        out.append(b")\x81")
        _emit(object_state(x, where), out, where, depth + 1)
        out.append(b"b")
    else:
        cls = type(x)
        why = (not_plain_data(cls) if user_name(cls) is not None else
               f"{cls.__module__}.{cls.__qualname__} is "
               + ("one of this library's own objects" if cls.__module__.startswith("autobatch")
                  else "a built-in or extension type"))
        raise TypeError(f"dy.save(format='dynet'): {where}: cannot write a {cls.__qualname__} as "
                        f"plain data: {why}. A spec holds numbers, strings, None, tuples, lists, "
                        "dicts, defaultdicts, DyNet's functions and builders, classes and "
                        "instances of Python classes whose state is such data")


def pickle_object(obj, where):
    out = [b"\x80\x02"]
    _emit(obj, out, where)
    out.append(b".")
    return b"".join(out)
