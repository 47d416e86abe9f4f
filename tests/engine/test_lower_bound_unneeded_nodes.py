"""cg().batch_lower_bound() on a graph with nodes the forward pass does not need.

The bound (engine/stats.pyx, lower_bound) counts, per signature, the most *computed*
nodes on one dependency path: nodes no target depends on never run, so they are no
part of any schedule. Seen on the bench's MV-RNN (the root's composed matrix W_M [A; B]
is built as at every node and never read by the loss), where a bound over every node
was 155 against 153 batches run by 'lookahead'."""
import pytest

import autobatch as dy


def chain_with_an_unneeded_tail(strategy, fusion=True):
    dy.renew_cg(strategy=strategy, fusion=fusion)
    x = dy.inputVector([0.5, -1.0, 2.0])
    needed = dy.tanh(x)
    dy.tanh(dy.tanh(dy.tanh(needed)))           # built, never read by the loss
    loss = dy.sum_elems(needed)
    loss.forward()
    return dy.cg()


@pytest.mark.parametrize("fusion", [False, True])
def test_bound_is_at_most_the_batches_run(strategy, fusion):
    g = chain_with_an_unneeded_tail(strategy, fusion)
    assert g.batch_lower_bound()[0] == 2 <= g.stats()["batches"]
    assert g.batch_lower_bound(passes=True)[0] <= g.stats()["passes"]


def test_the_unneeded_nodes_do_not_run():
    g = chain_with_an_unneeded_tail("agenda")
    assert g.stats()["nodes_run"] < g.num_nodes


def test_nothing_computed_bounds_nothing():
    dy.renew_cg()
    dy.sum_elems(dy.tanh(dy.inputVector([1.0, 2.0])))
    assert dy.cg().batch_lower_bound() == (0, {0: 0, 1: 0})
