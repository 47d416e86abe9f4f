"""cg_checkpoint / cg_revert together with Parameters used as Expressions and set() of
reusable inputs.

A Parameters caches the index of its node in the current graph; a node made after a
checkpoint is dropped by revert and its slot may go to another node: the cache must
never point there. set() writes an input's values in place (its leaf memory stays
where it was made), so revert gives back only the memory of leaves made after the
checkpoint, and a set() value survives a revert."""
import numpy as np
import pytest

import autobatch as dy

W_INIT = np.array([[1.0, 2.0], [3.0, 4.0]])
E_INIT = np.arange(6.0).reshape(3, 2)


@pytest.fixture
def params():
    pc = dy.ParameterCollection(seed=0)
    return pc, pc.add_parameters((2, 2), init=W_INIT), pc.add_lookup_parameters((3, 2), init=E_INIT)


def test_parameter_nodes_made_after_a_checkpoint_are_made_again(params):
    pc, W, E = params
    dy.renew_cg()
    x = dy.inputVector([1.0, -1.0])
    dy.cg_checkpoint()
    (W * x).value()                     # W's and E's nodes made after the checkpoint
    dy.tanh(E).value()
    dropped = {W.vindex, E.vindex}
    n_dropped_version = dy.cg_version()
    dy.cg_revert()
    assert dy.cg_version() != n_dropped_version
    # other nodes take the dropped slots: W and E must not read them
    fillers = [dy.inputVector([9.0, 9.0]) for _ in range(6)]
    assert dropped <= {f.vindex for f in fillers}
    z = W * x
    assert W.vindex not in {f.vindex for f in fillers}
    assert E.vindex not in {f.vindex for f in fillers} | {W.vindex}
    np.testing.assert_allclose(z.npvalue(), W_INIT @ [1.0, -1.0])
    np.testing.assert_allclose(W.npvalue(), W_INIT)
    np.testing.assert_allclose(E.npvalue(), E_INIT.T)
    np.testing.assert_allclose(W.expr(update=False).npvalue(), W_INIT)
    assert not W.is_stale() and not E.is_stale()
    pc.reset_gradient()
    (dy.sum_elems(z) + dy.sum_elems(E)).backward()
    np.testing.assert_allclose(W.grad_as_array(), np.outer([1.0, 1.0], [1.0, -1.0]))
    np.testing.assert_allclose(E.grad_as_array(), np.ones((3, 2)))


def test_parameter_nodes_made_before_a_checkpoint_stay(params):
    pc, W, E = params
    dy.renew_cg()
    x = dy.inputVector([1.0, 2.0])
    y = W * x
    kept = W.vindex
    const = W.expr(update=False)
    dy.cg_checkpoint()
    (W * y + const * x).value()
    dy.cg_revert()
    assert W.vindex == kept and W.expr(update=False).vindex == const.vindex
    np.testing.assert_allclose((W * y).npvalue(), W_INIT @ W_INIT @ [1.0, 2.0])
    assert dy.cg().num_nodes == 5       # x, W, y, const; then W * y: no new W node


def test_parameter_of_a_dropped_node_in_nested_checkpoints(params):
    pc, W, E = params
    dy.renew_cg()
    dy.cg_checkpoint()
    x = dy.inputVector([1.0, 0.0])
    dy.cg_checkpoint()
    (W * x).value()
    dy.cg_revert()
    dy.cg_revert()
    assert dy.cg().num_nodes == 0
    np.testing.assert_allclose((W * dy.inputVector([0.0, 1.0])).npvalue(), W_INIT[:, 1])


def test_set_between_a_checkpoint_and_a_revert(params):
    pc, W, E = params
    dy.renew_cg()
    x = dy.vecInput(2)
    x.set([1.0, 2.0])
    y = W * x
    np.testing.assert_allclose(y.npvalue(), W_INIT @ [1.0, 2.0])
    dy.cg_checkpoint()
    z = dy.inputVector([5.0, 6.0])       # leaf memory taken after the checkpoint
    s = dy.scalarInput(2.0)
    x.set([3.0, 4.0])                    # in place: x's memory is from before
    (dy.sum_elems(y + W * z) * s).value()
    dy.cg_revert()
    # the value set() gave stays (revert drops nodes, it does not undo set())
    assert x.value() == [3.0, 4.0]
    np.testing.assert_allclose(y.npvalue(), W_INIT @ [3.0, 4.0])
    with pytest.raises(dy.StaleExpressionError):
        s.set(1.0)
    # leaves made now reuse the given-back memory, never x's
    fresh = [dy.inputVector([float(k), float(k)]) for k in range(8)]
    assert x.value() == [3.0, 4.0]
    x.set([7.0, 8.0])
    for k, f in enumerate(fresh):
        assert f.value() == [float(k), float(k)]
    np.testing.assert_allclose(y.npvalue(), W_INIT @ [7.0, 8.0])
    pc.reset_gradient()
    dy.sum_elems(y).backward()
    np.testing.assert_allclose(W.grad_as_array(), np.outer([1.0, 1.0], [7.0, 8.0]))


def test_set_of_an_input_made_after_the_checkpoint_and_lookups(params):
    pc, W, E = params
    dy.renew_cg()
    row = E[0]
    h = dy.tanh(W * row)
    h.value()
    dy.cg_checkpoint()
    v = dy.vecInput(2)
    v.set([1.0, 1.0])
    row.set(2)                           # a lookup made before the checkpoint
    (h + W * v).value()
    dy.cg_revert()
    with pytest.raises(dy.StaleExpressionError):
        v.set([0.0, 0.0])
    np.testing.assert_allclose(h.npvalue(), np.tanh(W_INIT @ E_INIT[2]), rtol=1e-6)
    row.set(1)
    np.testing.assert_allclose(h.npvalue(), np.tanh(W_INIT @ E_INIT[1]), rtol=1e-6)


def test_gradient_of_a_backward_from_a_dropped_loss_is_gone(params):
    pc, W, E = params
    dy.renew_cg()
    x = dy.inputVector([1.0, 2.0])
    y = W * x
    dy.cg_checkpoint()
    dy.sum_elems(y).backward()
    dy.cg_revert()
    with pytest.raises(RuntimeError):
        y.gradient()
    dy.sum_elems(y).backward()
    np.testing.assert_allclose(y.gradient(), [1.0, 1.0])


def test_memory_does_not_grow_when_set_and_revert_loop(params):
    pc, W, E = params
    dy.renew_cg()
    x = dy.vecInput(2)
    y = dy.tanh(W * x)
    arena = []
    for step in range(200):
        dy.cg_checkpoint()
        x.set([float(step % 7), 1.0])
        loss = dy.sum_elems(dy.cmult(y, dy.inputTensor(np.full(2, 0.5))))
        loss.value()
        loss.backward()
        dy.cg_revert()
        np.testing.assert_allclose(y.npvalue(), np.tanh(W_INIT @ [step % 7, 1.0]), rtol=1e-6)
        arena.append(dy.cg().stats()["arena_bytes"])
    assert max(arena[10:]) <= arena[10]
