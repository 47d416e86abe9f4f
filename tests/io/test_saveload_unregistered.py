"""Saving needs no registration; loading does. A DyNet program saves its parser
(mitchellstern/minimal-span-parser: `dy.save(best_path, [parser])`, the parser's spec
holding two `Vocabulary` objects with defaultdict counts) without registering a class;
the file names its classes "module:QualName". `dy.load` refuses it, naming every class
it needs and the calls to make, and never imports or runs anything the file names;
once the classes are registered it rebuilds them exactly, in our format and DyNet's."""
import collections
import itertools
import json
import pickle
import sys

import numpy as np
import pytest

import autobatch as dy
from autobatch.io import dynet_pickle
from savefiles import read_meta, write_meta


PROGRAMS = itertools.count()


def parser_classes():
    """TopDownParser and Vocabulary classes shaped like minimal-span-parser's, of a
    program of their own (qualified names no other test has registered)."""
    class Vocabulary:
        def __init__(self):
            self.frozen = False
            self.values = []
            self.indices = {}
            self.counts = collections.defaultdict(int)

        def index(self, value):
            if value not in self.indices:
                self.indices[value] = len(self.values)
                self.values.append(value)
            self.counts[value] += 1
            return self.indices[value]

        def freeze(self):
            self.frozen = True

    class TopDownParser:
        def __init__(self, model, tag_vocab, word_vocab, tag_embedding_dim, lstm_dim):
            self.spec = locals()
            self.spec.pop("self")
            self.spec.pop("model")
            self.model = model.add_subcollection("parser")
            self.tag_vocab, self.word_vocab = tag_vocab, word_vocab
            self.tag_embeddings = self.model.add_lookup_parameters((len(tag_vocab.values), tag_embedding_dim))
            self.W = self.model.add_parameters((lstm_dim, tag_embedding_dim))

        def param_collection(self):
            return self.model

        @classmethod
        def from_spec(cls, spec, model):
            return cls(model, **spec)

    program = f"program{next(PROGRAMS)}"
    for cls in (TopDownParser, Vocabulary):
        cls.__qualname__ = f"{program}.{cls.__name__}"
    return TopDownParser, Vocabulary


def make_parser(TopDownParser, Vocabulary):
    tags, words = Vocabulary(), Vocabulary()
    for t in ["(", "NP", "VP", "NP", ")"]:
        tags.index(t)
    for w in ["the", "cat", "the", "sat", "the"]:
        words.index(w)
    tags.freeze()
    words.freeze()
    parser = TopDownParser(dy.ParameterCollection(), tags, words, 3, 4)
    parser.tag_embeddings.set_value(np.arange(12, dtype=np.float32).reshape(4, 3))
    parser.W.set_value(np.arange(12, dtype=np.float32).reshape(4, 3) / 7)
    return parser


def same_vocabulary(a, b, cls):
    assert type(a) is cls and vars(a) == vars(b)
    assert type(a.counts) is collections.defaultdict and a.counts.default_factory is int
    assert type(a.indices) is dict and type(a.values) is list


@pytest.mark.parametrize("format", ["autobatch", "dynet"])
def test_a_parser_saved_without_registering_loads_once_registered(tmp_path, format):
    TopDownParser, Vocabulary = parser_classes()
    parser = make_parser(TopDownParser, Vocabulary)
    base = str(tmp_path / "best")
    dy.save(base, [parser], format=format)
    names = [f"{__name__}:{c.__qualname__}" for c in (TopDownParser, Vocabulary)]
    pc = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError) as refused:
        dy.load(base, pc)
    message = str(refused.value)
    assert f"needs classes that are not registered: {names[0]}, {names[1]}." in message
    assert (f"dy.register_savable({TopDownParser.__qualname__}); "     # program<n>.TopDownParser
            f"dy.register_savable({Vocabulary.__qualname__})") in message
    assert "never imports or runs code a file names" in message
    assert pc.parameters_list() == [] and pc.lookup_parameters_list() == []

    dy.register_savable(TopDownParser)
    dy.register_savable(Vocabulary)
    (back,) = dy.load(base, pc)
    assert type(back) is TopDownParser
    assert back.spec.keys() == parser.spec.keys()
    assert (back.spec["tag_embedding_dim"], back.spec["lstm_dim"]) == (3, 4)
    same_vocabulary(back.tag_vocab, parser.tag_vocab, Vocabulary)
    same_vocabulary(back.word_vocab, parser.word_vocab, Vocabulary)
    np.testing.assert_array_equal(back.tag_embeddings.as_array(), parser.tag_embeddings.as_array())
    np.testing.assert_array_equal(back.W.as_array(), parser.W.as_array())
    # saved again by the rebuilt parser: the same spec
    again = str(tmp_path / "again")
    dy.save(again, [back], format=format)
    if format == "autobatch":
        assert read_meta(again)["objects"][0]["spec"] == read_meta(base)["objects"][0]["spec"]
    assert back.word_vocab.counts == {"the": 3, "cat": 1, "sat": 1}
    assert back.word_vocab.counts["unseen"] == 0            # still a defaultdict(int)


def test_the_refusal_lists_every_class_of_every_object(tmp_path):
    """Classes of several objects, named as the object's class, in a spec and as an
    instance in a spec, are all listed once, in the order the file gives them."""
    TopDownParser, Vocabulary = parser_classes()
    base = str(tmp_path / "m")
    dy.save(base, [make_parser(TopDownParser, Vocabulary)])
    meta = read_meta(base)
    entry = meta["objects"][0]
    entry["spec"]["extra"] = [{"__class__": "absent_module_a:Thing"},
                              {"__object__": "absent_module_b:Other", "__state__": {}},
                              {"__class__": "absent_module_a:Thing"}]
    write_meta(base, meta)
    with pytest.raises(dy.ModelFileError) as refused:
        dy.load(base, dy.ParameterCollection())
    listed = str(refused.value).split("not registered: ")[1].split(". Loading")[0]
    assert listed.split(", ") == [f"{__name__}:{TopDownParser.__qualname__}",
                                  f"{__name__}:{Vocabulary.__qualname__}",
                                  "absent_module_a:Thing", "absent_module_b:Other"]
    assert (f"dy.register_savable({TopDownParser.__qualname__}); "
            f"dy.register_savable({Vocabulary.__qualname__}); "
            "dy.register_savable(Thing); dy.register_savable(Other)") in str(refused.value)


HOSTILE = "autobatch_test_hostile_module_never_imported"


def hostile_dynet_meta():
    """DyNet .meta pickles (protocol 2) naming classes of a module nobody imports:
    the object's class, and an instance in its spec with a state."""
    evil = f"c{HOSTILE}\nEvil\n".encode()
    inner = f"c{HOSTILE}\nPayload\n".encode() + b")\x81}X\x03\x00\x00\x00cmdX\x02\x00\x00\x00lssb"
    return b"\x80\x02" + evil + b"(" + inner + b"K\x01tX\x08\x00\x00\x00/parser/\x87."


@pytest.mark.parametrize("format", ["autobatch", "dynet"])
def test_a_hostile_file_naming_an_unregistered_module_runs_nothing(tmp_path, format):
    """A validly signed file naming classes of a module that is not imported is refused
    naming them, and the module stays unimported (nothing is imported or looked up)."""
    base = str(tmp_path / "m")
    TopDownParser, Vocabulary = parser_classes()
    dy.save(base, [make_parser(TopDownParser, Vocabulary)], format=format)
    if format == "autobatch":
        meta = read_meta(base)
        meta["objects"][0]["class"] = f"{HOSTILE}:Evil"
        meta["objects"][0]["spec"]["tag_vocab"]["__object__"] = f"{HOSTILE}:Payload"
        write_meta(base, meta)
    else:
        with open(base + ".meta", "wb") as f:
            f.write(hostile_dynet_meta())
    assert HOSTILE not in sys.modules
    modules = set(sys.modules)
    pc = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError) as refused:
        dy.load(base, pc)
    assert f"{HOSTILE}:Evil" in str(refused.value) and f"{HOSTILE}:Payload" in str(refused.value)
    assert HOSTILE not in sys.modules and set(sys.modules) == modules
    assert pc.parameters_list() == [] and pc.lookup_parameters_list() == []


class Vocab:
    def __init__(self, words):
        self.values = list(words)
        self.counts = collections.defaultdict(int, {w: len(w) for w in words})
        self.empty = collections.defaultdict(list)


class Model:
    def __init__(self, model, vocab, dim):
        self.spec = (vocab, dim)
        self.pc = model.add_subcollection("model")
        self.E = self.pc.add_lookup_parameters((len(vocab.values), dim))

    def param_collection(self):
        return self.pc

    @classmethod
    def from_spec(cls, spec, model):
        return cls(model, *spec)


for cls in (Vocab, Model):
    dy.register_savable(cls)


@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_defaultdicts_pickled_by_python_load(tmp_path, protocol):
    """A defaultdict in a spec as Python's pickle writes it (what DyNet's dy.save
    writes: REDUCE of collections.defaultdict, memo references) is read as data."""
    base = str(tmp_path / "m")
    model = Model(dy.ParameterCollection(), Vocab(["a", "bb"]), 3)
    dy.save(base, [model], format="dynet")
    with open(base + ".meta", "wb") as f:
        f.write(pickle.dumps((Model, model.spec, "/model/"), protocol=protocol))
    (back,) = dy.load(base, dy.ParameterCollection())
    assert vars(back.spec[0]) == vars(model.spec[0])
    assert back.spec[0].counts.default_factory is int and back.spec[0].empty.default_factory is list


@pytest.mark.parametrize("payload", [
    b"\x80\x02ccollections\ndefaultdict\ncbuiltins\neval\n\x85R.",          # not a factory
    b"\x80\x02ccollections\ndefaultdict\ncbuiltins\nint\nK\x01\x86R.",      # two arguments
    b"\x80\x02ccollections\ndefaultdict\n)R.",                              # no argument
    b"\x80\x02cbuiltins\nint\nK\x01\x85R.",                                 # a factory called
    b"\x80\x02cbuiltins\nint\n.",                                           # a factory alone
])
def test_only_defaultdicts_of_data_factories(tmp_path, payload):
    base = str(tmp_path / "m")
    dy.save(base, [Model(dy.ParameterCollection(), Vocab(["a"]), 2)], format="dynet")
    with open(base + ".meta", "wb") as f:
        f.write(payload)
    with pytest.raises(dy.ModelFileError):
        dy.load(base, dy.ParameterCollection())


def test_the_dynet_file_holds_a_defaultdict_as_pickle_does(tmp_path):
    """What we write for DyNet unpickles (as DyNet's dy.load does) to the same spec."""
    vocab = Vocab(["a", "bb"])
    data = dynet_pickle.pickle_object((vocab.counts, vocab.empty, {"k": 1}), "spec")
    counts, empty, plain = pickle.loads(data)
    assert type(counts) is collections.defaultdict and counts == vocab.counts and counts.default_factory is int
    assert empty.default_factory is list and type(plain) is dict
    json.dumps(plain)


def test_names_a_file_gives_are_shown_as_data():
    """A hostile name (a newline, no module) is shown quoted, and its call gives the
    name to register rather than a class it might seem to be."""
    from autobatch.io.specs import unregistered_error
    message = str(unregistered_error("f.meta", ["a:B", "x\ny:Z", "nocolon", "a:B"]))
    assert "not registered: a:B, 'x\\ny:Z', nocolon. Loading" in message
    assert ("dy.register_savable(B); dy.register_savable(<the class>, name='x\\ny:Z'); "
            "dy.register_savable(<the class>, name='nocolon')") in message
    assert "\n" not in message
