"""cg().batch_lower_bound() on a graph with nodes the forward pass does not need.

The bound (engine/stats.pyx, lower_bound) counts, per signature, the most nodes on one
dependency path over every node of the graph, including nodes no target depends on;
the forward pass runs only the targets' ancestors, so on such a graph every strategy
runs fewer batches than the "lower bound". Seen on the bench's MV-RNN (the root's
composed matrix W_M [A; B] is built as at every node and never read by the loss): the
lookahead strategy ran 153 batches against a bound of 155 (tests/engine/
test_strategy_plugins.py::test_schedule_invariants[mvrnn-lookahead]). Strict xfail:
when the bound counts only the nodes that run, these tests pass and must lose the mark."""
import pytest

import autobatch as dy

UNNEEDED = pytest.mark.xfail(strict=True, reason="batch_lower_bound counts nodes no target "
                             "needs (engine/stats.pyx lower_bound walks every node)")


def chain_with_an_unneeded_tail(strategy):
    dy.renew_cg(strategy=strategy)
    x = dy.inputVector([0.5, -1.0, 2.0])
    needed = dy.tanh(x)
    dy.tanh(dy.tanh(dy.tanh(needed)))           # built, never read by the loss
    loss = dy.sum_elems(needed)
    loss.forward()
    return dy.cg()


@UNNEEDED
@pytest.mark.parametrize("strategy", ["depth", "agenda", "lookahead"])
def test_bound_is_at_most_the_batches_run(strategy):
    g = chain_with_an_unneeded_tail(strategy)
    assert g.batch_lower_bound()[0] <= g.stats()["batches"]


def test_the_unneeded_nodes_do_not_run():
    g = chain_with_an_unneeded_tail("agenda")
    assert g.stats()["nodes_run"] < g.num_nodes
