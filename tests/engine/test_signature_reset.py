"""A new graph forgets the signatures of the last one, also when the signature table
grew for a large graph and a small one then clears only its own slots (sig_reset)."""
import numpy as np

import autobatch as dy


def distinct_shapes(n):
    # one signature per node: tanh of inputs of n different sizes
    dy.renew_cg()
    xs = [dy.tanh(dy.inputVector(np.full(k + 1, 0.1, dtype=np.float32))) for k in range(n)]
    dy.esum([dy.sum_elems(x) for x in xs]).value()
    return dy.cg().stats()["signatures"]


def small_graph(seed):
    """Eight instances of one cell: the same few signatures, each batched 8 wide."""
    rng = np.random.default_rng(seed)
    dy.renew_cg()
    W = dy.inputTensor(rng.standard_normal((3, 4)).astype(np.float32))
    xs = [dy.inputVector(rng.standard_normal(4).astype(np.float32)) for _ in range(8)]
    loss = dy.esum([dy.sum_elems(dy.tanh(W * x)) for x in xs])
    value = loss.value()
    stats = dy.cg().stats()
    return value, stats["signatures"], stats["batches"]


def test_small_graphs_after_a_large_one_batch_as_before():
    before = [small_graph(s) for s in range(3)]
    assert distinct_shapes(3000) >= 3000          # the table grows past 4096 slots
    after = [small_graph(s) for s in range(3)]
    assert after == before
    # and again after a middling graph, whose signatures fill more of the table
    assert distinct_shapes(300) >= 300
    assert [small_graph(s) for s in range(3)] == before


def test_a_large_graph_after_small_ones_finds_every_signature():
    small_graph(0)
    n = distinct_shapes(1000)
    assert distinct_shapes(1000) == n
    small_graph(1)
    assert distinct_shapes(1000) == n
