"""pc.save/populate and dy.save/dy.load: bit-identical round trips of collections,
subcollections and objects, the registry of savable classes, file objects, paths,
appending and fifos. Damaged, mismatched and hostile files, refusals and the version 1
format are in test_saveload_refusals.py."""
import io
import json
import os

import numpy as np
import pytest

import autobatch as dy
from savefiles import read_meta
from saveload_models import Affine, build, values


def predict(W, b, E, V):
    dy.renew_cg()
    h = dy.tanh(V * dy.lookup(E, 3))
    return (W * h + b).npvalue()


class NoSpec:
    def __init__(self, model):
        self.pc = model.add_subcollection("nospec")
        self.U = self.pc.add_parameters((2, 2))

    def param_collection(self):
        return self.pc


def test_collection_round_trip_is_bit_identical(tmp_path):
    f = str(tmp_path / "m.params")
    pc, ps = build(1)
    pc.save(f)
    pc2, ps2 = build(2)
    assert not np.array_equal(ps[0].as_array(), ps2[0].as_array())
    pc2.populate(f)
    for a, b in zip(values(ps), values(ps2)):
        assert a.tobytes() == b.tobytes()
    assert predict(*ps).tobytes() == predict(*ps2).tobytes()
    with open(f, "rb") as fh:
        assert fh.readline() == b"AUTOBATCH-PARAMS 2\n"
        assert json.loads(fh.readline())["name"] == "/W"
        rest = fh.read()
        assert json.loads(rest[rest.rindex(b'{"kind": "end"'):])["records"] == 4


def test_subcollection_save_and_populate_with_key(tmp_path):
    f = str(tmp_path / "sub.params")
    pc, _ = build(1)
    dec = pc.add_subcollection("dec")
    D = dec.add_parameters((2, 2))
    F = dec.add_subcollection().add_lookup_parameters((3, 2))
    dec.save(f, name="/saved/")
    other = dy.ParameterCollection(seed=5).add_subcollection("whatever")
    D2 = other.add_parameters((2, 2))
    F2 = other.add_subcollection().add_lookup_parameters((3, 2))
    other.populate(f, key="/saved/")
    assert D2.as_array().tobytes() == D.as_array().tobytes()
    assert F2.as_array().tobytes() == F.as_array().tobytes()
    with pytest.raises(dy.ModelFileError):
        other.populate(f)              # default key is its own name, "/whatever/"


def test_populate_only_in_place(tmp_path):
    f = str(tmp_path / "m.params")
    pc, ps = build(1)
    pc.save(f)
    pc2, ps2 = build(2)
    flat = ps2[0]._flat
    pc2.populate(f)
    assert ps2[0]._flat is flat       # the engine's pointer stays valid
    dy.renew_cg()
    np.testing.assert_array_equal((ps2[0] * dy.inputVector([1, 0, 0, 0])).npvalue(), ps[0].as_array()[:, 0])


def test_dy_save_load_objects(tmp_path):
    base = str(tmp_path / "model")
    pc = dy.ParameterCollection(seed=1)
    W = pc.add_parameters((3, 4), name="W")
    E = pc.add_lookup_parameters((10, 4), name="E")
    sub = pc.add_subcollection("enc")
    S1 = sub.add_parameters((2, 2))
    S2 = sub.add_subcollection("deep").add_lookup_parameters((3, 2), name="T")
    aff = Affine(4, 3, pc, act="relu")
    ns = NoSpec(pc)
    dy.save(base, [E, aff, W, sub, ns])
    meta = json.load(open(base + ".meta"))
    assert [o["kind"] for o in meta["objects"]] == ["lookup", "object", "param", "collection", "object"]

    pc2 = dy.ParameterCollection(seed=9)
    pc2.add_parameters(1)                      # pre-existing content is kept
    E2, aff2, W2, sub2, ns2 = dy.load(base, pc2)
    assert isinstance(E2, dy.LookupParameters) and isinstance(W2, dy.Parameters)
    assert E2.as_array().tobytes() == E.as_array().tobytes()
    assert W2.as_array().tobytes() == W.as_array().tobytes()
    assert isinstance(aff2, Affine) and aff2.spec == (4, 3, {"act": "relu"})
    assert aff2.W.as_array().tobytes() == aff.W.as_array().tobytes()
    assert aff2.b.as_array().tobytes() == aff.b.as_array().tobytes()
    assert isinstance(sub2, dy.ParameterCollection)
    rel = sorted((p.name()[len(sub2.name()):], p.as_array().tobytes())
                 for p in sub2.parameters_list() + sub2.lookup_parameters_list())
    assert rel == sorted([("_0", S1.as_array().tobytes()), ("deep/T", S2.as_array().tobytes())])
    assert [p.as_array().tobytes() for p in ns2.parameters_list()] == [ns.U.as_array().tobytes()]
    # loaded names do not collide with later additions
    assert sub2.add_subcollection("deep").name() != sub2.name() + "deep/"
    names = [p.name() for p in pc2.parameters_list() + pc2.lookup_parameters_list()]
    assert len(names) == len(set(names))
    # loaded parameters train like any other
    dy.renew_cg()
    dy.squared_norm(W2 * dy.lookup(E2, 1)).backward()
    dy.SimpleSGDTrainer(pc2).update()
    assert W2.as_array().tobytes() != W.as_array().tobytes()


def test_register_savable():
    class Thing:
        spec = None

        @classmethod
        def from_spec(cls, spec, model):
            return cls()
    assert dy.register_savable(Thing, "test.thing") is Thing
    assert dy.savable_classes()["test.thing"] is Thing
    dy.register_savable(Thing, "test.thing")                   # again: fine
    with pytest.raises(ValueError, match="already registered"):
        dy.register_savable(Affine, "test.thing")

    class Thing:                                               # defined again: replaces
        spec = None
    dy.register_savable(Thing, "test.thing")
    assert dy.savable_classes()["test.thing"] is Thing
    with pytest.raises(TypeError):
        dy.register_savable(Thing(), "x")
    for cls in (dy.SimpleRNNBuilder, dy.VanillaLSTMBuilder, dy.CoupledLSTMBuilder, dy.GRUBuilder,
                dy.BiRNNBuilder, dy.TreeLSTMBuilder):
        assert dy.savable_classes()[f"autobatch.builders:{cls.__name__}"] is cls


def test_birnn_round_trip_names_its_factory_by_registry(tmp_path):
    pc = dy.ParameterCollection(seed=4)
    bi = dy.BiRNNBuilder(2, 3, 4, pc, dy.GRUBuilder)
    dy.save(str(tmp_path / "m"), [bi])
    spec = read_meta(str(tmp_path / "m"))["objects"][0]["spec"]
    assert spec["rnn_builder_factory"] == {"__class__": "autobatch.builders:GRUBuilder"}
    (bi2,) = dy.load(str(tmp_path / "m"), dy.ParameterCollection())
    assert type(bi2.builder_layers[0][0]) is dy.GRUBuilder
    for p, q in zip(pc.parameters_list(), bi2.param_collection().parameters_list()):
        assert p.as_array().tobytes() == q.as_array().tobytes()


def test_file_objects_paths_and_no_ints(tmp_path):
    pc, ps = build(1)
    buf = io.BytesIO()
    pc.save(buf)
    pc2, ps2 = build(2)
    pc2.populate(io.BytesIO(buf.getvalue()))
    assert [a.tobytes() for a in values(ps)] == [a.tobytes() for a in values(ps2)]
    path = tmp_path / "m.params"
    path.write_bytes(buf.getvalue())
    with open(path, "rb") as f:
        build(3)[0].populate(f)
    build(3)[0].populate(path)                     # os.PathLike
    build(3)[0].populate(bytes(path))
    r, w = os.pipe()
    try:
        for bad in (r, True, 3.0, None):
            with pytest.raises(TypeError):
                pc2.populate(bad)
            with pytest.raises(TypeError):
                pc2.save(bad)
        with pytest.raises(TypeError):
            dy.load(r, pc2)
        os.fstat(r)                                # still open: never used as a file
    finally:
        os.close(r)
        os.close(w)
    with pytest.raises(TypeError, match="binary"):
        with open(path, "r") as f:
            pc2.populate(f)


def test_append_and_refuse_foreign_file(tmp_path):
    f = str(tmp_path / "a.params")
    pc = dy.ParameterCollection(seed=0)
    A = pc.add_subcollection("a").add_parameters(2)
    B = pc.add_subcollection("b").add_parameters(2)
    sa, sb = A._owner, B._owner
    sa.save(f)
    sb.save(f, append=True)
    A0, B0 = A.as_array(), B.as_array()
    A.zero(), B.zero()
    pc.populate(f)
    assert A.as_array().tobytes() == A0.tobytes() and B.as_array().tobytes() == B0.tobytes()
    foreign = str(tmp_path / "foreign")
    open(foreign, "w").write("hello")
    with pytest.raises(dy.ModelFileError):
        pc.save(foreign, append=True)
    assert open(foreign).read() == "hello"
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_save_to_a_fifo_writes_through_it(tmp_path):
    """A destination that is not a regular file is written to, never replaced."""
    import stat
    import threading
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    pc, _ = build(1)
    pc.save(fifo)
    reader.join(5)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and got[0].startswith(b"AUTOBATCH-PARAMS 2\n")
    pc.populate(io.BytesIO(got[0]))
