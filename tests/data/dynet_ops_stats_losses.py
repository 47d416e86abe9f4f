"""The cases of dynet_ops_stats_losses.npz: DyNet functions of statistics, losses and distances on a few shapes.
Each case is (name, f(dy, xs) -> Expression, inputs); an input is (array, batched).
make_dynet_ops_stats_losses_fixture.py runs them with DyNet (import dynet as dy) and records the
output's dims, value and the gradients of every input under a fixed random projection;
tests/ops/test_dynet_ops_stats_losses.py runs the same cases with autobatch and compares."""
import numpy as np

R = np.random.RandomState(8)
V = np.array([0.3, -2.0, 1.5, 0.1])
W = np.array([0.2, 0.5, -1.0, 0.1])          # ties with V at index 3
M = np.arange(6.0).reshape(2, 3) ** 1.5 - 2.0
S = np.array([[0.1, 0.5, 2.0], [0.3, 0.2, -1.0], [1.0, 0.0, 0.5]])
HALVES = np.array([0.5, 1.5, -0.5, -2.5, 2.4, -0.2, 3.7])


def vec(a):
    return [(np.asarray(a, dtype=np.float64), False)]


CASES = [
    ("lgamma", lambda dy, x: dy.lgamma(x[0]),
     vec([0.5, 1.5, 3.0, -0.5, 10.0, 0.01, -1.5, -2.7, 100.0, 0.9])),
    ("bmax_ties", lambda dy, x: dy.bmax(x[0], x[1]), vec(V) + vec(W)),
    ("bmin_ties", lambda dy, x: dy.bmin(x[0], x[1]), vec(V) + vec(W)),
    ("bmax_mat", lambda dy, x: dy.bmax(x[0], x[1]), vec(M) + vec(M[::-1])),
    ("emax_ties", lambda dy, x: dy.emax([x[0], x[1], x[2]]), vec(V) + vec(W) + vec(-V)),
    ("round_zero", lambda dy, x: dy.round(x[0], "zero_gradient"), vec(HALVES)),
    ("round_straight", lambda dy, x: dy.round(x[0], "straight_through_gradient"), vec(HALVES)),
    ("ceil_straight", lambda dy, x: dy.ceil(x[0], "straight_through_gradient"), vec(HALVES)),
    ("floor_zero", lambda dy, x: dy.floor(x[0], "zero_gradient"), vec(HALVES)),
    ("cumsum_d0", lambda dy, x: dy.cumsum(x[0]), vec(V)),
    ("cumsum_d1", lambda dy, x: dy.cumsum(x[0], 1), vec(M)),
    ("cumsum_d2_3d", lambda dy, x: dy.cumsum(x[0], d=2), vec(R.randn(2, 3, 2))),
    ("cumsum_batched", lambda dy, x: dy.cumsum(x[0], 0), [(R.randn(3, 2), True)]),
    ("logsumexp_dim_d0", lambda dy, x: dy.logsumexp_dim(x[0]), vec(M)),
    ("logsumexp_dim_d1", lambda dy, x: dy.logsumexp_dim(x[0], d=1), vec(M)),
    ("logsumexp_dim_batched", lambda dy, x: dy.logsumexp_dim(x[0], 0), [(R.randn(3, 2, 4), True)]),
    ("log_softmax_restrict", lambda dy, x: dy.log_softmax(x[0], restrict=[0, 2]), vec(V)),
    ("log_softmax_restrict_one", lambda dy, x: dy.log_softmax(x[0], restrict=[1]), vec(V)),
    ("hinge_dim_d0", lambda dy, x: dy.hinge_dim(x[0], [0, 2, 1]), vec(S)),
    ("hinge_dim_d1_m", lambda dy, x: dy.hinge_dim(x[0], [0, 2, 1], d=1, m=0.5), vec(S)),
    ("hinge_dim_rect", lambda dy, x: dy.hinge_dim(x[0], [0, 1, 1], 1, 1.0), vec(R.rand(3, 2))),
    ("hinge_dim_batched", lambda dy, x: dy.hinge_dim(x[0], [0, 2, 1], d=0), [(R.rand(3, 3, 2), True)]),
    ("moment_elems_r3", lambda dy, x: dy.moment_elems(x[0], 3), vec(M)),
    ("moment_dim_r2", lambda dy, x: dy.moment_dim(x[0], [1], 2, False), vec(M)),
    ("moment_dim_r3_n", lambda dy, x: dy.moment_dim(x[0], [0], 3, False, 5), vec(M)),
    ("moment_dim_b", lambda dy, x: dy.moment_dim(x[0], [0], 2, True), [(R.randn(2, 3, 2), True)]),
    ("moment_batches_r2", lambda dy, x: dy.moment_batches(x[0], 2), [(M, True)]),
    ("mean_batches", lambda dy, x: dy.mean_batches(x[0]), [(R.randn(2, 2, 3), True)]),
    ("std_elems", lambda dy, x: dy.std_elems(x[0]), vec(M)),
    ("std_elems_batched", lambda dy, x: dy.std_elems(x[0]), [(R.randn(3, 2, 3), True)]),
    ("std_dim_d1", lambda dy, x: dy.std_dim(x[0], [1], False), vec(M)),
    ("std_dim_d0_b", lambda dy, x: dy.std_dim(x[0], [0], True), [(R.randn(2, 3, 2), True)]),
    ("std_batches", lambda dy, x: dy.std_batches(x[0]), [(M, True)]),
    ("layer_norm", lambda dy, x: dy.layer_norm(x[0], x[1], x[2]),
     vec([0.3, -1.0, 2.0, 0.5]) + vec([1.0, 2.0, 0.5, 1.5]) + vec([0.1, 0.2, 0.3, 0.4])),
    ("layer_norm_mat", lambda dy, x: dy.layer_norm(x[0], x[1], x[2]),
     vec(M) + vec(R.rand(2, 3) + 0.5) + vec(R.randn(2, 3))),
    ("layer_norm_batched", lambda dy, x: dy.layer_norm(x[0], x[1], x[2]),
     [(R.randn(4, 3), True)] + vec(R.rand(4) + 0.5) + vec(R.randn(4))),
    ("weight_norm", lambda dy, x: dy.weight_norm(x[0], x[1]), vec(M) + vec([1.7])),
    ("pairwise_rank_loss", lambda dy, x: dy.pairwise_rank_loss(x[0], x[1], m=0.5),
     vec([[0.3, 1.0, 2.0]]) + vec([[0.2, 0.8, 0.1]])),
    ("pairwise_rank_loss_batched", lambda dy, x: dy.pairwise_rank_loss(x[0], x[1]),
     [(np.array([[0.3, 1.0]]), True), (np.array([[0.2, 0.5]]), True)]),
    ("poisson_loss", lambda dy, x: dy.poisson_loss(x[0], 3), vec([0.7])),
    ("poisson_loss_0", lambda dy, x: dy.poisson_loss(x[0], 0), vec([-0.4])),
    ("huber_distance", lambda dy, x: dy.huber_distance(x[0], x[1], c=1.0), vec(V) + vec(W)),
    ("huber_distance_default", lambda dy, x: dy.huber_distance(x[0], x[1]), vec(M) + vec(M[::-1] * 0.3)),
    ("l1_distance", lambda dy, x: dy.l1_distance(x[0], x[1]), vec(V) + vec(W)),
    ("flip_gradient", lambda dy, x: dy.flip_gradient(x[0]), vec(M)),
    ("dropout_dim_p0", lambda dy, x: dy.dropout_dim(x[0], 1, 0.0), vec(M)),
    ("dropout_batch_p0", lambda dy, x: dy.dropout_batch(x[0], 0.0), [(M, True)]),
    ("block_dropout_p0", lambda dy, x: dy.block_dropout(x[0], 0.0), vec(M)),
    ("block_dropout_p1", lambda dy, x: dy.block_dropout(x[0], 1.0), vec(M)),
    # more shapes (3-d, batched, two reduced dimensions) where DyNet supports them
    ("bmax_3d_batched", lambda dy, x: dy.bmax(x[0], x[1]),
     [(R.randn(2, 3, 2, 2), True), (R.randn(2, 3, 2, 2), True)]),
    ("cumsum_d1_3d_batched", lambda dy, x: dy.cumsum(x[0], 1), [(R.randn(2, 3, 2, 3), True)]),
    ("logsumexp_dim_vec", lambda dy, x: dy.logsumexp_dim(x[0]), vec(V * 10)),
    ("moment_dim_d02_3d", lambda dy, x: dy.moment_dim(x[0], [0, 2], 3, False), vec(R.randn(2, 3, 2))),
    ("std_dim_d01_3d", lambda dy, x: dy.std_dim(x[0], [0, 1], False), vec(R.randn(2, 3, 2))),
    ("std_dim_d1_3d_batched", lambda dy, x: dy.std_dim(x[0], [1], False), [(R.randn(2, 3, 2, 2), True)]),
    ("mean_batches_vec", lambda dy, x: dy.mean_batches(x[0]), [(R.randn(4, 3), True)]),
    ("layer_norm_col", lambda dy, x: dy.layer_norm(x[0], x[1], x[2]),
     vec(R.randn(3, 1)) + vec(R.rand(3, 1) + 0.5) + vec(R.randn(3, 1))),
    ("weight_norm_vec", lambda dy, x: dy.weight_norm(x[0], x[1]), vec(V) + vec([0.4])),
    ("l1_distance_mat", lambda dy, x: dy.l1_distance(x[0], x[1]), vec(M) + vec(M.T.reshape(2, 3))),
    ("huber_distance_3d", lambda dy, x: dy.huber_distance(x[0], x[1], 0.5),
     vec(R.randn(2, 2, 2)) + vec(R.randn(2, 2, 2))),
    ("dropout_dim_p0_3d", lambda dy, x: dy.dropout_dim(x[0], 2, 0.0), vec(R.randn(2, 3, 2))),
    ("lgamma_mat_batched", lambda dy, x: dy.lgamma(x[0]), [(R.rand(2, 3, 2) * 5 + 0.1, True)]),
]


def run(dy, f, inputs, seed):
    """dims, value (npvalue) and input gradients of sum(out * r), r fixed by seed."""
    dy.renew_cg()
    xs = [dy.inputTensor(a, batched=b) for a, b in inputs]
    out = f(dy, xs)
    dims, bs = out.dim()
    layout = tuple(dims) + ((bs,) if bs > 1 else ())
    r = np.random.RandomState(seed).randn(*layout)
    loss = dy.sum_batches(dy.sum_elems(dy.cmult(out, dy.inputTensor(r, batched=bs > 1))))
    value = np.asarray(out.npvalue(), dtype=np.float64).reshape(layout)
    loss.forward()
    loss.backward(full=True)
    grads = [np.asarray(x.gradient(), dtype=np.float64) for x in xs]
    return (tuple(dims), bs), value, grads


def record(dy, cases, path):
    """Run every case with dy and save "<case>/input<i>" (input i as given), "<case>/dims"
    (the shape then the batch size), "<case>/value" and "<case>/grad<i>" (the gradient of
    input i, as run gives it) to the .npz file path."""
    out = {}
    for k, (name, f, inputs) in enumerate(cases):
        (dims, bs), value, grads = run(dy, f, inputs, k)
        for i, (a, _) in enumerate(inputs):
            out[f"{name}/input{i}"] = a
        out[f"{name}/dims"] = np.array(list(dims) + [bs])
        out[f"{name}/value"] = value
        for i, g in enumerate(grads):
            out[f"{name}/grad{i}"] = g
    np.savez_compressed(path, **out)
    print(f"{len(cases)} cases written")
