"""Regressions found by running public DyNet programs with `import autobatch as dy`
(docs/dynet_programs.md lists the programs; benchmarks/dynet_programs.py runs them).
Expected numbers are dynet38's (DyNet 2.2), measured with the same inputs."""
import numpy as np
import pytest

import autobatch as dy
from autobatch.errors import DimensionError


# DyNet's MNIST examples reshape to (3136, 1), so W2 * h is a column (10, 1): DyNet's
# pickneglogsoftmax and hinge take a column as they take a vector.

def test_pickneglogsoftmax_of_a_column():
    dy.renew_cg()
    x = dy.inputTensor(np.arange(10.).reshape(10, 1))
    loss = dy.pickneglogsoftmax(x, 3)
    assert loss.dim() == ((1,), 1)
    assert loss.value() == pytest.approx(6.458629608154297, rel=1e-6)  # dynet38


def test_hinge_of_a_column():
    dy.renew_cg()
    x = dy.inputTensor(np.arange(10.).reshape(10, 1))
    assert dy.hinge(x, 3).value() == pytest.approx(27.0)  # dynet38


def test_pickneglogsoftmax_batch_of_a_column():
    dy.renew_cg()
    x = dy.inputTensor(np.ones((10, 1, 2)), batched=True)
    assert dy.pickneglogsoftmax_batch(x, [1, 2]).value() == pytest.approx([np.log(10)] * 2)


@pytest.mark.parametrize("f", [lambda x, i: dy.pickneglogsoftmax(x, i),
                               lambda x, i: dy.hinge(x, i, 0.5)], ids=["picknls", "hinge"])
def test_column_gives_the_vector_values_and_gradients(f):
    v = np.random.RandomState(0).randn(7, 3).astype(np.float32)
    grads = []
    for shape in [(7,), (7, 1)]:
        dy.renew_cg()
        xs = [dy.inputTensor(v[:, b].reshape(shape)) for b in range(3)]
        losses = [f(x, b + 2) for b, x in enumerate(xs)]
        total = dy.esum(losses)
        vals = [l.value() for l in losses]
        total.backward(full=True)
        grads.append((vals, [x.gradient().reshape(7) for x in xs]))
    (v1, g1), (v2, g2) = grads
    assert np.allclose(v1, v2)
    for a, b in zip(g1, g2):
        assert np.allclose(a, b)


def test_a_matrix_is_still_refused():
    dy.renew_cg()
    with pytest.raises(DimensionError):
        dy.pickneglogsoftmax(dy.inputTensor(np.ones((10, 2))), 1)
    with pytest.raises(DimensionError):
        dy.hinge(dy.inputTensor(np.ones((1, 10))), 1)
