"""The cases of tests/data/dynet_ops_select_linalg.npz, shared by the script that runs them in
DyNet (make_dynet_ops_select_linalg_fixture.py) and the test that runs them here
(tests/ops/test_dynet_ops_select_linalg.py). A case: its name, its inputs as (shape, batched) and the
expression it builds from them with the module `dy` (DyNet's or ours). `write_fixture`
and `check_case` are the one way such a fixture is made and read (the vanilla LSTM
fixture uses them too)."""
import numpy as np

T3 = (2, 3, 4)

CASES = [
    ("select_rows", [((4, 3), False)], lambda dy, x: dy.select_rows(x[0], [2, 0, 2])),
    ("select_rows_batched", [((3, 2, 2), True)], lambda dy, x: dy.select_rows(x[0], [1])),
    ("select_cols", [((3, 4), False)], lambda dy, x: dy.select_cols(x[0], [3, 1, 3])),
    ("select_cols_batched", [((2, 3, 2), True)], lambda dy, x: dy.select_cols(x[0], [0, 2])),
    ("pickrange", [((5, 2), False)], lambda dy, x: dy.pickrange(x[0], 1, 4)),
    ("strided_select", [((4, 6), False)], lambda dy, x: dy.strided_select(x[0], [2, 2], [0, 1], [4, 6])),
    ("strided_select_batch", [((4, 3, 3), True)],
     lambda dy, x: dy.strided_select(x[0], [1, 2, 2], [1, 0, 0], [4, 3, 3])),
    ("strided_select_ceil", [((7,), False)], lambda dy, x: dy.strided_select(x[0], [3], [1], [7])),
    ("fold_rows", [((4, 3), False)], lambda dy, x: dy.fold_rows(x[0])),
    ("fold_rows_3", [((6,), False)], lambda dy, x: dy.fold_rows(x[0], 3)),
    ("sparsemax", [((5,), False)], lambda dy, x: dy.sparsemax(x[0])),
    ("constrained_softmax", [((4,), False), ((4,), False)],
     lambda dy, x: dy.constrained_softmax(x[0], x[1])),
    ("inverse", [((3, 3), False)], lambda dy, x: dy.inverse(x[0])),
    ("logdet", [((3, 3), False)], lambda dy, x: dy.logdet(x[0])),
    ("trace_of_product", [((3, 2), False), ((3, 2), False)],
     lambda dy, x: dy.trace_of_product(x[0], x[1])),
    ("kmh_ngram", [((3, 5), False)], lambda dy, x: dy.kmh_ngram(x[0], 2)),
    ("filter1d_narrow", [((3, 5), False), ((3, 2), False)], lambda dy, x: dy.filter1d_narrow(x[0], x[1])),
    ("filter1d_narrow_3d", [((2, 6), False), ((2, 3, 4), False)],
     lambda dy, x: dy.filter1d_narrow(x[0], x[1])),
    ("kmax_pooling", [((3, 6), False)], lambda dy, x: dy.kmax_pooling(x[0], 3)),
    ("kmax_pooling_d0", [((5, 3), False)], lambda dy, x: dy.kmax_pooling(x[0], 2, 0)),
    ("kmax_pooling_batched", [((2, 5, 2), True)], lambda dy, x: dy.kmax_pooling(x[0], 2)),
    ("circ_conv", [((5,), False), ((5,), False)], lambda dy, x: dy.circ_conv(x[0], x[1])),
    ("circ_corr", [((5,), False), ((5,), False)], lambda dy, x: dy.circ_corr(x[0], x[1])),
    # DyNet 2.2's contract3d_1d without a bias adds its result to whatever its output
    # memory held (a second graph gives twice the value): compared here through
    # contract3d_1d_bias, whose output DyNet initialises (ours are one op)
    ("contract3d_1d_bias_batched_y", [(T3, False), ((4, 2), True), ((2, 3), False)],
     lambda dy, x: dy.contract3d_1d_bias(x[0], x[1], x[2])),
    ("contract3d_1d_bias", [(T3, False), ((4,), False), ((2, 3), False)],
     lambda dy, x: dy.contract3d_1d_bias(x[0], x[1], x[2])),
    ("contract3d_1d_1d", [(T3, False), ((4,), False), ((3,), False)],
     lambda dy, x: dy.contract3d_1d_1d(x[0], x[1], x[2])),
    ("contract3d_1d_1d_bias", [(T3, False), ((4,), False), ((3,), False), ((2,), False)],
     lambda dy, x: dy.contract3d_1d_1d_bias(x[0], x[1], x[2], x[3])),
]


def inputs(name, specs, seed=0):
    """The input arrays of a case (numpy layout; the last axis is the batch when
    batched): well-conditioned matrices for inverse/logdet, distinct values for
    kmax_pooling, a capped and an uncapped entry for constrained_softmax."""
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    xs = [rng.uniform(-1, 1, shape) for shape, _ in specs]
    if name in ("inverse", "logdet"):
        xs[0] = xs[0] * 0.3 + 2 * np.eye(3)
    if name == "constrained_softmax":
        xs = [np.array([0.5, 1.2, -0.3, 1.0]), np.array([0.3, 0.3, 0.5, 0.5])]
    return xs


def run(dy, name, specs, build, xs, r=None):
    """Build the case in module dy; its output, the weights r and the gradients."""
    dy.renew_cg()
    X = [dy.inputTensor(x, batched=b) for x, (_, b) in zip(xs, specs)]
    Y = build(dy, X)
    dims, bs = Y.dim()
    y = Y.npvalue().reshape(dims + (bs,))
    if r is None:
        r = np.random.default_rng(1).uniform(0.5, 1.5, y.shape)
    R = dy.inputTensor(r if bs > 1 else r[..., 0], batched=bs > 1)
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(Y, R)))
    loss.value()
    loss.backward(full=True)
    return y, r, [x.gradient().reshape(xv.shape) for x, xv in zip(X, xs)]


def write_fixture(dy, cases, path):
    """Run every case in DyNet and save its inputs, weights, output and gradients to path:
    "<case>/x<k>", "<case>/r", "<case>/y", "<case>/dx<k>"."""
    out = {}
    for name, specs, build in cases:
        xs = inputs(name, specs)
        y, r, grads = run(dy, name, specs, build, xs)
        out[f"{name}/y"], out[f"{name}/r"] = y, r
        for k, (x, g) in enumerate(zip(xs, grads)):
            out[f"{name}/x{k}"], out[f"{name}/dx{k}"] = x, g
    np.savez_compressed(path, **out)
    print(f"wrote {len(cases)} cases")


def check_case(dy, fixture, name, specs, build):
    """Run a case here on the fixture's inputs and weights; its output and every
    gradient must be the fixture's."""
    xs = [fixture[f"{name}/x{k}"] for k in range(len(specs))]
    y, _, grads = run(dy, name, specs, build, xs, fixture[f"{name}/r"])
    np.testing.assert_allclose(y, fixture[f"{name}/y"], rtol=1e-5, atol=1e-5)
    for k, g in enumerate(grads):
        np.testing.assert_allclose(g, fixture[f"{name}/dx{k}"], rtol=1e-4, atol=1e-5,
                                   err_msg=f"gradient of input {k}")
