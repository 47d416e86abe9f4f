"""Mutation fuzzing of saved files (our save/load format).

Every mutated file must either raise ModelFileError and leave the target collection
exactly as it was, or load to exactly what was saved; nothing else may happen: no
other exception, no module imported, no memory allocated beyond the file's size.
Mutations: truncations, bit flips, byte insertions/deletions, field edits of a file
re-signed with valid checksums (a hostile author), hostile specs, huge declared
sizes, devices, file descriptors. Fixed seed; each loop stops at its time budget
(the whole file takes a few seconds)."""
import copy
import json
import os
import random
import sys
import time
import tracemalloc

import numpy as np
import pytest

import autobatch as dy
from autobatch.io import autobatch_data, autobatch_save
from savefiles import join_records, read_meta, split_records, write_meta

V1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "v1")

SEED = 20261201
BUDGET = float(os.environ.get("AUTOBATCH_FUZZ_SECONDS", 0.3))   # per fuzz loop; raise it for a deeper run
MIN_CASES = 40        # each loop must get at least this far, however slow the machine


def build(seed):
    pc = dy.ParameterCollection(seed=seed)
    W = pc.add_parameters((3, 4), name="W")
    E = pc.add_lookup_parameters((6, 2), name="E")
    sub = pc.add_subcollection("enc")
    sub.add_parameters(2, name="b")
    lstm = dy.VanillaLSTMBuilder(1, 2, 3, pc, forget_bias=1.0)
    bi = dy.BiRNNBuilder(1, 2, 4, pc, dy.GRUBuilder)
    tree = dy.TreeLSTMBuilder(2, 2, pc)
    return pc, [W, E, sub, lstm, bi, tree]


def build_v1():
    """The collection of tests/data/v1/make_v1.py."""
    pc = dy.ParameterCollection(seed=5)
    pc.add_parameters((3, 4), name="W")
    pc.add_lookup_parameters((5, 2), name="E")
    pc.add_subcollection("enc").add_parameters(2, name="b")
    dy.VanillaLSTMBuilder(1, 2, 3, pc)
    dy.BiRNNBuilder(1, 2, 4, pc, dy.GRUBuilder)
    return pc


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("saved")
    pc, objects = build(1)
    base = str(d / "model")
    dy.save(base, objects)
    pc.save(str(d / "params"))
    files = {name: open(str(d / name), "rb").read() for name in ("model.data", "model.meta", "params")}
    for name in ("model.data", "model.meta", "params.data"):    # written by autobatch 60ecba6
        files["v1." + name] = open(os.path.join(V1, name), "rb").read()
    return pc, files


def state(pc):
    """Everything a failed load must leave as it was."""
    ps = pc.parameters_list() + pc.lookup_parameters_list()
    return ([(p.name(), p.as_array().tobytes()) for p in ps],
            dict(pc._name_counts), dict(pc._collection_counts))


def fingerprint(objs):
    """What a successful load must reproduce: kinds, names relative to each object,
    values, hyperparameters."""
    out = []
    for o in objs:
        if isinstance(o, (dy.Parameters, dy.LookupParameters)):
            out.append((type(o).__name__, o.as_array().tobytes()))
            continue
        pc = o if isinstance(o, dy.ParameterCollection) else o.param_collection()
        own = len(pc.name())
        ps = pc.parameters_list() + pc.lookup_parameters_list()
        out.append((type(o).__name__, getattr(o, "forget_bias", None),
                    sorted((p.name()[own:], p.as_array().tobytes()) for p in ps)))
    return out


class Checker:
    """Loads mutated bytes into fresh targets and checks the outcome."""

    def __init__(self, tmp_path, saved):
        self.dir, (self.pc, self.files) = tmp_path, saved
        self.base = str(tmp_path / "m")
        self.expected_objs = None
        self.outcomes = {"refused": 0, "loaded": 0}

    def _target(self):
        pc = dy.ParameterCollection(seed=7)
        pc.add_parameters(2, name="keep")
        pc.add_subcollection("vanilla-lstm-builder")
        return pc

    def load(self, data=None, meta=None, exact=True, v1=False):
        """dy.load of (mutated) model.data / model.meta. `exact`: a load that succeeds
        must reproduce what was saved (true of damage; a hostile author with valid
        checksums may of course change values)."""
        for name, content in (("data", data), ("meta", meta)):
            content = self.files[("v1." if v1 else "") + "model." + name] if content is None else content
            with open(f"{self.base}.{name}", "wb") as f:
                f.write(content)
        target = self._target()
        return self._check(lambda: dy.load(self.base, target, allow_v1=v1), target,
                           exact and (lambda objs: fingerprint(objs) == self.reference()))

    def populate(self, data, exact=True, v1=False):
        with open(self.base + ".params", "wb") as f:
            f.write(data)
        target = build_v1() if v1 else build(2)[0]
        return self._check(lambda: target.populate(self.base + ".params"), target,
                           exact and (lambda _: state(target)[0] == self.reference_params(v1)))

    def _check(self, action, target, same_as_saved):
        before, modules = state(target), set(sys.modules)
        try:
            result = action()
        except dy.ModelFileError:
            assert state(target) == before, "a failed load changed the collection"
            self.outcomes["refused"] += 1
            return "refused"
        finally:
            assert set(sys.modules) == modules, "loading imported a module"
        assert not same_as_saved or same_as_saved(result), "a damaged file loaded other values"
        self.outcomes["loaded"] += 1
        return "loaded"

    def reference_params(self, v1):
        if not v1:
            return state(self.pc)[0]
        target = build_v1()
        target.populate(os.path.join(V1, "params.data"))
        return state(target)[0]

    def reference(self):
        if self.expected_objs is None:
            for name in ("data", "meta"):
                with open(f"{self.base}-ref.{name}", "wb") as f:
                    f.write(self.files["model." + name])
            self.expected_objs = fingerprint(dy.load(self.base + "-ref", self._target()))
        return self.expected_objs


@pytest.fixture
def check(tmp_path, saved):
    return Checker(tmp_path, saved)


def loop(rng, make_case, run):
    """Run cases until the time budget is spent (at least MIN_CASES)."""
    deadline, n = time.monotonic() + BUDGET, 0
    while n < MIN_CASES or time.monotonic() < deadline:
        run(make_case(rng, n))
        n += 1
    return n


# ---------------------------------------------------------- byte damage ----

def truncate(data, rng, n):
    return data[:rng.randrange(len(data))]


def flip(data, rng, n):
    b = bytearray(data)
    for _ in range(1 + (n % 3)):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def splice(data, rng, n):
    i, j = sorted(rng.randrange(len(data) + 1) for _ in range(2))
    choice = n % 3
    if choice == 0:
        return data[:i] + data[j:]                                 # delete
    if choice == 1:
        return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9))) + data[i:]
    return data[:j] + data[i:j] + data[j:]                         # duplicate a span


@pytest.mark.parametrize("damage", [truncate, flip, splice], ids=lambda f: f.__name__)
@pytest.mark.parametrize("part", ["model.data", "model.meta", "params",
                                  "v1.model.meta", "v1.params.data"])
def test_damaged_files_are_refused(check, saved, part, damage):
    """Version 2 files: refused, or (.meta, a change of JSON layout only) loaded unchanged.
    Version 1 metadata has no checksum: it exercises the checks behind the checksum
    (a damaged v1 .meta may load with other hyperparameters, never run code or
    raise anything but ModelFileError). Version 1 parameter files are fully checked
    by populate: refused or loaded unchanged."""
    rng = random.Random(f"{SEED}-{part}-{damage.__name__}")
    original = saved[1][part]

    def run(data):
        if data == original:
            return
        if part.endswith("params") or part.endswith("params.data"):
            outcome = check.populate(data, v1=part.startswith("v1"))
        elif part == "model.data":
            outcome = check.load(data=data)
        elif part == "model.meta":
            outcome = check.load(meta=data)
        else:
            outcome = check.load(meta=data, v1=True, exact=False)
        # the sha256 of a version 2 parameter file changes with any byte; a change
        # of JSON layout only (whitespace) may load, and then loads the same values
        assert outcome == "refused" or part.endswith("meta") or part.startswith("v1")
    loop(rng, lambda rng, n: damage(original, rng, n), run)
    assert check.outcomes["refused"] > 0


# ------------------------------------------- hostile authors: valid checksums ----

HOSTILE_VALUES = [
    None, True, False, 0, -1, 1, 2 ** 31, 2 ** 63, 10 ** 30, 1e308, -0.0, 0.5, float("nan"),
    float("inf"), "", "x", "../../etc/passwd", "/", "/W", "\x00", "1", [], [1], {}, {"a": 1},
    {"__class__": "io:FileIO"}, {"__class__": "os:system"}, {"__class__": "builtins:eval"},
    {"__class__": "autobatch.builders:GRUBuilder"}, {"__tuple__": [1, 2]}, {"__tuple__": "x"},
    {"__reduce__": ["os:system", "id"]}, {"__class__": "io:FileIO", "x": 1},
]


def paths(x, at=()):
    """Every (path, value) in a JSON tree."""
    yield at, x
    if isinstance(x, dict):
        for k, v in x.items():
            yield from paths(v, at + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from paths(v, at + (i,))


def edit_tree(tree, rng):
    tree = copy.deepcopy(tree)
    all_paths = [p for p, _ in paths(tree) if p]
    at = rng.choice(all_paths)
    parent = tree
    for k in at[:-1]:
        parent = parent[k]
    action = rng.randrange(4)
    if action == 0 and isinstance(parent, dict):
        del parent[at[-1]]
    elif action == 1 and isinstance(parent, dict):
        parent[rng.choice(["__class__", "__tuple__", "model", "extra", "class", "spec"])] = \
            copy.deepcopy(rng.choice(HOSTILE_VALUES))
    else:
        parent[at[-1]] = copy.deepcopy(rng.choice(HOSTILE_VALUES))
    return tree


def test_edited_metadata_with_valid_checksum(check, saved):
    rng = random.Random(f"{SEED}-meta-edits")
    meta = json.loads(saved[1]["model.meta"])

    def run(edited):
        edited.pop("sha256", None)
        edited["sha256"] = autobatch_save._meta_digest(edited) if isinstance(edited, dict) else None
        check.load(meta=json.dumps(edited).encode(), exact=False)
    loop(rng, lambda rng, n: edit_tree({k: v for k, v in meta.items() if k != "sha256"}, rng), run)
    assert check.outcomes["refused"] > MIN_CASES // 2


def edit_record(records, rng):
    records = copy.deepcopy(records)
    i = rng.randrange(len(records))
    header, payload = records[i]
    choice = rng.randrange(7)
    if choice == 0:
        header[rng.choice(["kind", "name", "shape", "nbytes"])] = copy.deepcopy(rng.choice(HOSTILE_VALUES))
    elif choice == 1:
        header["shape"] = rng.choice([[2 ** 32, 2 ** 32], [2 ** 62, 4], [10 ** 9], [1] * 6, [0], [-3, -4]])
        header["nbytes"] = 4 * int(np.prod(header["shape"]))      # as an int64 product would say
    elif choice == 2:
        header["name"] = rng.choice(["/other/x", "/enc//b", "/enc/b/", "/W_", "/" + "a" * 300,
                                     "/W", records[(i + 1) % len(records)][0]["name"]])
    elif choice == 3:
        del records[i]                                             # a record lost
    elif choice == 4:
        records.insert(i, (dict(header, name=header["name"] + "x"), payload))   # one too many
    elif choice == 5:
        header["kind"] = {"param": "lookup", "lookup": "param"}[header["kind"]]
    else:
        header["nbytes"] = 2 ** 40                                 # larger than the file
    return records


def test_edited_data_with_valid_checksums(check, saved):
    rng = random.Random(f"{SEED}-data-edits")
    records = split_records(saved[1]["model.data"])
    meta = json.loads(saved[1]["model.meta"])

    def run(edited):
        data, digest = join_records(edited)
        m = dict(meta, data={"records": len(edited), "sha256": digest})
        m["sha256"] = autobatch_save._meta_digest(m)
        check.load(data=data, meta=json.dumps(m).encode(), exact=False)
        check.populate(data, exact=False)
    n = loop(rng, lambda rng, n: edit_record(records, rng), run)
    assert check.outcomes["refused"] >= n // 2


# --------------------------------------------------------- named hostile cases ----

@pytest.mark.parametrize("ref", ["io:FileIO", "os:system", "builtins:eval", "builtins:__import__",
                                 "subprocess:Popen", "ctypes:CDLL", "pickle:loads", "antigravity:x",
                                 "autobatch.builders:_checked_spec", "autobatch.serialization:save"])
def test_hostile_class_references(tmp_path, ref):
    base = str(tmp_path / "m")
    pc = dy.ParameterCollection()
    dy.save(base, [dy.BiRNNBuilder(1, 2, 4, pc, dy.SimpleRNNBuilder)])
    for where in ("class", "factory"):
        meta = read_meta(base)
        if where == "class":
            meta["objects"][0]["class"] = ref
        else:
            meta["objects"][0]["spec"]["rnn_builder_factory"] = {"__class__": ref}
        write_meta(base, meta)
        modules = set(sys.modules)
        with pytest.raises(dy.ModelFileError, match="not registered"):
            dy.load(base, dy.ParameterCollection())
        assert set(sys.modules) == modules


@pytest.mark.parametrize("spec", [
    {"layers": 1, "input_dim": 2, "hidden_dim": 10 ** 5, "forget_bias": 1.0},        # 381 MB in 1.x
    {"layers": 10 ** 9, "input_dim": 2, "hidden_dim": 3, "forget_bias": 1.0},
    {"layers": 1, "input_dim": 2 ** 31 - 1, "hidden_dim": 2 ** 31 - 1},
    {"layers": 1, "input_dim": 2 ** 40, "hidden_dim": 3},
    {"layers": 1.5, "input_dim": 2, "hidden_dim": 3},
    {"layers": "1", "input_dim": 2, "hidden_dim": 3},
    {"layers": True, "input_dim": 2, "hidden_dim": 3},
    {"layers": 1, "input_dim": 2, "hidden_dim": 3, "forget_bias": float("nan")},
    {"layers": 1, "input_dim": 2, "hidden_dim": 3, "ln_lstm": True},
    {"layers": 1, "input_dim": 2, "hidden_dim": 3, "model": None},
    {"layers": 1, "input_dim": 2, "hidden_dim": 3, "forget_bias": {"__class__": "io:FileIO"}},
    [1, 2, 3], None, "spec",
])
def test_hostile_specs_allocate_nothing(tmp_path, spec):
    base = str(tmp_path / "m")
    dy.save(base, [dy.VanillaLSTMBuilder(1, 2, 3, dy.ParameterCollection())])
    meta = read_meta(base)
    meta["objects"][0]["spec"] = spec
    write_meta(base, meta)
    target = dy.ParameterCollection()
    before = state(target)
    tracemalloc.start()
    try:
        with pytest.raises(dy.ModelFileError):
            dy.load(base, target)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2 ** 20, f"a {os.path.getsize(base + '.meta')}-byte file made the loader allocate {peak} bytes"
    assert state(target) == before


def test_huge_declared_record_sizes(tmp_path):
    pc = dy.ParameterCollection()
    pc.add_parameters((3, 4), name="W")
    f = str(tmp_path / "p")
    pc.save(f)
    records = split_records(open(f, "rb").read())
    for shape in ([2 ** 32, 2 ** 32], [2 ** 31, 2 ** 31, 4], [10 ** 12], [3, 4, 2 ** 61]):
        h = dict(records[0][0], shape=shape, nbytes=4 * int(np.prod(shape)))   # wraps in int64
        for nbytes in (h["nbytes"], 4 * int(np.prod(shape, dtype=object))):
            data, _ = join_records([(dict(h, nbytes=nbytes), records[0][1])])
            open(f, "wb").write(data)
            tracemalloc.start()
            try:
                with pytest.raises(dy.ModelFileError):
                    pc.populate(f)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < 2 ** 20


@pytest.mark.parametrize("text", [
    b"[" * 100000, b'{"a":' * 100000, b"1" * 5000, b'{"format": "autobatch-save", "version": 1e400}',
    b'{"format": "autobatch-save", "version": 2, "objects": [], "data": {}, "sha256": 5}',
    b"\xff\xfe", b"", b"null", b'"autobatch-save"', b"\x00" * 100,
])
def test_malformed_metadata(check, text):
    assert check.load(meta=text) == "refused"


@pytest.mark.parametrize("header", [b"[" * 60000, b"9" * 6000, b"{}", b"[]", b'{"kind": "end"}',
                                    b'{"kind": "end", "records": 0, "sha256": "00"}'])
def test_malformed_record_headers(check, header):
    assert check.populate(autobatch_data.MAGIC + header + b"\n") == "refused"


def test_devices_and_descriptors(check, saved):
    pc, _ = build(2)
    before = state(pc)
    t0 = time.monotonic()
    with pytest.raises(dy.ModelFileError):
        pc.populate("/dev/zero")
    with open("/dev/zero", "rb") as f, pytest.raises(dy.ModelFileError):
        pc.populate(f)
    assert time.monotonic() - t0 < 1.0
    r, w = os.pipe()
    try:
        os.write(w, saved[1]["params"][:1000])
        with pytest.raises(TypeError):
            pc.populate(r)
        with open(f"/proc/self/fd/{r}", "rb") as f, pytest.raises(dy.ModelFileError):
            pc.populate(f)                                         # a pipe
        os.fstat(r)
    finally:
        os.close(r)
        os.close(w)
    assert state(pc) == before


def test_the_fuzzer_sees_both_outcomes(check, saved):
    """Sanity: the unmodified files load to the reference."""
    assert check.load() == "loaded"
    assert check.populate(saved[1]["params"]) == "loaded"


def test_many_objects_load_in_time_linear_in_the_files(tmp_path):
    """Each object's records are a range of the sorted names, not a scan of all of them
    (a metadata of n collections cost n x n name comparisons)."""
    from load_bounds import bounded
    n = 6000
    pc = dy.ParameterCollection()
    subs = [pc.add_subcollection(f"s{i}") for i in range(n)]
    for sub in subs:
        sub.add_parameters(1, init=0.5)
    base = str(tmp_path / "many")
    dy.save(base, subs)
    size = sum(os.path.getsize(base + ext) for ext in (".meta", ".data"))
    with bounded(size, "6000 collections"):
        loaded = dy.load(base, dy.ParameterCollection())
    assert len(loaded) == n and loaded[-1].parameters_list()[0].as_array().tolist() == [0.5]
