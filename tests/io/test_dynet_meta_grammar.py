"""DyNet's `.meta` as a grammar: every protocol DyNet has written (0 and 1 from Python 2,
2 to 5 from Python 3), memo references, repeated records, builder specs with extreme
sizes and `ln_lstm`; each case hand-made, then generated at random from the grammar.

Whatever a `.meta` says, `dy.load` either loads or raises ModelFileError with the
collection as it was, and its time and memory stay within a multiple of the files'
sizes (tests/support/load_bounds.py: tracemalloc's peak, the thread's CPU time, a
watchdog). Fixed seed; the fuzz loop stops at its time budget, as
tests/io/test_dynet_files_fuzz.py."""
import os
import random
import time

import pytest

import autobatch as dy
from autobatch.io import dynet_pickle
from dynet_files import DATA, OneLayerMLP  # noqa: F401  (registers the tutorial's class)
from dynet_pickles import Global, dumps, meta as pickled_meta
from load_bounds import bounded

SEED = 20261204
BUDGET = float(os.environ.get("AUTOBATCH_FUZZ_SECONDS", 0.3))
MIN_CASES = 40
FIXTURES = ["dynet_saved", "dynet_saved2", "dynet_mlp"]    # written by DyNet 2.2 (protocol 4)


def read(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


def plain(x):
    """An object read from a .meta as the values DyNet pickled (references as Global)."""
    if isinstance(x, dynet_pickle.UserRef):
        module, _, name = x.name.partition(":")
        return Global(module, name)
    if isinstance(x, dynet_pickle.ClassRef):            # DyNet's builders and functions
        return Global("_dynet", x.name)
    if isinstance(x, (tuple, list)):
        return type(x)(plain(v) for v in x)
    return x


ENTRIES = {name: [plain(e) for e in dynet_pickle.read_meta(read(name + ".meta"), name)]
           for name in FIXTURES}


def state(pc):
    return [(p.name(), p.as_array().tobytes(), p.grad_as_array().tobytes())
            for p in pc.parameters_list() + pc.lookup_parameters_list()]


def write(base, meta, data):
    with open(base + ".meta", "wb") as f:
        f.write(meta)
    with open(base + ".data", "wb") as f:
        f.write(data)


def load_bounded(base, meta, data):
    """dy.load of (meta, data) into a collection that holds one parameter: the objects,
    or None when refused, in which case the collection must be unchanged."""
    write(base, meta, data)
    pc = dy.ParameterCollection()
    pc.add_parameters(2, name="keep")
    before = state(pc)
    with bounded(len(meta) + len(data), f"{meta[:60]!r}"):
        try:
            return dy.load(base, pc)
        except dy.ModelFileError:
            pass
    assert state(pc) == before
    assert pc.add_subcollection("x").name() == "/x/"
    return None


# -------------------------------------------------------------- protocols ----

@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("protocol", range(6))
def test_every_protocol_dynet_wrote_loads(tmp_path, fixture, protocol):
    """DyNet's files rewritten in each protocol, protocols 0 and 1 as Python 2 wrote
    them (tests/data/check_dynet_loads_py2_meta.py checks that DyNet loads these too),
    load to exactly what DyNet's own file loads to."""
    meta = pickled_meta(ENTRIES[fixture], protocol)
    if protocol == 0 and fixture == "dynet_saved":
        assert meta.startswith(b"(S'Parameters'\np0\nS'/W'\np1\ntp2\n.")
    base = str(tmp_path / "m")
    write(base, meta, read(fixture + ".data"))
    pc, reference = dy.ParameterCollection(), dy.ParameterCollection()
    objects = dy.load(base, pc)
    expected = dy.load(os.path.join(DATA, fixture), reference)
    assert [type(o) for o in objects] == [type(o) for o in expected]
    assert state(pc) == state(reference)


def test_python2_strings_dicts_and_longs_read_as_data(tmp_path):
    """The protocol 0/1 forms of a user's spec: str as S'...', dicts as MARK ... DICT,
    True as I01, big ints as L...L, floats as F...; read as what Python 2 meant."""
    seen = []

    class Spec:
        def __init__(self, spec, pc):
            self.pc = pc.add_subcollection("spec")
            seen.append(spec)

        @classmethod
        def from_spec(cls, spec, pc):
            return cls(spec, pc)

        def param_collection(self):
            return self.pc
    dy.register_savable(Spec, name="__main__:Spec")
    spec = ({"words": ["a", "b"], "n": 2 ** 40, "on": True, "rate": 0.5}, None)
    for protocol in (0, 1):
        meta = dumps((Global("__main__", "Spec"), spec, "/spec/"), protocol)
        assert b"S'words'" in meta if protocol == 0 else b"U\x05words" in meta
        assert load_bounded(str(tmp_path / "m"), meta, b"") is not None
        assert seen.pop() == spec


# ------------------------------------------------------------------- memo ----

def nested_memo(head, levels, fan=10):
    """A spec whose memo references nest: level k is a list of `fan` references to
    level k-1 (a 209-byte file stood for 10^6 lists and took 5 s and 193 MB)."""
    body = b"\x80\x02" + head + b"(" * levels + b"]q\x00"
    for level in range(levels):
        body += (b"h" + bytes([level])) * (fan - 1) + b"lq" + bytes([level + 1])
    return body + b"X\x02\x00\x00\x00/a\x87."


@pytest.mark.parametrize("head", [b"c__main__\nOneLayerMLP\n", b"c_dynet\nVanillaLSTMBuilder\n",
                                  b"cautobatch.builders\nVanillaLSTMBuilder\n"],
                         ids=["users-class", "dynet-builder", "our-builder-by-module"])
@pytest.mark.parametrize("levels", [6, 7, 30])
def test_nested_memo_references_are_refused_at_once(tmp_path, head, levels):
    assert load_bounded(str(tmp_path / "m"), nested_memo(head, levels), b"") is None


def test_our_builders_are_named_only_as_dynets(tmp_path):
    """A DyNet file names DyNet's builders (_dynet.<Name>); this library's classes,
    registered for our own format, are not reachable by their module's name."""
    meta = dumps((Global("autobatch.builders", "GRUBuilder"), {"layers": 1}, "/gru-builder/"), 4)
    write(str(tmp_path / "m"), meta, read("dynet_saved.data"))
    with pytest.raises(dy.ModelFileError, match="a class of this library"):
        dy.load(str(tmp_path / "m"), dy.ParameterCollection())


def test_a_list_that_contains_itself_is_refused(tmp_path):
    cycle = []
    cycle.append(cycle)
    meta = dumps((Global("__main__", "OneLayerMLP"), (10, cycle), "/_0/"), 4)
    write(str(tmp_path / "m"), meta, read("dynet_mlp.data"))
    with pytest.raises(dy.ModelFileError, match="contains itself"):
        dy.load(str(tmp_path / "m"), dy.ParameterCollection())


def test_shared_parts_of_a_spec_within_the_bound_load(tmp_path):
    """Sharing as real specs have it (a vocabulary referenced twice, a repeated string)
    stays well within the bound and reaches from_spec intact."""
    seen = []

    class Shared:
        def __init__(self, pc):
            self.pc = pc.add_subcollection("shared")

        @classmethod
        def from_spec(cls, spec, pc):
            seen.append(spec)
            return cls(pc)

        def param_collection(self):
            return self.pc
    dy.register_savable(Shared, name="__main__:Shared")
    vocab = [f"w{i}" for i in range(1000)]
    spec = {"src": vocab, "trg": vocab, "pad": ["<pad>"] * 50}
    meta = dumps((Global("__main__", "Shared"), spec, "/shared/"), 4)
    assert b"h" in meta or b"j" in meta                   # the pickle holds memo references
    assert load_bounded(str(tmp_path / "m"), meta, b"") is not None
    assert seen == [spec]


# ------------------------------------------------------------------ sizes ----

@pytest.mark.parametrize("ln_lstm", [True, False])
@pytest.mark.parametrize("layers,hidden", [(2 ** 31 - 1, 1), (1, 2 ** 31 - 1), (2 ** 31 - 1, 2 ** 31 - 1),
                                           (1000, 3)])
def test_extreme_lstm_sizes_are_refused_at_once(tmp_path, ln_lstm, layers, hidden):
    """`ln_lstm=True` with 2^31 - 1 layers: the allowance for the gains and biases DyNet's
    files lack grew with the spec and let it allocate without end."""
    entry = (Global("_dynet", "VanillaLSTMBuilder"), (layers, 1, hidden, ln_lstm, 1.0),
             "/vanilla-lstm-builder/")
    for data in (b"", read("dynet_saved2.data")):
        assert load_bounded(str(tmp_path / "m"), dumps(entry, 4), data) is None


def test_a_layer_normalised_lstm_dynet_saved_still_loads(tmp_path):
    objects = load_bounded(str(tmp_path / "m"), read("dynet_saved2.meta"), read("dynet_saved2.data"))
    assert objects is not None and objects[1].ln_lstm


# ---------------------------------------------------------------- records ----

W = b"#Parameter# /W {500,500} 4000001 ZERO_GRAD\n" + b"+1.00000000e+00 " * 250000 + b"\n"


@pytest.mark.parametrize("entries", [
    [("Parameters", "/W")] * 400,
    [("Parameters", "/W"), ("Parameters", "/W")],
    [("Parameters", "/W"), (Global("__main__", "OneLayerMLP"), (10, 20, 4, Global("_dynet", "rectify")), "/")],
], ids=["400-times", "twice", "parameter-and-object"])
def test_a_record_named_by_two_objects_is_refused(tmp_path, entries):
    """Each record belongs to one object: 400 names of one 500x500 record made 400
    parameters (+1 GB); a load makes at most as many values as the file holds."""
    assert load_bounded(str(tmp_path / "m"), pickled_meta(entries, 4), W) is None


def test_two_builders_over_one_collection_are_refused(tmp_path):
    lstm = next(e for e in ENTRIES["dynet_saved"] if e[0] not in ("Parameters", "LookupParameters"))
    assert load_bounded(str(tmp_path / "m"), pickled_meta([lstm, lstm], 2), read("dynet_saved.data")) is None
    assert load_bounded(str(tmp_path / "m"), pickled_meta([lstm], 2), read("dynet_saved.data")) is not None


def test_many_objects_load_in_time_linear_in_the_files(tmp_path):
    """Finding each object's records is a lookup, not a scan of the file (16,000 objects
    took 19 s, and 100,000 quadratically longer)."""
    n = 16000
    data = b"".join(b"#Parameter# /p%d {1} 17 ZERO_GRAD\n+1.00000000e+00 \n" % i for i in range(n))
    meta = pickled_meta([("Parameters", f"/p{i}") for i in range(n)], 4)
    objects = load_bounded(str(tmp_path / "m"), meta, data)
    assert len(objects) == n and objects[-1].as_array().tolist() == [1.0]


# ------------------------------------------------------------------- fuzz ----

SIZES = [0, -1, 2 ** 31 - 1, 2 ** 31, 2 ** 63, 10 ** 30, 1.5, True, "1", None]
BUILDERS = {"VanillaLSTMBuilder": 5, "LSTMBuilder": 5, "CoupledLSTMBuilder": 3, "GRUBuilder": 3,
            "SimpleRNNBuilder": 3, "CompactVanillaLSTMBuilder": 3, "BiRNNBuilder": 5}
COLLECTIONS = ["/vanilla-lstm-builder/", "/gru-builder/", "/simple-rnn-builder/", "/lstm-builder/",
               "/birnn/", "/compact-vanilla-lstm-builder/", "/_0/", "/", "/x/"]


def size(r):
    return r.choice(SIZES) if r.random() < 0.3 else r.randint(1, 4)


def builder_entry(r):
    name = r.choice(list(BUILDERS))
    spec = [size(r), size(r), size(r)]
    if name == "BiRNNBuilder":
        spec += [Global("_dynet", r.choice(["VanillaLSTMBuilder", "GRUBuilder", "rectify"])), None]
    elif BUILDERS[name] == 5:
        spec += [r.choice([True, False, 1, None]), r.choice([1.0, 0.0, float("nan"), float("inf"), 2])]
    if r.random() < 0.2:
        spec = spec[:r.randrange(len(spec) + 1)]
    return (Global("_dynet", name), tuple(spec), r.choice(COLLECTIONS))


def shared(r):
    """A value whose parts are shared: the pickle writes each once and then refers to it."""
    x = r.choice([1, "a", [], {}, None])
    for _ in range(r.randint(1, 12)):
        fan, kind = r.randint(1, 10), r.randrange(3)
        x = [x] * fan if kind == 0 else tuple([x] * fan) if kind == 1 else {str(i): x for i in range(fan)}
    if r.random() < 0.1:
        x = [x]
        x.append(x)
    return x


def user_entry(r):
    rectify = Global("_dynet", "rectify")
    spec = r.choice([(10, 20, 4, rectify), shared(r), (10, shared(r), 4, rectify),
                     (size(r), size(r), size(r), rectify)])
    return (Global("__main__", "OneLayerMLP"), spec, r.choice(COLLECTIONS))


def grammar_case(r):
    fixture = r.choice(FIXTURES)
    entries = list(ENTRIES[fixture])
    for _ in range(r.randint(0, 4)):
        kind = r.randrange(4)
        if kind == 0:       # a stored parameter named again, maybe many times
            named = [e for e in entries if e[0] in ("Parameters", "LookupParameters")]
            extra = [r.choice(named)] * r.choice([1, 2, 50]) if named else [("Parameters", "/nope")]
        else:
            extra = [builder_entry(r) if kind < 3 else user_entry(r)]
        at = r.randrange(len(entries) + 1)
        entries[at:at] = extra
    if r.random() < 0.3:
        r.shuffle(entries)
    return pickled_meta(entries, r.randrange(6)), read(fixture + ".data")


def test_meta_grammar_fuzz(tmp_path):
    rng = random.Random(SEED)
    base = str(tmp_path / "m")
    start, n, loaded = time.monotonic(), 0, 0
    while n < MIN_CASES or time.monotonic() - start < BUDGET:
        meta, data = grammar_case(rng)
        loaded += load_bounded(base, meta, data) is not None
        n += 1
    assert 0 < loaded < n           # the grammar reaches both outcomes


def test_fixtures_load_within_the_bounds(tmp_path):
    for fixture in FIXTURES:
        assert load_bounded(str(tmp_path / "m"), read(fixture + ".meta"), read(fixture + ".data")) is not None
