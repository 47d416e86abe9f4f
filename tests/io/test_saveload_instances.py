"""`dy.save` of objects following DyNet's save protocol (`param_collection()`, `spec`,
`from_spec`) whose spec holds what DyNet users put there: instances of their own
classes (a vocabulary), dicts with int or tuple keys, defaultdicts, sets. Saved as
plain data, rebuilt from it by the registered class (no pickle, nothing the file names
is called); saving needs no registration, loading does; what cannot be saved as plain
data is refused at `dy.save`, saying why."""
import collections
import json
import os
import re

import pytest

import autobatch as dy
from savefiles import read_meta, write_meta


class Vocab:
    def __init__(self, words):
        self.i2w = {i: w for i, w in enumerate(words)}          # int keys
        self.w2i = collections.defaultdict(int, {w: i for i, w in enumerate(words)})
        self.tags = {"N", "V"}
        self.pairs = {("a", 1): [1, 2]}                          # a tuple key


class Counted:
    """A class with its own state protocol: its __setstate__ runs, not __init__."""

    def __init__(self, n):
        self.n = n

    def __getstate__(self):
        return {"count": self.n}

    def __setstate__(self, state):
        self.n = state["count"] * 1


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


class Parser:
    def __init__(self, model, vocab, extra):
        self.pc = model.add_subcollection("parser")
        self.E = self.pc.add_lookup_parameters((len(vocab.i2w), 2))
        self.vocab, self.extra = vocab, extra
        self.spec = {"vocab": vocab, "extra": extra}

    @classmethod
    def from_spec(cls, spec, model):
        return cls(model, spec["vocab"], spec["extra"])

    def param_collection(self):
        return self.pc


for cls in (Vocab, Counted, Slotted, Parser):
    dy.register_savable(cls, name=f"test_saveload_instances:{cls.__name__}")


def round_trip(tmp_path, obj):
    base = str(tmp_path / "m")
    dy.save(base, [obj])
    (back,) = dy.load(base, dy.ParameterCollection())
    return back


def test_a_spec_holding_users_instances_round_trips(tmp_path):
    vocab = Vocab(["<unk>", "the", "cat"])
    parser = Parser(dy.ParameterCollection(), vocab, [Counted(4), Slotted(1, "x"), {"nested": vocab}])
    back = round_trip(tmp_path, parser)
    v = back.vocab
    assert type(v) is Vocab and v.i2w == vocab.i2w and v.tags == {"N", "V"} and v.pairs == vocab.pairs
    assert type(v.w2i) is collections.defaultdict and v.w2i == vocab.w2i and v.w2i["unseen"] == 0
    counted, slotted, nested = back.extra
    assert type(counted) is Counted and counted.n == 4
    assert type(slotted) is Slotted and (slotted.a, slotted.b) == (1, "x")
    assert type(nested["nested"]) is Vocab and nested["nested"].i2w == vocab.i2w
    assert (back.E.as_array() == parser.E.as_array()).all()


def test_the_file_holds_plain_data_only(tmp_path):
    parser = Parser(dy.ParameterCollection(), Vocab(["a"]), None)
    dy.save(str(tmp_path / "m"), [parser])
    spec = read_meta(str(tmp_path / "m"))["objects"][0]["spec"]
    assert spec["vocab"]["__object__"] == "test_saveload_instances:Vocab"
    assert spec["vocab"]["__state__"]["i2w"] == {"__items__": [[0, "a"]]}
    assert spec["vocab"]["__state__"]["w2i"] == {"__defaultdict__": "int", "__items__": [["a", 0]]}
    json.dumps(spec)                                    # nothing but JSON


@pytest.mark.parametrize("value,match", [
    (object(), r"builtins.object is a built-in or extension type"),
    (collections.Counter("ab"), "Counter"),
    (collections.defaultdict(lambda: 3), "defaultdict whose default"),
    (print, "built-in or extension type"),
])
def test_what_cannot_be_saved_is_refused_saying_why(tmp_path, value, match):
    parser = Parser(dy.ParameterCollection(), Vocab(["a"]), value)
    with pytest.raises(TypeError, match=match):
        dy.save(str(tmp_path / "m"), [parser])
    assert not os.path.exists(str(tmp_path / "m.meta"))


def test_an_unregistered_instance_is_saved_and_loads_once_registered(tmp_path):
    """Saving needs no registration: an instance of an unregistered class is saved as
    its plain data under "module:QualName"; dy.load refuses it, naming the class and
    the call, until code registers it."""
    class Unregistered:
        def __init__(self):
            self.counts = collections.defaultdict(int, {"a": 2})
    base = str(tmp_path / "m")
    dy.save(base, [Parser(dy.ParameterCollection(), Vocab(["a"]), Unregistered())])
    name = f"{__name__}:{Unregistered.__qualname__}"
    assert read_meta(base)["objects"][0]["spec"]["extra"]["__object__"] == name
    pc = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError, match=re.escape(name) + r".*dy.register_savable\(Unregistered\)"):
        dy.load(base, pc)
    assert pc.lookup_parameters_list() == []
    dy.register_savable(Unregistered)
    (back,) = dy.load(base, pc)
    assert type(back.extra) is Unregistered and back.extra.counts == {"a": 2}
    assert type(back.extra.counts) is collections.defaultdict and back.extra.counts["b"] == 0


@pytest.mark.parametrize("edit", [
    lambda spec: spec["vocab"].update({"__object__": "os:system"}),
    lambda spec: spec["vocab"].update({"__object__": "builtins:object"}),
    lambda spec: spec["vocab"].update({"__state__": [1, 2]}),
    lambda spec: spec["vocab"]["__state__"].update({"w2i": {"__defaultdict__": "eval", "__items__": []}}),
    lambda spec: spec["vocab"]["__state__"].update({"i2w": {"__items__": [[[1], "x"]]}}),
    lambda spec: spec["vocab"]["__state__"].update({"i2w": {"__items__": [[1]]}}),
    lambda spec: spec.update({"extra": {"__set__": [[1]]}}),
], ids=["unregistered", "not-registered-builtin", "state-not-a-dict", "factory", "unhashable-key",
        "bad-pair", "unhashable-set-item"])
def test_a_hostile_spec_is_refused_and_adds_nothing(tmp_path, edit):
    """A validly re-signed file (a hostile author) naming classes or factories that are
    not registered, or with states that are not data, is refused and changes nothing."""
    base = str(tmp_path / "m")
    dy.save(base, [Parser(dy.ParameterCollection(), Vocab(["a"]), None)])
    meta = read_meta(base)
    edit(meta["objects"][0]["spec"])
    write_meta(base, meta)
    pc = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError):
        dy.load(base, pc)
    assert pc.lookup_parameters_list() == [] and pc.add_subcollection("parser").name() == "/parser/"
