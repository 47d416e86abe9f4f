"""The memory-layout pass (autobatch/engine/layout.pyx): a batch whose outputs products
of several signatures read is ordered by reader, so that each reader finds its operands
side by side; a stacked operand copied once in a forward is reused by every product
that reads the same values (kernels/common.pxd). It moves values, never changes them:
the schedule is the same batches (as sets of nodes), values and gradients are those
of layout off up to the order of sums over a batch, and the unbatched reference."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.bench import data, tasks
from autobatch.engine import layout
from autobatch.testing import check_batching_invariance, check_schedule

from strategy_names import BATCHING_STRATEGIES

HIDDEN, N_INSTANCES, SEED = 8, 12, 5
WORKLOADS = tasks.expand(["standard", "literature"])


@pytest.fixture(autouse=True)
def layout_back_on():
    yield
    layout.set_layout(True)


def step(model, inst, strategy, on):
    """One forward and backward of the summed loss with the layout pass on or off:
    the loss, the gradients of the model's parameters, the batches (op, node set),
    and stats()."""
    layout.set_layout(on)
    dy.renew_cg(strategy=strategy)
    loss = dy.esum([model.loss(i) for i in inst])
    value = loss.value()
    loss.backward()
    check_schedule([loss.vindex])
    g = dy.cg()
    grads = [p.grad_as_array().copy() for p in model.pc.parameters_list()]
    grads += [p.grad_as_array().copy() for p in model.pc.lookup_parameters_list()]
    batches = sorted((op, tuple(sorted(ids))) for op, ids in g.batches())
    st = g.stats()
    model.pc.reset_gradient()
    return value, grads, batches, st


@pytest.fixture(scope="module", params=WORKLOADS)
def workload(request):
    meta, inst = data.make(request.param, N_INSTANCES, seed=SEED)
    return request.param, tasks.make(request.param, hidden=HIDDEN, seed=SEED, meta=meta,
                                     variant="ops"), inst


@pytest.mark.parametrize("strategy", BATCHING_STRATEGIES)
def test_same_batches_values_and_gradients(workload, strategy):
    name, model, inst = workload
    v_off, g_off, b_off, _ = step(model, inst, strategy, False)
    v_on, g_on, b_on, st = step(model, inst, strategy, True)
    assert b_on == b_off, "the layout pass changed which nodes ran together"
    assert v_on == pytest.approx(v_off, rel=1e-5, abs=1e-6)
    for a, b in zip(g_on, g_off):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# measured on these graphs (agenda, fusion on): operands copied with the layout pass
# off, and at most with it on
COPIED = {"tagger": (160, 4), "parser": (100, 4), "treegru": (72, 12),
          "typed-treenn": (166, 32), "lattice-lstm": (1514, 935), "nmt-attention": (110, 8)}


def test_fewer_operands_copied(workload):
    name, model, inst = workload
    off = step(model, inst, "agenda", False)[3]["operands"]
    on = step(model, inst, "agenda", True)[3]["operands"]
    reads = lambda o: o["in_place"] + o["reused"] + o["copied"]
    assert reads(on) == reads(off)
    assert off["reused"] == 0
    assert on["copied"] <= off["copied"]
    assert on["copied_floats"] <= off["copied_floats"]
    if name in COPIED:
        was, now = COPIED[name]
        assert off["copied"] == was and on["copied"] <= now


def gate_products(E, Ws, rows):
    """For each row of E, the products of every W of Ws with it (a leaf's gates)."""
    losses = []
    for r in rows:
        x = E[r]
        losses.append(dy.esum([dy.sum_elems(dy.tanh(W * x)) for W in Ws]))
    return losses


def test_one_copy_of_lookup_rows_serves_every_gate():
    pc = dy.ParameterCollection(seed=1)
    E = pc.add_lookup_parameters((20, 6))
    Ws = [pc.add_parameters((4, 6)) for _ in range(3)]
    for on, copied, reused in ((False, 3, 0), (True, 1, 2)):
        layout.set_layout(on)
        dy.renew_cg()
        loss = dy.esum(gate_products(E, Ws, [3, 7, 1, 12]))
        loss.value()
        ops = dy.cg().stats()["operands"]
        assert (ops["copied"], ops["reused"]) == (copied, reused)


def test_copies_do_not_outlive_a_forward():
    # value(recalculate=True) after a row changed reads the table again into the same
    # lookup nodes: its products must copy the new values, not reuse the first
    # forward's copy (the cache is emptied at the start of every forward)
    pc = dy.ParameterCollection(seed=1)
    E = pc.add_lookup_parameters((20, 6))
    W, W2 = pc.add_parameters((4, 6)), pc.add_parameters((4, 6))
    rows = [3, 7, 1]
    dy.renew_cg()
    xs = [E[r] for r in rows]
    y = dy.concatenate_cols([W * x for x in xs]) + dy.concatenate_cols([W2 * x for x in xs])
    y.value()
    assert dy.cg().stats()["operands"]["reused"] == 1
    E.init_row(7, np.full(6, 2.0, dtype=np.float32))
    got = y.value(recalculate=True)
    want = (W.as_array() + W2.as_array()) @ E.as_array()[rows].T
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def typed_reads(n_types=2):
    """Instances whose h = tanh(V x) feeds a product chosen by the instance's type:
    one batch of h read, in parts, by products of n_types signatures."""
    pc = dy.ParameterCollection(seed=4)
    V = pc.add_parameters((5, 5))
    U = [pc.add_parameters((3, 5)) for _ in range(n_types)]

    def build():
        outs = []
        for i in range(9):
            x = dy.inputVector(np.linspace(-1, 1, 5, dtype=np.float32) * (i + 1) / 9)
            h = dy.tanh(V * x)
            outs.append(dy.logistic(U[(i * 7) % n_types] * h))
        return outs
    return build, [V] + U


def test_a_batch_read_in_parts_is_ordered_by_reader():
    # the inputs are copied together once; off, each reader copies its part of h too
    build, params = typed_reads()
    for on, copied in ((False, 3), (True, 1)):
        layout.set_layout(on)
        dy.renew_cg()
        dy.esum([dy.sum_elems(o) for o in build()]).value()
        assert dy.cg().stats()["operands"]["copied"] == copied


@pytest.mark.parametrize("strategy", BATCHING_STRATEGIES)
def test_ordered_batches_give_the_unbatched_numbers(strategy):
    build, params = typed_reads(3)
    check_batching_invariance(build, params, strategies=(strategy,))


def test_switch():
    assert layout.layout_enabled()
    layout.set_layout(False)
    assert not layout.layout_enabled()
