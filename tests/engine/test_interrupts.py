"""Ctrl-C (SIGINT; here a timer's signal whose handler raises KeyboardInterrupt):
between batches a forward stops, keeping what it computed, and a later value()
finishes it with the same numbers; a backward is applied completely or not at all."""
import time

import numpy as np
import pytest

import autobatch as dy

STEPS = 60000


def chain(W, x0):
    x = dy.inputVector(x0)
    for _ in range(STEPS):
        x = dy.tanh(W * x)
    return dy.sum_elems(x)


def model():
    pc = dy.ParameterCollection(seed=3)
    W = pc.add_parameters((4, 4), init=dy.UniformInitializer(0.5))
    return pc, W, np.linspace(-1, 1, 4).astype(np.float32)


def test_an_interrupted_forward_can_be_finished(alarm):
    pc, W, x0 = model()
    dy.renew_cg(strategy="none")
    want = chain(W, x0).value()
    dy.renew_cg(strategy="none")
    loss = chain(W, x0)
    alarm(0.005)
    with pytest.raises(KeyboardInterrupt):
        loss.value()
        time.sleep(1)           # (only if the forward was faster than the timer)
    ran = dy.cg().stats()["nodes_run"]
    assert 0 < ran < dy.cg().num_nodes - 1            # stopped between batches
    assert loss.value() == want                       # the rest runs now, same numbers


def test_an_interrupted_backward_is_applied_completely(alarm):
    pc, W, x0 = model()
    dy.renew_cg(strategy="none")
    loss = chain(W, x0)
    loss.value()
    loss.backward()
    want = W.grad_as_array().copy()
    W.scale_gradient(0.0)
    assert not W.grad_as_array().any()
    dy.renew_cg(strategy="none")
    loss = chain(W, x0)
    loss.value()
    alarm(0.002)
    try:
        loss.backward()
        time.sleep(1)           # the interrupt is raised once backward has returned
    except KeyboardInterrupt:
        pass
    np.testing.assert_array_equal(W.grad_as_array(), want)
