"""pc.save/populate and dy.save/dy.load fail safely: damaged and mismatched files,
hostile (validly signed) metadata, unregistered or unsaveable classes, devices and
pipes, overlapping objects; and version 1 files still load. Round trips are in
test_saveload.py."""
import os
import pathlib
import re
import sys
import tracemalloc

import numpy as np
import pytest

import autobatch as dy
from savefiles import read_meta, split_records, write_data, write_meta
from saveload_models import Affine, build, check_unchanged, values

V1 = pathlib.Path(__file__).resolve().parents[1] / "data" / "v1"


@pytest.mark.parametrize("damage", ["truncate_data", "truncate_header", "flip_byte",
                                    "bad_magic", "bad_json", "trailing_garbage", "bad_shape"])
def test_damaged_file_raises_and_leaves_collection_unchanged(tmp_path, damage):
    f = str(tmp_path / "m.params")
    pc, _ = build(1)
    pc.save(f)
    data = bytearray(open(f, "rb").read())
    if damage == "truncate_data":
        data = data[:-7]
    elif damage == "truncate_header":
        data = data[:len(b"AUTOBATCH-PARAMS 1\n") + 10]
    elif damage == "flip_byte":
        data[-3] ^= 0x40
    elif damage == "bad_magic":
        data[0:9] = b"XUTOBATCH"
    elif damage == "bad_json":
        start = len(b"AUTOBATCH-PARAMS 1\n")
        data[start] = ord("[")
    elif damage == "trailing_garbage":
        data += b"xyz"
    elif damage == "bad_shape":
        data = data.replace(b'"shape": [3, 4]', b'"shape": [4, 4]', 1)
    open(f, "wb").write(bytes(data))
    pc2, ps2 = build(2)
    before = values(pc2.parameters_list() + pc2.lookup_parameters_list())
    with pytest.raises(dy.ModelFileError):
        pc2.populate(f)
    check_unchanged(pc2, before)


@pytest.mark.parametrize("mismatch", ["shape", "missing", "extra", "kind"])
def test_mismatched_collection_raises_and_changes_nothing(tmp_path, mismatch):
    f = str(tmp_path / "m.params")
    pc, _ = build(1)
    pc.save(f)
    pc2 = dy.ParameterCollection(seed=2)
    # the last parameter added differs; everything before it matches the file
    pc2.add_parameters((3, 4), name="W")
    if mismatch != "missing":
        pc2.add_parameters(3, name="b")
    if mismatch == "kind":
        pc2.add_parameters((10, 4), name="E")
    elif mismatch == "shape":
        pc2.add_lookup_parameters((11, 4), name="E")
    else:
        pc2.add_lookup_parameters((10, 4), name="E")
    if mismatch != "extra":
        pc2.add_subcollection("enc").add_parameters((4, 4))
    before = values(pc2.parameters_list() + pc2.lookup_parameters_list())
    with pytest.raises(dy.ModelFileError):
        pc2.populate(f)
    check_unchanged(pc2, before)


def test_dy_load_failure_adds_nothing(tmp_path):
    base = str(tmp_path / "model")
    pc = dy.ParameterCollection(seed=1)
    W = pc.add_parameters((3, 4), name="W")
    aff = Affine(4, 3, pc)
    dy.save(base, [W, aff])
    pc2 = dy.ParameterCollection()
    keep = pc2.add_parameters(2)
    n_before = (len(pc2.parameters_list()), len(pc2.lookup_parameters_list()))
    # an edited spec: caught by the checksum; re-signed, from_spec builds something
    # else than what was saved, which the records do not match
    meta = read_meta(base)
    meta["objects"][1]["spec"]["__tuple__"][1] = 5
    for resign in (False, True):
        write_meta(base, meta, resign=resign)
        with pytest.raises(dy.ModelFileError, match="checksum" if not resign else "shape"):
            dy.load(base, pc2)
        assert (len(pc2.parameters_list()), len(pc2.lookup_parameters_list())) == n_before
        assert pc2.add_subcollection("affine").name() == "/affine/"   # name counters restored
        pc2._collection_counts.clear()
    # a corrupt data file: nothing added either
    dy.save(base, [W, aff])
    data = bytearray(open(base + ".data", "rb").read())
    data[-1] ^= 1
    open(base + ".data", "wb").write(bytes(data))
    with pytest.raises(dy.ModelFileError):
        dy.load(base, pc2)
    assert pc2.parameters_list() == [keep]


@pytest.mark.parametrize("ref", ["some_module_that_is_not_imported:Evil", "io:FileIO", "os:system",
                                 "builtins:eval", "subprocess:Popen", "autobatch.builders:RNNState",
                                 "tests.test_saveload:NoSpec", "autobatch.model.parameters:ParameterCollection"])
@pytest.mark.parametrize("where", ["class", "spec"])
def test_load_names_only_registered_classes(tmp_path, ref, where):
    """A hostile (validly signed) file naming any class that is not registered is
    refused before anything is imported, looked up or called."""
    base = str(tmp_path / "model")
    pc = dy.ParameterCollection()
    dy.save(base, [Affine(2, 2, pc)])
    meta = read_meta(base)
    if where == "class":
        meta["objects"][0]["class"] = ref
    else:
        meta["objects"][0]["spec"]["__tuple__"][2] = {"act": {"__class__": ref}}
    write_meta(base, meta)
    modules = set(sys.modules)
    target = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError, match="not registered"):
        dy.load(base, target)
    assert set(sys.modules) == modules
    assert target.parameters_list() == [] and target.add_subcollection("affine").name() == "/affine/"
    open(base + ".meta", "w").write("not json")
    with pytest.raises(dy.ModelFileError):
        dy.load(base, dy.ParameterCollection())


def test_save_needs_no_registration_and_load_names_every_class(tmp_path):
    """An unregistered class with spec/from_spec, and one its spec names, are saved
    under "module:QualName"; dy.load refuses the file with one message naming both and
    the calls that register them, adds nothing, and loads it once they are registered."""
    class Unregistered(Affine):
        pass

    class Named:
        pass
    base = str(tmp_path / "x")
    pc = dy.ParameterCollection()
    obj = Unregistered(2, 2, pc)
    obj.spec = (2, 2, {"act": Named})
    dy.save(base, [obj])
    names = [f"{__name__}:{c.__qualname__}" for c in (Unregistered, Named)]
    assert read_meta(base)["objects"][0]["class"] == names[0]
    target = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError) as refused:
        dy.load(base, target)
    message = str(refused.value)
    assert all(n in message for n in names) and "not registered" in message
    assert "dy.register_savable(Unregistered); dy.register_savable(Named)" in message
    assert "never imports or runs code a file names" in message
    assert target.parameters_list() == [] and target.add_subcollection("affine").name() == "/affine/"
    dy.register_savable(Unregistered)
    with pytest.raises(dy.ModelFileError, match=re.escape(names[1])) as refused:
        dy.load(base, dy.ParameterCollection())        # still one missing: named alone
    assert names[0] not in str(refused.value)
    dy.register_savable(Named)
    (back,) = dy.load(base, dy.ParameterCollection())
    assert type(back) is Unregistered and back.spec[2] == {"act": Named}


def test_meta_bit_flip_of_a_hyperparameter_is_caught(tmp_path):
    """A flipped bit once turned a saved forget_bias 1.0 into 0.0 unnoticed: refused now."""
    base = str(tmp_path / "m")
    dy.save(base, [dy.VanillaLSTMBuilder(1, 2, 3, dy.ParameterCollection())])
    raw = open(base + ".meta", "rb").read()
    at = raw.index(b'"forget_bias": 1.0') + len(b'"forget_bias": ')
    flipped = raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1:]       # "1.0" -> "0.0"
    open(base + ".meta", "wb").write(flipped)
    with pytest.raises(dy.ModelFileError, match="checksum"):
        dy.load(base, dy.ParameterCollection())


def test_renamed_or_extra_record_is_caught(tmp_path):
    base = str(tmp_path / "m")
    pc = dy.ParameterCollection()
    W = pc.add_parameters(2, name="W")
    sub = pc.add_subcollection("enc")
    sub.add_parameters(3, name="V")
    dy.save(base, [W, sub])
    data = open(base + ".data", "rb").read()
    # bit rot in a record name: the end record's sha256 catches it
    flipped = data.replace(b'"/enc/V"', b'"/enb/V"')
    open(base + ".data", "wb").write(flipped)
    with pytest.raises(dy.ModelFileError, match="sha256"):
        dy.load(base, dy.ParameterCollection())
    # a signed file whose record lies outside every saved object: not silently dropped
    records = split_records(data)
    records[1][0]["name"] = "/other/V"
    new = write_data(base, records)
    write_meta(base, read_meta(base), data=new)
    target = dy.ParameterCollection()
    with pytest.raises(dy.ModelFileError, match="belong to no object"):
        dy.load(base, target)
    assert target.parameters_list() == []


def test_data_and_meta_of_different_saves_are_refused(tmp_path):
    pc = dy.ParameterCollection()
    W = pc.add_parameters(2, name="W")
    dy.save(str(tmp_path / "a"), [W])
    W.set_value(np.array([5.0, 6.0]))
    dy.save(str(tmp_path / "b"), [W])
    os.replace(tmp_path / "b.data", tmp_path / "a.data")
    with pytest.raises(dy.ModelFileError, match="same dy.save"):
        dy.load(str(tmp_path / "a"), dy.ParameterCollection())


def test_devices_and_pipes_are_refused_without_reading(tmp_path):
    pc, _ = build(1)
    before = values(pc.parameters_list() + pc.lookup_parameters_list())
    for dev in ("/dev/zero", "/dev/urandom", str(tmp_path)):
        with pytest.raises(dy.ModelFileError, match="not a regular file"):
            pc.populate(dev)
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    with pytest.raises(dy.ModelFileError, match="not a regular file"):
        pc.populate(fifo)                           # does not block waiting for a writer
    with open("/dev/zero", "rb") as f, pytest.raises(dy.ModelFileError):
        pc.populate(f)
    check_unchanged(pc, before)


def test_version_1_files_still_load():
    """tests/data/v1 was written by autobatch 60ecba6 (tests/data/v1/make_v1.py), when
    builders named their parameters by role ("p_x0"): they load under DyNet's names."""
    from autobatch.io.legacy_names import migrate
    expected = {migrate(k): v for k, v in np.load(V1 / "expected.npz").items()}
    assert "/vanilla-lstm-builder/_0" in expected and "/birnn/gru-builder_1/_8" in expected
    pc = dy.ParameterCollection(seed=3)
    pc.add_parameters((3, 4), name="W")
    pc.add_lookup_parameters((5, 2), name="E")
    pc.add_subcollection("enc").add_parameters(2, name="b")
    dy.VanillaLSTMBuilder(1, 2, 3, pc)
    dy.BiRNNBuilder(1, 2, 4, pc, dy.GRUBuilder)
    for p in pc.parameters_list() + pc.lookup_parameters_list():
        p.zero() if hasattr(p, "zero") else None
    pc.populate(str(V1 / "params.data"))           # fully checked: every header is matched
    for p in pc.parameters_list() + pc.lookup_parameters_list():
        np.testing.assert_array_equal(p.as_array(), expected[p.name()])
    with pytest.raises(dy.ModelFileError, match="allow_v1"):
        dy.load(str(V1 / "model"), dy.ParameterCollection())
    W, E, sub, lstm, bi = dy.load(str(V1 / "model"), dy.ParameterCollection(), allow_v1=True)
    np.testing.assert_array_equal(W.as_array(), expected["/W"])
    np.testing.assert_array_equal(E.as_array(), expected["/E"])
    assert lstm.forget_bias == 0.5 and type(bi.builder_layers[0][1]) is dy.GRUBuilder
    np.testing.assert_array_equal(lstm.param_collection().parameters_list()[0].as_array(),
                                  expected["/vanilla-lstm-builder/_0"])


def test_save_rejects_unsaveable(tmp_path):
    with pytest.raises(TypeError):
        dy.save(str(tmp_path / "x"), [object()])
    pc = dy.ParameterCollection()
    aff = Affine(2, 2, pc)
    aff.spec = (2, 2, {"act": object()})
    with pytest.raises(TypeError, match="plain data"):
        dy.save(str(tmp_path / "x"), [aff])


def test_security_doc_example_runs():
    """The Python block of docs/security.md runs as written."""
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    namespace = {"__name__": "security_md"}
    for code in blocks:
        exec(compile(code, "docs/security.md", "exec"), namespace)


def test_each_record_belongs_to_one_object(tmp_path):
    base = str(tmp_path / "m")
    pc = dy.ParameterCollection()
    W = pc.add_parameters(2, name="W")
    sub = pc.add_subcollection("enc")
    sub.add_parameters((100, 100), name="V")
    for overlapping in ([W, W], [pc, W], [sub, pc]):
        with pytest.raises(ValueError, match="saved twice"):
            dy.save(base, overlapping)
        assert not os.path.exists(base + ".meta") and not os.path.exists(base + ".data")
    dy.save(base, [W, sub])
    # a (validly signed) metadata listing the 40 KB collection 1000 times: refused at
    # the second copy, not a thousand copies
    meta = read_meta(base)
    meta["objects"] += [meta["objects"][1]] * 1000
    write_meta(base, meta)
    target = dy.ParameterCollection()
    tracemalloc.start()
    try:
        with pytest.raises(dy.ModelFileError, match="two objects"):
            dy.load(base, target)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 ** 20 and target.parameters_list() == []
