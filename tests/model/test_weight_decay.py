"""Weight decay as DyNet applies it (fixture: tests/data/make_weight_decay_fixture.py,
recorded with dynet38 and --dynet-weight-decay 0.1): after each update every parameter
and every lookup row of the trainer's collection is scaled by (1 - lambda), also those
the step did not use."""
import json
import pathlib

import numpy as np
import pytest

import autobatch as dy

FIXTURE = json.loads((pathlib.Path(__file__).resolve().parents[1] / "data" / "weight_decay_dynet.json").read_text())
TRAINERS = {"sgd": lambda pc: dy.SimpleSGDTrainer(pc, 0.1),
            "momentum": lambda pc: dy.MomentumSGDTrainer(pc, 0.1, 0.9),
            "adam": lambda pc: dy.AdamTrainer(pc, 0.1)}


@pytest.mark.parametrize("name", sorted(TRAINERS))
@pytest.mark.parametrize("sparse", [True, False])
def test_weight_decay_matches_dynet(name, sparse):
    pc = dy.ParameterCollection()
    pc.set_weight_decay(FIXTURE["weight_decay"])
    sub = pc.add_subcollection("s")
    W = pc.parameters_from_numpy(np.array([[1., 2.], [3., 4.]]))
    U = sub.parameters_from_numpy(np.array([1., -1.]))
    V = pc.parameters_from_numpy(np.array([1., 2.]))
    E = pc.lookup_parameters_from_numpy(np.arange(6.).reshape(3, 2))
    tr = TRAINERS[name](pc)
    tr.set_sparse_updates(sparse)
    for want in FIXTURE[name]:
        dy.renew_cg()
        loss = dy.squared_norm(W * dy.inputVector([1., -2.]) + U + E[0])
        loss.value()
        loss.backward()
        tr.update()
        for key, p in (("W", W), ("U", U), ("V", V)):
            np.testing.assert_allclose(p.as_array(), want[key], rtol=1e-5, atol=1e-6, err_msg=key)
        np.testing.assert_allclose(E.as_array(), want["E"], rtol=1e-5, atol=1e-6)


def test_update_subset_updates_only_the_listed_parameters():
    pc = dy.ParameterCollection()
    W, U = pc.add_parameters(2, init=1.0), pc.add_parameters(2, init=1.0)
    E = pc.add_lookup_parameters((3, 2), init=1.0)
    tr = dy.SimpleSGDTrainer(pc, 0.1)
    for _ in range(2):
        dy.renew_cg()
        loss = dy.sum_elems(W + U + E[1])
        loss.backward()
    tr.update_subset([1], [])
    np.testing.assert_allclose(W.as_array(), [1, 1])
    np.testing.assert_allclose(U.as_array(), [0.8, 0.8])     # the two graphs' gradients
    np.testing.assert_allclose(W.grad_as_array(), [2, 2])    # kept for a later update
    np.testing.assert_allclose(U.grad_as_array(), [0, 0])
    tr.update_subset([], [0])
    np.testing.assert_allclose(E.as_array()[1], [0.8, 0.8])
    np.testing.assert_allclose(E.as_array()[0], [1, 1])
    with pytest.raises(IndexError):
        tr.update_subset([2], [])
    with pytest.raises(TypeError):
        tr.update_subset(["a"], [])


def test_clip_inplace():
    pc = dy.ParameterCollection()
    p = pc.parameters_from_numpy(np.array([[-2., 0.5], [3., 1.]]))
    p.clip_inplace(-1, 0.9)
    np.testing.assert_allclose(p.as_array(), [[-1, 0.5], [0.9, 0.9]])
    dy.renew_cg()
    np.testing.assert_allclose(dy.parameter(p).npvalue(), [[-1, 0.5], [0.9, 0.9]])
    with pytest.raises(ValueError):
        p.clip_inplace(1, 0)
