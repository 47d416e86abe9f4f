"""Every op x every strategy: a graph of several instances of the op (different
inputs, arguments fed through chains of different lengths so depths differ) gives the
values and gradients of the unbatched strategy, and the op's nodes really batch."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.testing import check_batching_invariance

from op_cases import Ctx, all_variants
from python_strategies import PYTHON_STRATEGIES, LargestFirst
from strategy_names import BATCHING_STRATEGIES, BUILTIN_STRATEGIES

STRATEGIES = BUILTIN_STRATEGIES + PYTHON_STRATEGIES       # the built-in ones and two in Python
BATCHING = BATCHING_STRATEGIES + [LargestFirst.name]      # must batch the op's nodes
DEPTHS = [0, 1, 2, 1, 0]
# ops whose batched kernel is the per-node loop run over more nodes: bit-equal results;
# gemm-based ops may sum in another order when more columns are stacked, and the
# gradient of a weight shared by every instance (a contraction's tensor, a filter)
# adds the nodes' terms in batch order rather than in reverse node order
GEMM_OPS = {"matmul", "affine_transform", "conv2d", "contract3d_1d", "contract3d_1d_1d",
            "filter1d_narrow"}
# random ops (dropout, noise) included: they draw by (graph seed, node, element), so
# every strategy gives them the same numbers
VARIANTS = all_variants()


def instances(v):
    """(build_fn, params, outputs): len(DEPTHS) instances of variant v; `outputs`
    holds the op nodes of the last build."""
    pc = dy.ParameterCollection(seed=1)
    shared = {}
    ctxs = [Ctx(pc, seed=100 + i, instance=i, depth=d, shared=shared) for i, d in enumerate(DEPTHS)]
    builds = [v.fn(c)[0] for c in ctxs]
    params = []
    for c in ctxs:
        params += [p for p in c.params if not any(p is q for q in params)]
    outputs = []

    def build():
        outputs[:] = [b() for b in builds]
        return list(outputs)
    return build, params, outputs


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("v", VARIANTS, ids=lambda v: v.id)
def test_batched_equals_unbatched(v, strategy):
    build, params, outputs = instances(v)
    tol = dict(rtol=1e-5, atol=1e-6) if v.op in GEMM_OPS or v.gemm else dict(rtol=0, atol=0)
    check_batching_invariance(build, params, strategies=[strategy], **tol)
    # the graph of the last strategy is current: how did the op nodes batch?
    ids = {e.vindex for e in outputs}
    per_batch = [len(ids.intersection(nodes)) for _, nodes in dy.cg().batches()]
    assert sum(per_batch) == len(DEPTHS)
    if strategy in BATCHING:
        assert max(per_batch) > 1, f"{v.op} nodes never batched under {strategy}: {per_batch}"
    if strategy == "none":
        assert max(per_batch) == 1


def rnn_graph(pc_params, lengths):
    W, U, b = pc_params
    losses = []
    for t_max in lengths:
        h = dy.zeros(4)
        for t in range(t_max):
            x = dy.inputVector(np.full(3, 0.1 * (t + 1)))
            h = dy.tanh(dy.affine_transform([b, W, x, U, h]))
        losses.append(dy.sum_elems(h))
    return losses


def test_agenda_batches_an_rnn():
    pc = dy.ParameterCollection(seed=0)
    params = [pc.add_parameters((4, 3)), pc.add_parameters((4, 4)), pc.add_parameters(4)]
    lengths = [3, 5, 4, 5, 2]
    stats = check_batching_invariance(lambda: rnn_graph(params, lengths), params,
                                      strategies=("depth", "agenda", LargestFirst.name),
                                      rtol=1e-5, atol=1e-6)
    n_steps = sum(lengths)
    assert stats["none"]["batch_sizes"]["affine_transform"] == {1: n_steps}
    # one affine and one tanh batch per time step of the longest sequence: sizes
    # 5, 5, 4, 3, 2 (sequences still running at steps 5, 4, 3, 2, 1 counted backwards)
    assert stats["agenda"]["batch_sizes"]["affine_transform"] == {5: 2, 4: 1, 3: 1, 2: 1}
    assert stats["agenda"]["batch_sizes"]["tanh"] == {5: 2, 4: 1, 3: 1, 2: 1}
    assert stats["agenda"]["batches"] < stats["none"]["batches"] / 2
    assert stats["agenda"]["batches"] <= stats["depth"]["batches"]
