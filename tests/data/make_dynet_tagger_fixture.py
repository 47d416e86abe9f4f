"""A DyNet user's savable class whose spec holds an instance of another of the user's
classes (a tagger and its vocabulary, as DyNet programs save them: DyNet pickles the
spec). Run with DyNet installed:

    /work/venv-new/bin/python tests/data/make_dynet_tagger_fixture.py make     # writes dynet_model/dynet_tagger*
    /work/venv-new/bin/python tests/data/make_dynet_tagger_fixture.py check    # DyNet loads ours_tagger

`make` writes dynet_tagger.meta/.data with DyNet's `dy.save` (Python 3's pickle,
protocol 4: the vocabulary is NEWOBJ + BUILD) and dynet_tagger_p0.meta/.data, the same
objects as Python 2's `pickle.dump` wrote them (protocol 0: copy_reg._reconstructor,
REDUCE, BUILD; tests/support/dynet_pickles.py). `check` loads ours_tagger, which
autobatch wrote with `dy.save(..., format="dynet")` (tests/support/dynet_files.py), and
checks its vocabulary and values. tests/io/test_dynet_files.py loads all of them here."""
import os
import shutil
import sys

import numpy as np

import dynet as dy

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynet_model")
WORDS = ["<unk>", "the", "cat", "sat"]


class Vocabulary(object):
    def __init__(self, words):
        self.i2w = list(words)
        self.w2i = {w: i for i, w in enumerate(words)}


class Tagger(object):
    def __init__(self, model, vocab, dim):
        self.pc = model.add_subcollection("tagger")
        self.E = self.pc.add_lookup_parameters((len(vocab.i2w), dim))
        self.W = self.pc.add_parameters((2, dim))
        self.vocab = vocab
        self.spec = (vocab, dim)

    def param_collection(self):
        return self.pc

    @staticmethod
    def from_spec(spec, model):
        vocab, dim = spec
        return Tagger(model, vocab, dim)


def make():
    import pickle
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
    from dynet_pickles import meta
    dy.reset_random_seed(3)
    tagger = Tagger(dy.ParameterCollection(), Vocabulary(WORDS), 3)
    base = os.path.join(HERE, "dynet_tagger")
    dy.save(base, [tagger])
    with open(base + ".meta", "rb") as f:
        entries = [pickle.load(f)]
    with open(base + "_p0.meta", "wb") as f:
        f.write(meta(entries, 0))
    shutil.copyfile(base + ".data", base + "_p0.data")
    for name in ("dynet_tagger", "dynet_tagger_p0"):
        (back,) = dy.load(os.path.join(HERE, name), dy.ParameterCollection())
        assert back.vocab.w2i == tagger.vocab.w2i and back.vocab.i2w == WORDS
        np.testing.assert_array_equal(back.E.as_array(), tagger.E.as_array())
    print("wrote dynet_tagger and dynet_tagger_p0")


def check():
    (tagger,) = dy.load(os.path.join(HERE, "ours_tagger"), dy.ParameterCollection())
    assert type(tagger) is Tagger and type(tagger.vocab) is Vocabulary
    assert tagger.vocab.i2w == WORDS and tagger.vocab.w2i == {w: i for i, w in enumerate(WORDS)}
    np.testing.assert_array_equal(tagger.E.as_array(), np.arange(12, dtype=np.float32).reshape(4, 3))
    print("OK: DyNet loads autobatch's tagger with its vocabulary")


if __name__ == "__main__":
    make() if sys.argv[1:] == ["make"] else check()
