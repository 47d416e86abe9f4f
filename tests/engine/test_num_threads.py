"""The engine's threads (dy.set_num_threads): large products split over a pool.

The split gives the numbers of one call up to float32 summation order (BLAS's edge
kernels differ at block boundaries), the same numbers on every run for a thread
count, and the same numbers under every strategy as the unbatched reference does."""
import multiprocessing
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import autobatch as dy
from autobatch.kernels.gemm import gemm_for_tests
from autobatch.model import update_rules
from autobatch.runtime.threads import set_split_thresholds


@pytest.fixture
def two_threads():
    before = dy.get_num_threads()
    dy.set_num_threads(2)
    yield
    dy.set_num_threads(before)


def product(ta, tb, m, n, k, beta, seed):
    rng = np.random.default_rng(seed)
    A = np.asfortranarray(rng.standard_normal((m, k) if ta == "N" else (k, m), dtype=np.float32))
    B = np.asfortranarray(rng.standard_normal((k, n) if tb == "N" else (n, k), dtype=np.float32))
    C = np.asfortranarray(rng.standard_normal((m, n), dtype=np.float32))
    a64 = A.astype(np.float64) if ta == "N" else A.T.astype(np.float64)
    b64 = B.astype(np.float64) if tb == "N" else B.T.astype(np.float64)
    return A, B, C, a64 @ b64 + beta * C.astype(np.float64)


SHAPES = [(256, 64, 512), (1024, 8, 512), (8, 1024, 512), (512, 1, 2048), (1, 512, 2048),
          (2048, 700, 1), (37, 700, 129), (700, 37, 129), (10000, 48, 256), (17, 17, 4096),
          (16, 16, 16)]        # the last is below the size that splits


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("ta", "NT")
@pytest.mark.parametrize("tb", "NT")
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_a_split_product_is_the_product(two_threads, m, n, k, ta, tb, beta):
    A, B, C, want = product(ta, tb, m, n, k, beta, seed=m * 7 + n * 3 + k)
    first = C.copy(order="F")
    gemm_for_tests(ta, tb, 1.0, A, B, beta, first)
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-3 * np.sqrt(k))
    for _ in range(3):          # whichever thread computes which block: the same bits
        again = C.copy(order="F")
        gemm_for_tests(ta, tb, 1.0, A, B, beta, again)
        np.testing.assert_array_equal(again, first)


def test_a_split_product_is_close_to_the_one_thread_product():
    A, B, C, _ = product("N", "N", 300, 77, 513, 1.0, seed=5)
    out = {}
    before = dy.get_num_threads()
    try:
        for threads in (1, 2, 3):
            dy.set_num_threads(threads)
            out[threads] = C.copy(order="F")
            gemm_for_tests("N", "N", 1.0, A, B, 1.0, out[threads])
    finally:
        dy.set_num_threads(before)
    for threads in (2, 3):
        np.testing.assert_allclose(out[threads], out[1], rtol=1e-5, atol=1e-4)


def test_gemm_for_tests_checks_shapes():
    A = np.zeros((4, 3), np.float32, order="F")
    with pytest.raises(ValueError, match="shapes"):
        gemm_for_tests("N", "N", 1.0, A, A, 0.0, np.zeros((4, 3), np.float32, order="F"))


@pytest.mark.parametrize("bad", [0, -1, 65])
def test_set_num_threads_refuses_bad_counts(bad):
    with pytest.raises(ValueError, match="threads must be between 1 and 64"):
        dy.set_num_threads(bad)


def test_set_num_threads_is_what_get_num_threads_says():
    before = dy.get_num_threads()
    try:
        for n in (3, 1, 2):
            dy.set_num_threads(n)
            assert dy.get_num_threads() == n
    finally:
        dy.set_num_threads(before)


def test_the_environment_sets_the_threads_at_import(tmp_path):
    code = "import autobatch as dy; print(dy.get_num_threads())"
    # run away from the source tree (its uncompiled package would shadow the installed one)
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(dy.__file__)))
    env = dict(os.environ, AUTOBATCH_NUM_THREADS="3", PYTHONPATH=package_parent)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert out.stdout.strip() == "3"
    env["AUTOBATCH_NUM_THREADS"] = "two"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    assert bad.returncode != 0 and "AUTOBATCH_NUM_THREADS must be a positive integer" in bad.stderr


# -- training: a model whose products are large enough to split

H, IN, N_INST = 192, 160, 24


def train(strategy, steps=3, seed=3):
    """Losses and final weights of a small tanh-MLP + Tree-LSTM-like gate model."""
    pc = dy.ParameterCollection(seed=seed)
    W = [pc.add_parameters((H, IN)) for _ in range(3)]
    U = pc.add_parameters((H, 2 * H))
    b = pc.add_parameters(H)
    O = pc.add_parameters((7, H))
    trainer = dy.SimpleSGDTrainer(pc, 0.05)
    rng = np.random.default_rng(seed)
    data = [[rng.standard_normal(IN).astype(np.float32) for _ in range(int(rng.integers(1, 5)))]
            for _ in range(N_INST)]
    losses = []
    for _ in range(steps):
        dy.renew_cg(strategy=strategy)
        per = []
        for i, xs in enumerate(data):
            h = dy.zeros(H)
            for x in xs:
                v = dy.inputVector(x)
                g = [dy.logistic(w * v + b) for w in W]
                h = dy.cmult(g[0], dy.tanh(U * dy.concatenate([h, g[1]]) + b)) + dy.cmult(g[2], h)
            per.append(dy.pickneglogsoftmax(O * h, i % 7))
        loss = dy.esum(per)
        losses.append(loss.value())
        loss.backward()
        trainer.update()
    return np.array(losses), [w.as_array() for w in W] + [U.as_array(), O.as_array()]


def test_training_on_two_threads_gives_the_one_thread_numbers(strategy):
    before = dy.get_num_threads()
    try:
        dy.set_num_threads(1)
        losses1, weights1 = train(strategy)
        dy.set_num_threads(2)
        losses2, weights2 = train(strategy)
        again, weights_again = train(strategy)
    finally:
        dy.set_num_threads(before)
    np.testing.assert_allclose(losses2, losses1, rtol=1e-5)
    for w2, w1 in zip(weights2, weights1):
        np.testing.assert_allclose(w2, w1, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(again, losses2)       # deterministic for a thread count
    for w, w2 in zip(weights_again, weights2):
        np.testing.assert_array_equal(w, w2)


def test_python_threads_share_the_pool_and_get_their_numbers(two_threads):
    alone = train("agenda")
    results = {}

    def run(k):
        results[k] = train("agenda")

    threads = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):        # a graph finding the pool busy runs its products alone
        np.testing.assert_allclose(results[k][0], alone[0], rtol=1e-5)


def _child_product(queue):
    A, B, C, want = product("N", "N", 512, 64, 512, 0.0, seed=1)
    gemm_for_tests("N", "N", 1.0, A, B, 0.0, C)
    queue.put(float(np.abs(C - want).max()))


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_child_computes_without_the_workers(two_threads):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_child_product, args=(queue,))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert queue.get(timeout=5) < 1e-2


@pytest.mark.parametrize("trainer", [dy.SimpleSGDTrainer, dy.MomentumSGDTrainer, dy.AdamTrainer,
                                     dy.AmsgradTrainer])
def test_a_large_parameter_updates_on_two_threads_as_on_one(trainer):
    """A parameter of more than 2^16 values, its update split in ranges over the threads
    (set_split_min: by default updates are not split), gets the one-thread numbers (the
    products stay whole, so that both runs get the same gradients)."""
    def run(threads):
        before = dy.get_num_threads()
        dy.set_num_threads(threads)
        thresholds = set_split_thresholds(1e30, 2**62)
        split_min = update_rules.set_split_min(1 << 16)
        try:
            pc = dy.ParameterCollection(seed=4)
            W = pc.add_parameters((301, 257))
            t = trainer(pc)
            rng = np.random.default_rng(2)
            for _ in range(3):
                dy.renew_cg()
                x = dy.inputVector(rng.standard_normal(257).astype(np.float32))
                dy.squared_norm(W * x - 0.5).backward()
                t.update()
            return W.as_array()
        finally:
            update_rules.set_split_min(split_min)
            set_split_thresholds(*thresholds)
            dy.set_num_threads(before)
    np.testing.assert_array_equal(run(2), run(1))


def test_updates_are_not_split_by_default():
    old = update_rules.set_split_min(1)
    update_rules.set_split_min(old)
    assert old == sys.maxsize
