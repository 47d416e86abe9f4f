"""DyNet's model files: files written by DyNet (dynet38; tests/data/dynet_model, made by
tests/data/make_dynet_model_fixture.py) load here and compute what DyNet computed, our
writer reproduces DyNet's files byte for byte, and the files we write for DyNet
(tests/data/dynet_model/ours*, checked in DyNet by tests/data/check_dynet_loads_ours.py)
are what our code writes today. Also partial save/load (Parameters/LookupParameters
save and populate, load_param, load_lookup_param) and the rows of a lookup table."""
import os
import pickle
import re

import numpy as np

import pytest

import autobatch as dy
from autobatch.io import dynet_pickle, dynet_text
from dynet_files import DATA, OneLayerMLP, Tagger, Vocabulary, build, builders, make_ours, run

EXPECTED = np.load(os.path.join(DATA, "dynet_expected.npz"))
OURS = np.load(os.path.join(DATA, "ours_expected.npz"))


def path(name):
    return os.path.join(DATA, name)


def read(name):
    with open(path(name), "rb") as f:
        return f.read()


def state(pc):
    return [(p.name(), p.as_array().copy(), p.grad_as_array().copy())
            for p in pc.parameters_list() + pc.lookup_parameters_list()]


def assert_same_state(a, b):
    assert [n for n, _, _ in a] == [n for n, _, _ in b]
    for (_, v1, g1), (_, v2, g2) in zip(a, b):
        np.testing.assert_array_equal(v1, v2)
        np.testing.assert_array_equal(g1, g2)


# ---------------------------------------------------------- DyNet -> here ----

def test_populate_a_model_dynet_saved():
    pc = dy.ParameterCollection(seed=0)
    p = build(pc)
    pc.populate(path("dynet.model"))
    for k, v in p.items():
        np.testing.assert_array_equal(v.as_array(), EXPECTED[f"value_{k}"], err_msg=k)
    np.testing.assert_array_equal(p["W"].grad_as_array(), EXPECTED["grad_W"])   # FULL_GRAD
    assert not p["b"].grad_as_array().any()                                        # ZERO_GRAD


@pytest.mark.parametrize("key", ["/key/", "/key"])
def test_populate_under_a_key(key):
    pc = dy.ParameterCollection(seed=0)
    p = build(pc)
    pc.populate(path("dynet_key.model"), key)
    np.testing.assert_array_equal(p["L"].as_array(), EXPECTED["value_L"])
    pc.populate_from_textfile(path("dynet.model"))
    np.testing.assert_array_equal(p["V"].as_array(), EXPECTED["value_V"])


def test_populate_a_subcollection_by_position():
    """DyNet pairs records and parameters in order: names need not agree."""
    pc = dy.ParameterCollection()
    other = pc.add_subcollection("other")
    V = other.add_parameters((2, 2), name="X")
    other.populate(path("dynet.model"), "/enc/")
    np.testing.assert_array_equal(V.as_array(), EXPECTED["value_V"])


def test_one_parameter_and_load_param():
    pc = dy.ParameterCollection(seed=0)
    V = pc.add_parameters((2, 2))
    V.populate(path("dynet_v.model"), "/enc/V")
    np.testing.assert_array_equal(V.as_array(), EXPECTED["value_V"])
    E = pc.add_lookup_parameters((4, 2))
    E.populate_from_textfile(path("dynet_e.model"), "/emb")
    np.testing.assert_array_equal(E.as_array(), EXPECTED["value_E"])
    sub = pc.add_subcollection("s")
    W = sub.load_param(path("dynet.model"), "/W")
    L = sub.load_lookup_param(path("dynet.model"), "/L")
    assert W.name() == "/s/W" and L.name() == "/s/L" and L.shape() == (3, 2, 2)
    np.testing.assert_array_equal(W.as_array(), EXPECTED["value_W"])
    np.testing.assert_array_equal(W.grad_as_array(), EXPECTED["grad_W"])
    np.testing.assert_array_equal(L.as_array(), EXPECTED["value_L"])
    anon = pc.load_param(path("dynet.model"), "/_0")
    assert anon.name() == "/_2" and anon.shape() == (2,)       # V and E above are /_0, /_1
    assert sub.parameters_list() == [W] and sub.lookup_parameters_list() == [L]


def test_dy_load_of_dynet_files_predicts_as_dynet():
    pc = dy.ParameterCollection()
    W, E, *bs = dy.load(path("dynet_saved"), pc)
    np.testing.assert_array_equal(W.as_array(), EXPECTED["value_W"])
    np.testing.assert_array_equal(E.as_array(), EXPECTED["value_E"])
    for (name, _), b in zip(builders(dy.ParameterCollection()).items(), bs):
        np.testing.assert_allclose(run(name, b, EXPECTED["inputs"]), EXPECTED[f"out_{name}"],
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    assert [type(b).__name__ for b in dy.load_generator(path("dynet_saved"), pc)][2:] == \
        ["VanillaLSTMBuilder", "GRUBuilder", "SimpleRNNBuilder", "CoupledLSTMBuilder", "BiRNNBuilder"]


# ---------------------------------------------------------- here -> DyNet ----

def test_our_writer_reproduces_dynets_files_byte_for_byte(tmp_path):
    pc = dy.ParameterCollection(seed=0)
    p = build(pc)
    pc.populate(path("dynet.model"))
    out = str(tmp_path / "m")
    pc.save(out, format="dynet")
    assert open(out, "rb").read() == read("dynet.model")
    pc.write_to_textfile(out, "/key/")
    assert open(out, "rb").read() == read("dynet_key.model")
    p["V"].save(out, format="dynet")
    assert open(out, "rb").read() == read("dynet_v.model")
    p["E"].write_to_textfile(out, "/emb")
    assert open(out, "rb").read() == read("dynet_e.model")


def test_the_files_for_dynet_are_what_we_write(tmp_path):
    """tests/data/check_dynet_loads_ours.py proved DyNet loads these; they must still
    be what our code writes (regenerate with `python tests/support/dynet_files.py`)."""
    for name in make_ours(str(tmp_path)):
        assert (tmp_path / name).read_bytes() == read(name), name
    written = np.load(str(tmp_path / "ours_expected.npz"))
    # the outputs are float32 sums whose order depends on the BLAS kernel the machine
    # selects (the files were recorded under OpenBLAS's Haswell kernel; SkylakeX sums
    # otherwise): an element near zero differs by ~1e-8 absolute
    for k in OURS.files:
        np.testing.assert_allclose(written[k], OURS[k], rtol=1e-6, atol=1e-6, err_msg=k)


def test_dy_save_in_dynets_format_loads_back_here(tmp_path):
    pc = dy.ParameterCollection(seed=3)
    p = build(pc)
    bs = builders(pc)
    base = str(tmp_path / "m")
    dy.save(base, [p["W"], p["L"]] + list(bs.values()), format="dynet")
    assert open(base + ".meta", "rb").read(2) == b"\x80\x02"
    pc2 = dy.ParameterCollection()
    W, L, *bs2 = dy.load(base, pc2)
    np.testing.assert_array_equal(L.as_array(), p["L"].as_array())
    for (name, b), b2 in zip(bs.items(), bs2):
        np.testing.assert_array_equal(run(name, b, OURS["inputs"]), run(name, b2, OURS["inputs"]))
    with pytest.raises(TypeError, match="DyNet has no"):
        dy.save(base, [dy.TreeLSTMBuilder(2, 2, pc)], format="dynet")
    with pytest.raises(ValueError):
        dy.save(base, [p["W"], p["W"]], format="dynet")
    with pytest.raises(ValueError):
        dy.save(base, [p["W"]], format="pickle")


def test_round_trip_append_and_format_rules(tmp_path):
    pc = dy.ParameterCollection(seed=1)
    p = build(pc)
    f = str(tmp_path / "f")
    p["W"].save(f, format="dynet")
    p["E"].save(f, "/emb", append=True)              # the file's format: DyNet's
    assert open(f, "rb").read().count(b"#") == 4
    with pytest.raises(ValueError, match="already holds"):
        p["W"].save(f, append=True)
    with pytest.raises(ValueError, match="one format"):
        p["W"].save(f, "/W2", append=True, format="autobatch")
    with pytest.raises(ValueError):
        pc.save(f, format="json")
    with pytest.raises(ValueError, match="spaces"):
        p["W"].save(f, "/a b", format="dynet")
    with pytest.raises(TypeError):
        p["W"].populate(f, 3)
    g = str(tmp_path / "g")
    p["W"].save(g)                                    # ours by default
    p["b"].save(g, "/bias", append=True)
    q = dy.ParameterCollection().add_parameters(3)
    q.populate(g, "/bias")
    np.testing.assert_array_equal(q.as_array(), p["b"].as_array())
    with pytest.raises(ValueError, match="not a name"):
        p["W"].save(g, "nokey")
    p["W"].set_value(np.full((2, 3), np.nan))
    with pytest.raises(ValueError, match="NaN"):
        p["W"].save(str(tmp_path / "h"), format="dynet")


def test_mismatches_raise_and_change_nothing():
    pc = dy.ParameterCollection(seed=0)
    p = build(pc)
    before = state(pc)
    pc.add_parameters(1)                    # one parameter more than the file has
    before = state(pc)
    with pytest.raises(dy.ModelFileError, match="in order"):
        pc.populate(path("dynet.model"))
    assert_same_state(state(pc), before)
    with pytest.raises(dy.ModelFileError, match="shape"):
        p["V"].populate(path("dynet.model"), "/W")
    with pytest.raises(dy.ModelFileError, match="no lookup parameter"):
        p["E"].populate(path("dynet.model"), "/W")
    with pytest.raises(dy.ModelFileError, match="no parameter"):
        pc.load_param(path("dynet.model"), "/nope")
    with pytest.raises(ValueError):
        pc.load_param(path("dynet.model"), "")
    assert_same_state(state(pc), before)
    n = len(pc.parameters_list())
    with pytest.raises(dy.ModelFileError):
        pc.populate(path("dynet_saved.meta"))
    assert len(pc.parameters_list()) == n


# --------------------------------------------------------- hostile .meta ----

class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


@pytest.mark.parametrize("payload", [
    pickle.dumps(_Boom()),
    pickle.dumps(("Parameters", "/W")) + pickle.dumps(_Boom()),
    pickle.dumps((os.getcwd, (), "/x/")),
    b"\x80\x02c_dynet\nParameterCollection\n(t\x85R.",
    b"\x80\x02c_dynet\nDynetParams\n.",
    pickle.dumps(("Parameters", "/W"))[:-1],
    pickle.dumps({"Parameters": "/W"}),
    pickle.dumps(("Parameters", 3)),
    b"\x80\x02" + b"(" * 4000 + b"t" * 4000 + b".",
    b"\x80\x02" + b"(" * 4000 + b"N" + b"t" * 4000 + b"N\x86.",
    b"\x80\x02c_dynet\nGRUBuilder\n" + b"(" * 3000 + b"t" * 3000 + b"X\x03\x00\x00\x00/g/\x87.",
], ids=["reduce", "second-object", "function", "reduce-dynet", "not-a-builder", "truncated",
        "dict", "not-a-name", "deep", "deep-pair", "deep-spec"])
def test_a_hostile_meta_runs_nothing_and_adds_nothing(tmp_path, payload, monkeypatch):
    base = str(tmp_path / "m")
    with open(base + ".meta", "wb") as f:
        f.write(payload)
    with open(base + ".data", "wb") as f:
        f.write(read("dynet_saved.data"))
    called = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a))
    pc = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError):
        dy.load(base, pc)
    assert not called and pc.parameters_list() == [] and pc.lookup_parameters_list() == []


def test_a_meta_that_does_not_match_its_data_adds_nothing(tmp_path):
    base = str(tmp_path / "m")
    spec = (dynet_pickle.ClassRef("VanillaLSTMBuilder"), (1, 2, 300, False, 1.0), "/vanilla-lstm-builder/")
    with open(base + ".meta", "wb") as f:
        f.write(dynet_pickle.pickle_object(("Parameters", "/W"), "W") + dynet_pickle.pickle_object(spec, "lstm"))
    with open(base + ".data", "wb") as f:
        f.write(read("dynet_saved.data"))
    pc = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError):           # 300 hidden units: more than the file holds
        dy.load(base, pc)
    assert pc.parameters_list() == [] and pc.add_parameters(1).name() == "/_0"


# ------------------------------------------------------------------ rows ----

def test_rows_as_arrays():
    pc = dy.ParameterCollection(seed=0)
    E = pc.add_lookup_parameters((5, 3))
    L = pc.add_lookup_parameters((4, 2, 3))
    assert len(E) == 5 and len(L) == 4
    np.testing.assert_array_equal(E.row_as_array(2), E.as_array()[2])
    np.testing.assert_array_equal(L.row_as_array(np.int64(3)), L.as_array()[3])
    np.testing.assert_array_equal(L.rows_as_array([3, 0, 3]), L.as_array()[[3, 0, 3]])
    assert E.rows_as_array([]).shape == (0, 3)
    dy.renew_cg()
    dy.sum_elems(dy.cmult(L[1], dy.inputTensor(np.arange(6.0).reshape(2, 3)))).backward()
    np.testing.assert_array_equal(L.row_grad_as_array(1), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(L.rows_grad_as_array([0, 1]), L.grad_as_array()[[0, 1]])
    row = E.row_as_array(0)
    row[:] = 7                                       # a copy
    assert not (E.as_array()[0] == 7).any()
    for bad, err in [(5, IndexError), (-1, IndexError), (1.0, TypeError), (True, TypeError),
                     ("0", TypeError)]:
        with pytest.raises(err):
            E.row_as_array(bad)
        with pytest.raises(err):
            E.rows_grad_as_array([0, bad])


def test_an_older_dynets_lstm_builder_is_the_coupled_one(tmp_path):
    """Before dynet38, DyNet's LSTMBuilder was the coupled LSTM (a spec of 3 fields)."""
    base = str(tmp_path / "m")
    entry = (dynet_pickle.ClassRef("LSTMBuilder"), (1, 2, 3), "/lstm-builder/")
    with open(base + ".meta", "wb") as f:
        f.write(dynet_pickle.pickle_object(entry, "lstm"))
    with open(base + ".data", "wb") as f:
        f.write(read("dynet_saved.data"))
    pc = dy.ParameterCollection()
    (b,) = dy.load(base, pc)
    assert type(b) is dy.CoupledLSTMBuilder
    np.testing.assert_allclose(run("coupled", b, EXPECTED["inputs"]), EXPECTED["out_coupled"],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fmt", [None, "dynet"])
def test_dynets_saving_tutorial_low_level_api(tmp_path, fmt):
    """doc/source/python_saving_tutorial.rst's partial saving and loading, as written
    there (its `c` is param_c); the first save picks the format, appends keep it."""
    f = str(tmp_path / "tmp.model")
    m1 = dy.ParameterCollection()
    m2 = dy.ParameterCollection()
    m3 = m1.add_subcollection("m3")
    a = m1.add_parameters(10, name="a")
    L = m1.add_lookup_parameters((10, 2), name="la")
    param_b = m2.add_parameters((3, 7))
    param_c = m3.add_parameters((3, 7), name="pc")
    param_d = m3.add_parameters((3, 7))
    assert (m3.name(), a.name(), L.name(), param_b.name(), param_c.name(), param_d.name()) == \
        ("/m3/", "/a", "/la", "/_0", "/m3/pc", "/m3/_0")
    L.save(f, "/X", format=fmt)
    a.save(f, append=True)
    param_c.save(f, append=True)
    param_b.save(f, append=True)
    param_d.save(f, append=True)
    assert (open(f, "rb").read(1) == b"#") == (fmt == "dynet")

    m = dy.ParameterCollection()
    a2 = m.add_parameters(10)
    L2 = m.add_lookup_parameters((10, 2))
    d = m.add_parameters((3, 7))
    L2.populate(f, "/X")
    a2.populate(f, "/a")
    d.populate(f, "/m3/pc")
    np.testing.assert_array_equal(L2.as_array(), L.as_array())
    np.testing.assert_array_equal(a2.as_array(), a.as_array())
    np.testing.assert_array_equal(d.as_array(), param_c.as_array())

    lstm = dy.LSTMBuilder(2, 10, 10, m1)
    lstm2 = dy.LSTMBuilder(2, 5, 5, m1)
    lstm2.param_collection().save(f, append=False, format=fmt)
    lstm.param_collection().save(f, append=True)
    lstm2b = dy.LSTMBuilder(2, 5, 5, m)
    lstm2b.param_collection().populate(f, lstm2.param_collection().name())
    lstmb = dy.LSTMBuilder(2, 10, 10, m)
    lstmb.param_collection().populate(f, lstm.param_collection().name())
    for x, y in zip(lstm2.param_collection().parameters_list() + lstm.param_collection().parameters_list(),
                    lstm2b.param_collection().parameters_list() + lstmb.param_collection().parameters_list()):
        np.testing.assert_array_equal(x.as_array(), y.as_array())


def test_compact_and_layer_normalised_lstms_both_ways(tmp_path):
    """DyNet's dy.save leaves a layer-normalised LSTM's gains and biases out (they are
    not in the builder's collection) and its load makes them anew: here too."""
    pc = dy.ParameterCollection()
    compact, layer_norm = dy.load(path("dynet_saved2"), pc)
    assert type(compact) is dy.CompactVanillaLSTMBuilder and layer_norm.ln_lstm
    np.testing.assert_allclose(run("compact", compact, EXPECTED["inputs"]), EXPECTED["out_compact"],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run("ln", layer_norm, EXPECTED["inputs"]), EXPECTED["out_layer_norm"],
                               rtol=1e-5, atol=1e-6)
    base = str(tmp_path / "again")
    dy.save(base, [compact, layer_norm], format="dynet")
    assert open(base + ".data", "rb").read() == read("dynet_saved2.data")
    pc2 = dy.ParameterCollection()
    compact2, layer_norm2 = dy.load(path("ours_saved2"), pc2)
    np.testing.assert_allclose(run("ln", layer_norm2, OURS["inputs"]), OURS["out_layer_norm"], rtol=1e-6)


def test_dynets_dy_save_data_is_reproduced_byte_for_byte(tmp_path):
    """Loaded here and saved for DyNet again, DyNet's .data comes back unchanged: the
    same names, order, dimensions and numbers (the .meta pickles differ in protocol)."""
    pc = dy.ParameterCollection()
    objects = dy.load(path("dynet_saved"), pc)
    base = str(tmp_path / "again")
    dy.save(base, objects, format="dynet")
    assert open(base + ".data", "rb").read() == read("dynet_saved.data")
    again = dy.load(base, dy.ParameterCollection())
    assert [type(o) for o in again] == [type(o) for o in objects]


def test_a_users_class_saved_by_dynet_loads_once_registered(tmp_path):
    """DyNet's saving tutorial's OneLayerMLP, saved by DyNet (its .meta names
    __main__.OneLayerMLP and _dynet.rectify): tests/support/dynet_files.py registers our
    version of the class under that name; the file gets nothing else."""
    pc = dy.ParameterCollection()
    mlp, E = dy.load(path("dynet_mlp"), pc)
    assert type(mlp) is OneLayerMLP and mlp.act is dy.rectify and E.shape() == (100, 10)
    dy.renew_cg()
    np.testing.assert_allclose(mlp(E[3]).npvalue(), EXPECTED["out_mlp"], rtol=1e-5, atol=1e-7)
    mlp2, E2 = dy.load(path("ours_mlp"), dy.ParameterCollection())      # ours, for DyNet
    dy.renew_cg()
    np.testing.assert_allclose(mlp2(E2[3]).npvalue(), OURS["out_mlp"], rtol=1e-6)
    # a spec asking for more than the file holds is refused before it allocates
    base = str(tmp_path / "big")
    entry = (dynet_pickle.UserRef("__main__:OneLayerMLP"), (10, 10 ** 6, 4, dy.rectify), "/_0/")
    with open(base + ".meta", "wb") as f:
        f.write(dynet_pickle.pickle_object(entry, "mlp"))
    with open(base + ".data", "wb") as f:
        f.write(read("dynet_mlp.data"))
    pc3 = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError, match="more values than the file"):
        dy.load(base, pc3)
    assert pc3.parameters_list() == []

    class Unregistered(OneLayerMLP):
        pass
    dy.save(base, [Unregistered(pc, 2, 2, 2)], format="dynet")      # saving needs no registration
    name = f"{__name__}:{Unregistered.__qualname__}"
    with pytest.raises(dy.ModelFileError, match=re.escape(name) + ".*dy.register_savable\\(Unregistered\\)"):
        dy.load(base, dy.ParameterCollection())


# ----------------------------------------------- a user's instance in a spec ----

WORDS = ["<unk>", "the", "cat", "sat"]


@pytest.mark.parametrize("name", ["dynet_tagger", "dynet_tagger_p0"])
def test_a_spec_holding_a_users_instance_loads_from_dynets_files(name):
    """DyNet pickles a spec: its Vocabulary is NEWOBJ + BUILD (protocol 4) or
    copy_reg._reconstructor + REDUCE + BUILD (Python 2's protocol 0), written by DyNet
    (tests/data/make_dynet_tagger_fixture.py). Both rebuild the registered class from its
    data alone (tests/support/dynet_files.py registers Tagger and Vocabulary)."""
    (tagger,) = dy.load(path(name), dy.ParameterCollection())
    assert type(tagger) is Tagger and type(tagger.vocab) is Vocabulary
    assert tagger.vocab.i2w == WORDS and tagger.vocab.w2i == {w: i for i, w in enumerate(WORDS)}
    (E,) = [r for r in dynet_text.parse(read(name + ".data"), name) if r.kind == "lookup"]
    np.testing.assert_array_equal(tagger.E._flat, E.values)


def test_a_users_instance_is_written_for_dynet(tmp_path):
    """ours_tagger (tests/data/make_dynet_tagger_fixture.py check: DyNet loads it with its
    vocabulary) is what we write, and loads back here."""
    (tagger,) = dy.load(path("ours_tagger"), dy.ParameterCollection())
    assert tagger.vocab.i2w == WORDS
    np.testing.assert_array_equal(tagger.E.as_array(), np.arange(12).reshape(4, 3))

    tagger.spec = (print, 3)
    with pytest.raises(TypeError, match=r"cannot write a builtin_function_or_method as plain data"):
        dy.save(str(tmp_path / "t"), [tagger], format="dynet")


@pytest.mark.parametrize("payload", [
    b"\x80\x02c__main__\nUnknown\n)\x81}b.",                       # NEWOBJ of an unregistered class
    b"\x80\x02c__main__\nVocabulary\nK\x01\x85\x81.",               # NEWOBJ with arguments
    b"\x80\x02ccopy_reg\n_reconstructor\nc_dynet\nGRUBuilder\ncbuiltins\nobject\nN\x87R.",
    b"\x80\x02cbuiltins\nobject\n.",                                 # a marker alone
    b"\x80\x02]}b.",                                                 # BUILD of a list
    b"\x80\x02c__main__\nVocabulary\n)\x81}b}b.",                   # BUILD twice
    b"(i__main__\nUnknown\n(dS'a'\nI1\nsb.",                         # INST of an unregistered class
])
def test_instances_only_of_registered_classes_and_only_from_data(tmp_path, payload):
    base = str(tmp_path / "m")
    entry = b"\x80\x02c__main__\nTagger\n" + payload[2:-1] + b"K\x03\x86X\x08\x00\x00\x00/tagger/\x87." \
        if payload.startswith(b"\x80") else payload
    for meta in (payload, entry):
        with open(base + ".meta", "wb") as f:
            f.write(meta)
        with open(base + ".data", "wb") as f:
            f.write(read("dynet_tagger.data"))
        pc = dy.ParameterCollection()
        with pytest.raises(dy.ModelFileError):
            dy.load(base, pc)
        assert pc.parameters_list() == [] and pc.lookup_parameters_list() == []


def test_an_old_style_instance_of_python_2_loads(tmp_path):
    """Python 2 pickled an instance of an old-style class (no `object` base) with INST."""
    meta = read("dynet_tagger_p0.meta")
    new_style = b"ccopy_reg\n_reconstructor\np1\n(c__main__\nVocabulary\np2\nc__builtin__\nobject\np3\nNtp4\nRp5\n"
    assert new_style in meta
    base = str(tmp_path / "m")
    with open(base + ".meta", "wb") as f:
        f.write(meta.replace(new_style, b"(i__main__\nVocabulary\np5\n"))
    with open(base + ".data", "wb") as f:
        f.write(read("dynet_tagger_p0.data"))
    (tagger,) = dy.load(base, dy.ParameterCollection())
    assert type(tagger.vocab) is Vocabulary and tagger.vocab.i2w == WORDS
