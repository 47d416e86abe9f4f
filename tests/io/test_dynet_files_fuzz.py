"""Mutation fuzzing of DyNet-format files (tests/data/dynet_model, written by DyNet).

Every mutated file must either raise ModelFileError and leave the collection exactly
as it was (values and gradients; nothing added), or load. Nothing else may happen: no
other exception, nothing imported or called, no allocation beyond the file's size.
Fixed seed; each loop stops at its time budget, as tests/io/test_saveload_fuzz.py."""
import os
import random
import re
import sys
import time
import tracemalloc

import numpy as np
import pytest

import autobatch as dy
from autobatch.io import dynet_meta, dynet_pickle  # noqa: F401  (loaded before the check that a load imports nothing)
from dynet_files import DATA, build

SEED = 20261202
BUDGET = float(os.environ.get("AUTOBATCH_FUZZ_SECONDS", 0.3))
MIN_CASES = 40


def read(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


MODEL = read("dynet.model")
META = read("dynet_saved.meta")
DATA_FILE = read("dynet_saved.data")
PAIRS = [(META, DATA_FILE), (read("dynet_mlp.meta"), read("dynet_mlp.data"))]   # builders; a user's class


def state(pc):
    return [(p.name(), p.as_array().copy(), p.grad_as_array().copy())
            for p in pc.parameters_list() + pc.lookup_parameters_list()]


def same(a, b):
    return ([n for n, _, _ in a] == [n for n, _, _ in b]
            and all(np.array_equal(v1, v2, equal_nan=True) and np.array_equal(g1, g2, equal_nan=True)
                    for (_, v1, g1), (_, v2, g2) in zip(a, b)))


def cases(make, rng):
    start, n = time.monotonic(), 0
    while n < MIN_CASES or time.monotonic() - start < BUDGET:
        yield make(rng)
        n += 1


def mutate(data, rng):
    data = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:
        return bytes(data[:rng.randrange(len(data))])
    if kind == 1:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 2:
        at = rng.randrange(len(data))
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif kind == 3:
        at = rng.randrange(len(data))
        del data[at:at + rng.randint(1, 8)]
    else:     # a number of a header: dimensions, byte count
        headers = [m.span() for m in re.finditer(rb"[0-9]+", bytes(data))]
        a, b = headers[rng.randrange(len(headers))]
        data[a:b] = str(rng.choice([0, 1, 2 ** 31, 2 ** 63, 10 ** 30, int(data[a:b]) + 1])).encode()
    return bytes(data)


def populate_case(tmp_path, data):
    f = tmp_path / "m"
    f.write_bytes(data)
    pc = dy.ParameterCollection(seed=0)
    build(pc)
    before = state(pc)
    try:
        pc.populate(str(f))
    except dy.ModelFileError:
        assert same(state(pc), before)


def test_mutated_model_files(tmp_path):
    rng = random.Random(SEED)
    for data in cases(lambda r: mutate(MODEL, r), rng):
        populate_case(tmp_path, data)


def test_every_truncation_is_refused(tmp_path):
    for cut in range(0, len(MODEL) - 1, 7):
        f = tmp_path / "m"
        f.write_bytes(MODEL[:cut])
        pc = dy.ParameterCollection(seed=0)
        build(pc)
        before = state(pc)
        with pytest.raises(dy.ModelFileError):
            pc.populate(str(f))
        assert same(state(pc), before)


def test_huge_declared_sizes_allocate_nothing(tmp_path):
    f = tmp_path / "m"
    for header in [b"#Parameter# /W {100000,100000} 160000000001 ZERO_GRAD\n",
                   b"#LookupParameter# /E {4294967295,4294967295} 1 ZERO_GRAD\n",
                   b"#Parameter# /W {2,3} 99999999999999999 ZERO_GRAD\n"]:
        f.write_bytes(header + b"+1.00000000e+00 \n")
        tracemalloc.start()
        with pytest.raises(dy.ModelFileError):
            dy.ParameterCollection().load_param(str(f), "/W")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 1 << 20


def test_mutated_meta_and_data(tmp_path):
    rng = random.Random(SEED + 1)
    modules = set(sys.modules)
    base = str(tmp_path / "s")

    def make(r):
        meta, data = PAIRS[r.randrange(len(PAIRS))]
        return (mutate(meta, r), data) if r.random() < 0.6 else (meta, mutate(data, r))
    for meta, data in cases(make, rng):
        with open(base + ".meta", "wb") as f:
            f.write(meta)
        with open(base + ".data", "wb") as f:
            f.write(data)
        pc = dy.ParameterCollection()
        pc.add_parameters(2, name="keep")
        before = state(pc)
        try:
            dy.load(base, pc)
        except dy.ModelFileError:
            assert same(state(pc), before)
            assert pc.add_subcollection("x").name() == "/x/"
    assert set(sys.modules) - modules == set()


@pytest.mark.parametrize("token", [b"+1.0000000e+99 ", b"-9.9999999e+38 ", b"+1.00000000e+0x",
                                   b"+1.00000000e+0  ", b"+1.000.0000e+00", b"++1.0000000e+00",
                                   b"nan            ", b"+inf           ", b"1_0000000000000"])
def test_a_bad_value_is_refused(tmp_path, token):
    f = tmp_path / "m"
    f.write_bytes(b"#Parameter# /W {2} 33 ZERO_GRAD\n+1.00000000e+00 " + token + b"\n")
    p = dy.ParameterCollection().add_parameters(2, init=0.5)
    with pytest.raises(dy.ModelFileError):
        p.populate(str(f), "/W")
    assert (p.as_array() == 0.5).all()
    f.write_bytes(b"#Parameter# /W {2} 33 ZERO_GRAD\n+1.00000000e+00 -2.50000000e-01 \n")
    p.populate(str(f), "/W")
    assert p.as_array().tolist() == [1.0, -0.25]
