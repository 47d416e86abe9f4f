"""The engine's model of a node: full shapes in signatures, checked sizes, one
out-of-memory policy, graphs that refuse expressions they do not own."""
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autobatch as dy

def test_a_huge_vector_never_batches_with_a_small_one(strategy):
    # (2097162,) and (10,) once had the same packed 21-bit shape code: one batch,
    # wrong numbers under every batching strategy
    big = np.full(2097162, 0.5, dtype=np.float32)
    small = np.arange(10, dtype=np.float32) / 10
    dy.renew_cg(strategy=strategy)
    a, b = dy.tanh(dy.inputTensor(big)), dy.tanh(dy.inputTensor(small))
    assert dy.cg().node_info(a.vindex)[3] != dy.cg().node_info(b.vindex)[3]
    np.testing.assert_allclose(b.npvalue(), np.tanh(small), rtol=1e-6)
    np.testing.assert_allclose(a.npvalue()[:5], np.tanh(0.5), rtol=1e-6)


def test_shapes_are_checked_when_a_node_is_created():
    dy.renew_cg()
    with pytest.raises(TypeError, match="whole numbers"):
        dy.zeros((2.5, 3))
    with pytest.raises(dy.DimensionError, match="0 or more"):
        dy.zeros((2, -3))
    with pytest.raises(dy.DimensionError, match="1 to 4 dimensions"):
        dy.zeros((1, 2, 3, 4, 5))
    with pytest.raises(dy.DimensionError, match="2\\^31"):
        dy.zeros((2**31, 1))
    with pytest.raises(dy.DimensionError, match="2\\^31"):
        dy.zeros((65536, 65537))
    with pytest.raises(dy.DimensionError, match="2\\^31"):
        dy.reshape(dy.zeros(4), (2**40, 2**40), batch_size=2**40)
    assert dy.zeros((2, 3, 4, 5)).dim() == ((2, 3, 4, 5), 1)


def test_reshape_regroups_the_batch():
    # DyNet's masking idiom: a (n,) mask becomes a batch of n scalars
    pc = dy.ParameterCollection()
    p = pc.add_parameters((3, 2))
    p.set_value(np.arange(6, dtype=np.float32).reshape(3, 2))
    dy.renew_cg()
    x = dy.reshape(p.expr(True), (3,), batch_size=2)
    assert x.dim() == ((3,), 2)
    # column-major: batch element k is column k of the matrix
    np.testing.assert_array_equal(x.npvalue(), p.as_array())
    mask = dy.reshape(dy.inputTensor([1.0, 0.0]), (1,), batch_size=2)
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(x, mask)))
    assert loss.value() == 0 + 2 + 4
    loss.backward()
    np.testing.assert_array_equal(p.grad_as_array(), [[1, 0], [1, 0], [1, 0]])
    with pytest.raises(dy.DimensionError, match="cannot reshape"):
        dy.reshape(x, (4,), batch_size=2)


def test_a_graph_refuses_expressions_it_does_not_own():
    dy.renew_cg()
    e = dy.inputTensor([1.0, 2.0])
    other = dy.ComputationGraph(None)
    with pytest.raises(dy.StaleExpressionError):
        other.forward(e)
    with pytest.raises(dy.StaleExpressionError):
        other.backward(e)
    assert e.value() == [1.0, 2.0]


def test_out_of_memory_is_a_memory_error_and_the_graph_stays_usable(tmp_path):
    # a child process with a 2 GB address space: the batch that needs 1.6 GB more
    # than is left fails with MemoryError, not abort()
    code = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
        import autobatch as dy
        dy.renew_cg()
        small = dy.tanh(dy.inputTensor([0.0, 1.0]))
        try:
            dy.tanh(dy.zeros((20000, 20000)) + 1).value()
        except MemoryError:
            print("MemoryError")
        print(small.value()[0], dy.sum_elems(dy.ones(3) * 2).value())
    """)
    # the child imports the autobatch these tests import (not a source tree in its cwd)
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(dy.__file__).resolve().parent.parent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["MemoryError", "0.0", "6.0"]


def test_pick_keeps_its_older_keyword():
    # DyNet's keyword is dim; programs written for this library's first API used d
    dy.renew_cg()
    m = dy.inputTensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert dy.pick(m, 1, d=1).value() == dy.pick(m, 1, dim=1).value() == [1.0, 4.0]
    assert dy.pick_batch(m, [0, 2], d=1).npvalue().tolist() == [[0.0, 2.0], [3.0, 5.0]]


def test_recalculating_reuses_memory():
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((64, 64))
    dy.renew_cg()
    x = dy.inputVector(np.ones(64, dtype=np.float32))
    y = dy.sum_elems(dy.tanh(W * dy.tanh(W * x)))
    first = y.value()
    capacity = dy.cg().stats()["arena_capacity_bytes"]
    for _ in range(300):
        assert y.value(recalculate=True) == first
    assert dy.cg().stats()["arena_capacity_bytes"] == capacity
    assert x.value() == [1.0] * 64                  # inputs survive recomputation


def _tanh_tower(x, depth):
    dy.renew_cg()
    h = dy.inputTensor(x)
    for _ in range(depth):
        h = dy.tanh(h)
    return dy.sum_elems(h).value()


@pytest.mark.skipif(sys.platform != "linux", reason="ru_minflt counts page faults on Linux")
def test_a_renewed_graph_touches_no_new_pages():
    # renew_cg keeps the arenas' chunks (and so their mapped pages): a graph like the
    # last one faults no page in again (on a VM a fault costs ~2 us, 64 MB ~30 ms)
    import resource
    x = np.full((1024, 1024), 0.5, np.float32)          # 4 MB a value, 64 MB in all
    first = _tanh_tower(x, 16)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    assert _tanh_tower(x, 16) == first
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < 4096, f"{faults} page faults for 16,384 pages of values"


def test_values_across_kept_arena_chunks():
    # the arenas keep their chunks and fill them again from the first; a value that
    # does not fit the rest of a chunk skips to one it fits, or to a new one
    rng = np.random.default_rng(0)
    small = rng.standard_normal((64, 64)).astype(np.float32)       # 16 KB
    large = rng.standard_normal((1024, 700)).astype(np.float32)    # 2.8 MB
    for order in ([small] * 200 + [large] * 3, [large] * 3 + [small] * 200, [small, large] * 20):
        dy.renew_cg()
        ys = [dy.tanh(dy.inputTensor(x)) for x in order]
        for x, y in zip(order, ys):
            np.testing.assert_allclose(y.npvalue(), np.tanh(x), rtol=1e-5, atol=1e-6)


def test_reset_random_seed_gives_the_same_numbers_under_every_strategy(strategies):
    # dropout and noise draw by (graph seed, node, element), not in execution order
    out = []
    for strategy in strategies:
        dy.reset_random_seed(7)
        pc = dy.ParameterCollection()
        W = pc.add_parameters((4, 4))
        dy.renew_cg(strategy=strategy)
        hs = [dy.dropout(dy.tanh(W * dy.inputVector(np.full(4, k + 1.0))), 0.5) for k in range(3)]
        noisy = [dy.noise(h, 0.3) for h in hs]
        out.append(np.concatenate([e.npvalue() for e in hs + noisy] + [dy.random_normal(3).npvalue()]))
    for o in out[1:]:
        np.testing.assert_array_equal(o, out[0])
    assert (out[0][:12] == 0).sum() > 0          # the masks drop something
