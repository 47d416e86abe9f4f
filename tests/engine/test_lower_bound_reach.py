"""Where the batch lower bound cannot be reached (docs/strategies.md, "Every strategy
on every workload").

The bound (ED-Batch's: per signature, the most nodes of that signature on one
dependency path, summed) lets every signature run at its own depth. Two instances
whose paths meet two signatures in opposite orders, A then B and B then A (the two
compositions of a typed Tree-LSTM, a lattice's character and word cells), need
batches A, B, A or B, A, B: three, against a bound of two. So on such graphs no
schedule is within 5 % of the bound; the smallest count is that of the shortest
sequence of signatures containing every path's sequence (a shortest common
supersequence, NP-hard in general)."""
import numpy as np

import autobatch as dy

from strategy_names import BATCHING_STRATEGIES


def opposite_orders(pairs=3):
    """`pairs` instances B (A x) and as many A (B x): the products by A and by B (two
    signatures) met in both orders."""
    pc = dy.ParameterCollection(seed=7)
    A, B = pc.add_parameters((4, 4)), pc.add_parameters((4, 4))
    losses = []
    for i in range(pairs):
        x = dy.inputVector(np.linspace(-1, 1, 4, dtype=np.float32) * (i + 1))
        losses.append(dy.sum_elems(B * (A * x)))
        losses.append(dy.sum_elems(A * (B * x)))
    return dy.esum(losses)


def test_no_strategy_reaches_the_bound_when_paths_disagree():
    for strategy in BATCHING_STRATEGIES:
        dy.renew_cg(strategy=strategy)
        opposite_orders().forward()
        g = dy.cg()
        bound, per_signature = g.batch_lower_bound()
        product_sigs = {g.node_info(ids[0])[3] for op, ids in g.batches() if op == "matmul"}
        product_batches = sum(1 for op, _ in g.batches() if op == "matmul")
        assert len(product_sigs) == 2
        assert sum(per_signature[s] for s in product_sigs) == 2        # the bound: one each
        assert product_batches >= 3, strategy                           # no schedule has 2
        if strategy == "lookahead":
            assert product_batches == 3                                 # the optimum
