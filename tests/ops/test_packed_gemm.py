"""Products with a parameter's W packed once per pass (autobatch/kernels/packed.pyx).

The kernel against float64 and sgemm (a tolerance: its bits follow OpenBLAS's only on
some shapes) on both instruction sets, at the tails of its panels (rows) and register
tiles (columns), K cut in blocks (> 768), two columns (one goes to sgemv); the same bits however the
columns are batched or split over threads; and the packed copies forgotten whenever a
parameter may have changed (between passes, after a Python strategy's select())."""
import numpy as np
import pytest

import autobatch as dy
import autobatch.testing
from autobatch.kernels import packed as _packed
from autobatch.kernels.gemm import gemm_for_tests
from autobatch.runtime.threads import set_split_thresholds



def runnable(isa):
    old = _packed.set_packed_isa("off")
    try:
        _packed.set_packed_isa(isa)
        return True
    except ValueError:
        return False
    finally:
        _packed.set_packed_isa(old)


ISAS = [isa for isa in ("avx512", "avx2") if runnable(isa)]
needs_kernel = pytest.mark.skipif(not ISAS, reason="no AVX2 or AVX-512 on this processor")


@pytest.fixture(params=ISAS or ["off"])
def isa(request):
    old = _packed.set_packed_isa(request.param)
    yield request.param
    _packed.set_packed_isa(old)


def operands(ta, m, n, k, seed):
    rng = np.random.default_rng(seed)
    A = np.asfortranarray(rng.standard_normal((m, k) if ta == "N" else (k, m), dtype=np.float32))
    B = np.asfortranarray(rng.standard_normal((k, n), dtype=np.float32))
    C = np.asfortranarray(rng.standard_normal((m, n), dtype=np.float32))
    return A, B, C


# rows: one panel, tails of 32- and 16-row panels; columns: 1, tails of 12 and 6 wide
# tiles; k: one block, the halved remainder (385..767), several blocks, odd sizes
SHAPES = [(32, 2, 5), (33, 7, 17), (47, 13, 384), (64, 12, 385), (100, 25, 769),
          (1024, 3, 256), (256, 64, 512), (79, 6, 1000), (256, 2, 1500), (48, 11, 2050)]


@needs_kernel
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("ta", "NT")
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_the_packed_product_is_as_accurate_as_sgemm(isa, m, n, k, ta, beta):
    A, B, C = operands(ta, m, n, k, seed=m * 7 + n * 3 + k)
    a64 = A.astype(np.float64) if ta == "N" else A.T.astype(np.float64)
    want = a64 @ B + beta * C
    scale = np.abs(a64) @ np.abs(B) + beta * np.abs(C)     # the scale of gemm's error bound
    got, ref = C.copy(order="F"), C.copy(order="F")
    assert _packed.packed_gemm_for_tests(ta, A, B, beta, got)
    gemm_for_tests(ta, "N", 1.0, A, B, beta, ref)
    err, err_sgemm = np.max(np.abs(got - want) / scale), np.max(np.abs(ref - want) / scale)
    assert err < 4e-7 and err < 10 * err_sgemm + 1e-7, (err, err_sgemm)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * np.sqrt(k))


@pytest.fixture
def blas_avx512():
    """Limits as beside an OpenBLAS kernel of AVX-512 (SkylakeX), whatever this machine's."""
    old = _packed.configure_for_blas("SkylakeX")
    yield
    _packed.configure_for_blas("Haswell" if old else "SkylakeX")


def test_small_and_wide_products_stay_on_sgemm(isa, blas_avx512):
    A, B, C = operands("N", 31, 8, 64, seed=1)
    assert not _packed.packed_gemm_for_tests("N", A, B, 0.0, C)
    A, B, C = operands("N", 64, 1, 64, seed=1)          # sgemv
    assert not _packed.packed_gemm_for_tests("N", A, B, 0.0, C)
    A, B, C = operands("T", 64, 1025, 16, seed=1)
    assert not _packed.packed_gemm_for_tests("T", A, B, 0.0, C)
    old = _packed.set_packed_limits(1, 2000)      # (the one-column limit stays)
    try:
        assert _packed.packed_gemm_for_tests("T", A, B, 0.0, C) == bool(ISAS)
    finally:
        _packed.set_packed_limits(*old)


@needs_kernel
@pytest.mark.parametrize("threads", [1, 2])
def test_a_column_does_not_depend_on_its_batch_nor_on_threads(isa, threads):
    before = dy.get_num_threads()
    old = set_split_thresholds(1.0, 1)       # split even these small products
    dy.set_num_threads(threads)
    try:
        A, B, _ = operands("N", 300, 40, 513, seed=2)
        whole = np.zeros((300, 40), dtype=np.float32, order="F")
        assert _packed.packed_gemm_for_tests("N", A, B, 0.0, whole)
        for cols in [slice(0, 2), slice(3, 5), slice(5, 18), slice(12, 40)]:
            part = np.zeros((300, cols.stop - cols.start), dtype=np.float32, order="F")
            _packed.packed_gemm_for_tests("N", A, np.asfortranarray(B[:, cols]), 0.0, part)
            np.testing.assert_array_equal(part, whole[:, cols])
    finally:
        dy.set_num_threads(before)
        set_split_thresholds(*old)


# dW (m x n) = dY (m x k) X^T: rows of dY past one panel and its tails, dW's columns
# (X's rows) at the tiles' tails and past the 256-column chunks, k the stacked columns
GRAD_SHAPES = [(32, 1, 1), (33, 7, 5), (47, 13, 384), (64, 12, 385), (100, 25, 769),
               (256, 300, 64), (79, 6, 1000), (4096, 3, 17), (48, 520, 2050)]


@pytest.fixture
def any_grad_size():
    """The AVX2 kernel on weight gradients of every size (the engine gives it only
    small ones), so that both kernels meet every shape."""
    old = _packed.set_packed_limits(grad_max_elems_avx2=1 << 40)
    yield
    _packed.set_packed_limits(*old)


@needs_kernel
@pytest.mark.parametrize("m,n,k", GRAD_SHAPES)
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_the_packed_weight_gradient_is_as_accurate_as_sgemm(isa, m, n, k, beta, any_grad_size):
    rng = np.random.default_rng(m * 5 + n * 3 + k)
    dY = np.asfortranarray(rng.standard_normal((m, k), dtype=np.float32))
    X = np.asfortranarray(rng.standard_normal((n, k), dtype=np.float32))
    C = np.asfortranarray(rng.standard_normal((m, n), dtype=np.float32))
    want = dY.astype(np.float64) @ X.T.astype(np.float64) + beta * C
    scale = np.abs(dY) @ np.abs(X.T).astype(np.float64) + beta * np.abs(C)
    got, ref = C.copy(order="F"), C.copy(order="F")
    assert _packed.packed_weight_grad_for_tests(dY, X, beta, got)
    gemm_for_tests("N", "T", 1.0, dY, X, beta, ref)
    err, err_sgemm = np.max(np.abs(got - want) / scale), np.max(np.abs(ref - want) / scale)
    assert err < 4e-7 and err < 10 * err_sgemm + 1e-7, (err, err_sgemm)


def test_weight_gradients_of_few_or_very_many_rows_stay_on_sgemm(isa, blas_avx512):
    rng = np.random.default_rng(4)
    for m in (31, 4097):
        dY = np.asfortranarray(rng.standard_normal((m, 8), dtype=np.float32))
        X = np.asfortranarray(rng.standard_normal((16, 8), dtype=np.float32))
        C = np.zeros((m, 16), dtype=np.float32, order="F")
        assert not _packed.packed_weight_grad_for_tests(dY, X, 0.0, C)
        assert not C.any()


@pytest.mark.skipif("avx2" not in ISAS, reason="no AVX2 on this processor")
def test_the_avx2_kernel_leaves_large_weight_gradients_to_sgemm():
    old = _packed.set_packed_isa("avx2")
    try:
        rng = np.random.default_rng(6)
        for n, packed in ((64, True), (65, False)):           # 256 x 64: 16,384 elements
            dY = np.asfortranarray(rng.standard_normal((256, 40), dtype=np.float32))
            X = np.asfortranarray(rng.standard_normal((n, 40), dtype=np.float32))
            dW = np.zeros((256, n), dtype=np.float32, order="F")
            assert _packed.packed_weight_grad_for_tests(dY, X, 0.0, dW) == packed
            assert dW.any() == packed
    finally:
        _packed.set_packed_isa(old)


@needs_kernel
def test_a_split_weight_gradient_has_the_one_thread_bits(any_grad_size):
    before = dy.get_num_threads()
    rng = np.random.default_rng(5)
    dY = np.asfortranarray(rng.standard_normal((300, 700), dtype=np.float32))
    X = np.asfortranarray(rng.standard_normal((90, 700), dtype=np.float32))
    one = np.zeros((300, 90), dtype=np.float32, order="F")
    assert _packed.packed_weight_grad_for_tests(dY, X, 0.0, one)
    old = set_split_thresholds(1.0, 1)
    try:
        for threads in (2, 3):
            dy.set_num_threads(threads)
            split = np.zeros_like(one)
            assert _packed.packed_weight_grad_for_tests(dY, X, 0.0, split)
            np.testing.assert_array_equal(split, one)
    finally:
        dy.set_num_threads(before)
        set_split_thresholds(*old)


@needs_kernel
def test_beside_a_blas_kernel_without_avx512_the_avx512_kernel_takes_every_size(isa):
    old = _packed.configure_for_blas("Haswell")
    try:
        A, B, C = operands("N", 40, 1100, 16, seed=6)
        want = A.astype(np.float64) @ B
        assert _packed.packed_gemm_for_tests("N", A, B, 0.0, C) == (isa == "avx512")
        if isa == "avx512":
            assert _packed.packed_limits()[1:] == (None, None)
            np.testing.assert_allclose(C, want, rtol=1e-4, atol=1e-4)
            dY, X = A[:, :8].copy(order="F"), B[:, :8].copy(order="F")
            tall = np.asfortranarray(np.tile(dY, (110, 1)))            # 4,400 rows
            dW = np.zeros((tall.shape[0], X.shape[0]), dtype=np.float32, order="F")
            assert _packed.packed_weight_grad_for_tests(tall, X, 0.0, dW)
            np.testing.assert_allclose(dW, tall.astype(np.float64) @ X.T, rtol=1e-4, atol=1e-4)
        _packed.configure_for_blas(None)          # a BLAS that does not say: the limits
        assert _packed.packed_limits()[1] == 1024
    finally:
        _packed.configure_for_blas("Haswell" if old else "SkylakeX")


def test_the_isa_can_be_chosen_and_checked():
    old = _packed.set_packed_isa("off")
    try:
        assert _packed.packed_isa() == "off"
        with pytest.raises(ValueError):
            _packed.set_packed_isa("sse9")
        if not runnable("avx512"):
            with pytest.raises(ValueError):
                _packed.set_packed_isa("avx512")
    finally:
        _packed.set_packed_isa(old)


def mlp(x_vals, W, V):
    """A loss over several batches that all use W (forward W, backward W^T)."""
    xs = [dy.inputVector(x) for x in x_vals]
    return dy.esum([dy.sum_elems(V * dy.tanh(W * x)) for x in xs])


def graph_results(W, V, x_vals, strategy="agenda"):
    dy.renew_cg(strategy=strategy)
    loss = mlp(x_vals, W, V)
    value = loss.value()
    loss.backward()
    g = W.grad.copy(), V.grad.copy()
    W.grad[...] = 0
    V.grad[...] = 0
    return value, g


@pytest.fixture
def model():
    pc = dy.ParameterCollection(seed=0)
    W = pc.add_parameters((96, 40))
    V = pc.add_parameters((64, 96))
    rng = np.random.default_rng(3)
    return pc, W, V, [rng.standard_normal(40).astype(np.float32) for _ in range(5)]


@pytest.mark.parametrize("strategy", ["none", "agenda", "depth"])
@pytest.mark.parametrize("inputs", [5, 24])    # dW postponed to the pass's end; at once
def test_graph_results_are_those_of_sgemm(isa, model, strategy, inputs):
    _, W, V, xs = model
    rng = np.random.default_rng(inputs)
    xs = xs + [rng.standard_normal(40).astype(np.float32) for _ in range(inputs - len(xs))]
    got = graph_results(W, V, xs, strategy)
    _packed.set_packed_isa("off")
    want = graph_results(W, V, xs, strategy)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * np.abs(w).max())


WRITES = {
    "set_value": lambda pc, W: W.set_value(W.as_array() * 0.5 + 0.1),
    "values view": lambda pc, W: W.values.__setitem__((0, slice(None)), 2.0),
    "scale": lambda pc, W: W.scale(1.5),
    "clip_inplace": lambda pc, W: W.clip_inplace(-0.05, 0.05),
    "trainer": lambda pc, W: dy.SimpleSGDTrainer(pc, 0.5).update(),
}


@pytest.mark.parametrize("how", list(WRITES))
@pytest.mark.parametrize("backward", [True, False])
def test_a_pass_after_a_parameter_changed_sees_the_new_values(isa, model, how, backward):
    pc, W, V, xs = model
    dy.renew_cg()
    loss = mlp(xs, W, V)
    before = loss.value()
    if backward or how == "trainer":
        loss.backward()
    else:                       # forward passes only: no backward pass in between
        mlp(xs[:2], W, V).value()
    WRITES[how](pc, W)
    after = loss.value(recalculate=True)    # the same graph, a new pass
    dy.renew_cg()
    fresh = mlp(xs, W, V).value()
    assert after != before
    assert after == pytest.approx(fresh, rel=1e-6)


def test_a_parameter_changed_between_batches_keeps_its_values_in_the_pass(isa, model):
    """A Python strategy scales W between the two batches of W: as in DyNet (its
    parameter node copies the values when computed), the graph keeps the values it
    read, in both batches and in the packed weights; a new pass reads the new ones."""
    _, W, _, xs = model
    calls = []

    class OneNodeAtATime(dy.Strategy):
        name = "one-node-at-a-time"

        def select(self, frontier):
            if len(calls) == 1:
                W.scale(2.0)            # between the two batches of W
            calls.append(1)
            s = frontier.signatures()[0]
            return s, frontier.nodes(s)[:1]

    W0 = W.as_array()
    dy.renew_cg(strategy=OneNodeAtATime())
    total = dy.esum([W * dy.inputVector(xs[0]), W * dy.inputVector(xs[1])])
    np.testing.assert_allclose(total.npvalue(), W0 @ xs[0] + W0 @ xs[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(W.as_array(), 2 * W0)
    np.testing.assert_allclose(total.npvalue(recalculate=True), 2 * W0 @ (xs[0] + xs[1]),
                               rtol=1e-5, atol=1e-5)


def cells(W, b, U, xs):
    """Instances of logistic(affine(b, W, x)) then U *: packed forward and backward."""
    return [U * dy.logistic(dy.affine_transform([b, W, dy.inputVector(x)])) for x in xs]


@pytest.fixture
def cell_model():
    pc = dy.ParameterCollection(seed=4)
    W, b, U = pc.add_parameters((40, 6)), pc.add_parameters(40), pc.add_parameters((33, 40))
    rng = np.random.default_rng(4)
    return (W, b, U), [rng.standard_normal(6).astype(np.float32) for _ in range(6)]


def test_packed_products_pass_the_gradient_check(isa, cell_model):
    params, xs = cell_model
    dy.testing.check_grad(lambda: dy.esum([dy.sum_elems(y) for y in cells(*params, xs)]),
                          params, strategy="agenda")


def test_packed_batches_equal_the_unbatched_reference(isa, cell_model):
    params, xs = cell_model
    stats = dy.testing.check_batching_invariance(
        lambda: cells(*params, xs), params, ("depth", "agenda", "critical", "lookahead"),
        rtol=1e-5, atol=1e-5)
    assert stats["agenda"]["batches"] < stats["none"]["batches"]
