"""affine_transform's bias: forward repeats it over the columns and batch elements of
the output, backward sums the output gradient's columns into it. One loop serves a
whole batch when every node has the same unbatched bias and the batch's gradients are
contiguous; other batches go node by node (a bias per node, a batched bias, part of a
batch in backward), and a bias gradient not written yet is assigned. Each case is
checked against numpy under every strategy: the values, and the bias parameter's
gradient (the sum of every output gradient column that the bias reached)."""
import numpy as np
import pytest

import autobatch as dy

# deliberately a subset of the built-in strategies (not the shared `strategy` fixture of
# tests/conftest.py): the unbatched reference and the two basic batching schedules
# reach the bias paths of these small fixed graphs; kept to this set of cases
STRATEGIES = ["none", "depth", "agenda"]
N = 4                   # instances


def rand(seed, *shape):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def tensor(a, bs):
    """a (rows, cols, bs) as an expression: a batch of bs, or unbatched when bs == 1."""
    a = a[:, 0] if a.shape[1] == 1 else a
    return dy.inputTensor(a[..., 0] if bs == 1 else a, batched=bs > 1)


# case: (x columns, x batch, bias batch, bias of instance i from the parameter b: an
# expression and its numpy value, d(bias value)/d(b) elementwise)
CASES = {
    "shared": (1, 1, 1, lambda b, i: (b, b.as_array(), 1.0)),
    "shared_columns": (3, 1, 1, lambda b, i: (b, b.as_array(), 1.0)),
    "shared_batched_x": (1, 3, 1, lambda b, i: (b, b.as_array(), 1.0)),
    # one computed bias for all: its gradient is assigned by the batch's one loop
    "computed_shared": (2, 2, 1, None),
    "bias_per_instance": (2, 1, 1, lambda b, i: (b * (1.0 + i), b.as_array() * (1.0 + i), 1.0 + i)),
    # a batched bias: batch element k of the output gets batch element k of the bias
    "batched_bias": (1, 3, 3, lambda b, i: (
        dy.inputTensor(rand(50 + i, 3, 3), batched=True) + b,
        rand(50 + i, 3, 3)[:, None, :] + b.as_array()[:, None, None], 1.0)),
    # an unbatched bias repeated over the batch of its node's output
    "broadcast_over_batch": (2, 3, 1, lambda b, i: (dy.tanh(b), np.tanh(b.as_array()),
                                                  1 - np.tanh(b.as_array()) ** 2)),
}


def model(seed=0):
    pc = dy.ParameterCollection(seed=seed)
    return pc, pc.add_parameters((3, 4)), pc.add_parameters(3)


def build(case, W, b):
    """The outputs, their numpy values, and the instances' biases' d/db factors."""
    cols, xbs, _, bias_of = CASES[case]
    if bias_of is None:
        shared = dy.tanh(b)
        t = np.tanh(b.as_array())
        bias_of = lambda b, i: (shared, t, 1 - t ** 2)
    outs, values, factors = [], [], []
    for i in range(N):
        bias, bias_value, factor = bias_of(b, i)
        x = rand(10 + i, 4, cols, xbs)
        outs.append(dy.affine_transform([bias, W, tensor(x, xbs)]))
        bv = bias_value if bias_value.ndim == 3 else bias_value[:, None, None]
        values.append(bv + np.einsum("rk,kcb->rcb", W.as_array(), x))
        factors.append(factor)
    return outs, values, factors


def projections(values):
    return [rand(100 + i, *v.shape) for i, v in enumerate(values)]


def loss_of(outs, R):
    """sum_i <out_i, R_i>: the gradient of out_i is R_i."""
    return dy.esum([dy.sum_batches(dy.sum_elems(dy.cmult(o, tensor(r, r.shape[2]))))
                    for o, r in zip(outs, R)])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_bias_values_and_gradient(case, strategy):
    pc, W, b = model()
    dy.renew_cg(strategy=strategy)
    outs, values, factors = build(case, W, b)
    R = projections(values)
    loss = loss_of(outs, R)
    loss.value()
    for o, v in zip(outs, values):
        got = np.asarray(o.npvalue(), dtype=np.float64).reshape(v.shape)
        np.testing.assert_allclose(got, v, rtol=1e-5, atol=1e-6)
    b.grad[...] = 0
    loss.backward()
    # each instance's bias gets the sum over its output's columns (and, unbatched,
    # its batch elements) of the output gradient R_i
    expected = sum(np.asarray(f) * r.sum(axis=(1, 2)) for f, r in zip(factors, R))
    np.testing.assert_allclose(b.grad_as_array(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strategy", ["depth", "agenda"])
def test_backward_through_part_of_a_batch(strategy):
    """Backward from two of four outputs that ran as one batch: the batch's gradients
    are not one block, so the bias sums node by node, those two only."""
    pc, W, b = model(1)
    dy.renew_cg(strategy=strategy)
    outs, values, factors = build("shared_columns", W, b)
    R = projections(values)
    part = loss_of([outs[0], outs[2]], [R[0], R[2]])
    (part + loss_of(outs, R)).value()
    sizes = dy.cg().stats()["batch_sizes"]["affine_transform"]
    assert sizes == {N: 1}
    b.grad[...] = 0
    part.backward()
    np.testing.assert_allclose(b.grad_as_array(), R[0].sum(axis=(1, 2)) + R[2].sum(axis=(1, 2)),
                               rtol=1e-5, atol=1e-5)


def test_a_shared_bias_split_over_threads_gives_the_one_thread_bits():
    """A batch's shared bias on two threads (forced: AUTOBATCH_TEST_SPLIT's thresholds):
    repeated into ranges of columns, its gradient summed over ranges of its rows;
    rows 100 (not a multiple of the 16-float ranges), 300 instances."""
    from autobatch.runtime.threads import set_split_thresholds
    pc = dy.ParameterCollection(seed=1)
    W, b = pc.add_parameters((100, 8)), pc.add_parameters(100)
    xs = [rand(10 + i, 8) for i in range(300)]
    cs = [rand(1000 + i, 100) for i in range(300)]

    def run():
        dy.renew_cg(strategy="agenda")
        ys = [dy.affine_transform([b, W, dy.inputVector(x)]) for x in xs]
        loss = dy.esum([dy.dot_product(dy.inputVector(c), y) for c, y in zip(cs, ys)])
        loss.forward()          # one batch of 300 products (packed kernel: split exactly)
        values = np.stack([y.npvalue() for y in ys])
        loss.backward()
        grad = b.grad.copy()
        b.grad[...] = 0
        W.grad[...] = 0
        return values, grad

    before = dy.get_num_threads()
    old = set_split_thresholds(1.0, 1)
    try:
        dy.set_num_threads(1)
        one = run()
        dy.set_num_threads(2)
        two = run()
    finally:
        dy.set_num_threads(before)
        set_split_thresholds(*old)
    from autobatch.kernels.packed import packed_isa
    if packed_isa() != "off":       # a split sgemm may differ in the last bits
        np.testing.assert_array_equal(two[0], one[0])
    np.testing.assert_allclose(two[0], one[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(two[1], one[1])     # the bias gradient: sum of the c's
    np.testing.assert_allclose(one[1], np.sum(cs, axis=0), rtol=1e-5, atol=1e-4)
