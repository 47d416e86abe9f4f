"""DyNet's Tensor: the computed value of an expression (``Expression.tensor_value()``),
with the operations DyNet applies to a value without building nodes: ``argmax``,
``topk``, ``categorical_sample_log_prob`` and ``as_numpy``.

A value here is a numpy copy in npvalue()'s layout (the batch is the last axis when the
batch size is above 1). ``dim`` counts the value's dimensions, never the batch; the
result keeps the value's layout with dimension ``dim`` of size ``num``. Samples draw
from a generator seeded with the library's seed (``dy.reset_random_seed``,
``--dynet-seed``)."""
import operator

import numpy as np

MAX_DIMS = 4
_rng = np.random.default_rng()


def reseed(seed):
    """Seed the samples of categorical_sample_log_prob (with the library's seed)."""
    global _rng
    _rng = np.random.default_rng(seed)


class Tensor:
    """A computed value (what ``Expression.tensor_value()`` returns, as DyNet's Tensor): a
    float value, or the indices (int) that ``argmax`` and ``topk`` give.

    Example::

        best = scores.tensor_value().argmax().as_numpy()      # one index per column
    """

    def __init__(self, array, dims, batch_size, index=False):
        """array: the value in npvalue()'s layout; dims: its shape without the batch."""
        self._array = array
        self._dims = tuple(int(d) for d in dims)
        self._bs = int(batch_size)
        self._index = bool(index)

    def __str__(self):
        return f"<autobatch Tensor:{'int' if self._index else 'float'}>"

    __repr__ = __str__

    def as_numpy(self):
        """The values as a numpy array (a copy): float32 values, or int64 indices."""
        return np.array(self._array)

    def argmax(self, dim=0, num=1):
        """The index of the largest value along dimension ``dim`` (the first of equal
        ones), for every position of the other dimensions and batch element: a Tensor of
        indices with dimension ``dim`` of size 1. ``num`` must be 1, as in DyNet."""
        dim = self._dim(dim)
        if _count(num, "argmax") != 1:
            raise ValueError("argmax: num > 1 is not supported (as in DyNet); use topk")
        full = self._full()
        return self._like(np.argmax(full, axis=dim, keepdims=True), dim, 1, True)

    def topk(self, dim=0, num=1):
        """The ``num`` largest values along dimension ``dim``, largest first (equal ones
        in index order), and their indices: a pair of Tensors with dimension ``dim`` of
        size ``num``."""
        dim = self._dim(dim)
        num = _count(num, "topk")
        full = self._full()
        if num > full.shape[dim]:
            raise ValueError(f"topk: num={num} is more than the {full.shape[dim]} values of "
                             f"dimension {dim}")
        order = np.argsort(-full, axis=dim, kind="stable").take(np.arange(num), axis=dim)
        values = np.take_along_axis(full, order, axis=dim)
        return self._like(values, dim, num, False), self._like(order, dim, num, True)

    def categorical_sample_log_prob(self, dim=0, num=1):
        """One index drawn along dimension ``dim`` for every position of the others, with
        probabilities proportional to exp(value) (the values are log probabilities,
        normalised or not; the Gumbel-max draw DyNet uses): a Tensor of indices with
        dimension ``dim`` of size 1. ``num`` must be 1, as in DyNet."""
        dim = self._dim(dim)
        if _count(num, "categorical_sample_log_prob") != 1:
            raise ValueError("categorical_sample_log_prob: num > 1 is not supported (as in DyNet)")
        full = self._full().astype(np.float64)
        gumbel = -np.log(-np.log(_rng.uniform(np.finfo(np.float64).tiny, 1.0, full.shape)))
        return self._like(np.argmax(full + gumbel, axis=dim, keepdims=True), dim, 1, True)

    # ------------------------------------------------------------------ layout ----

    def _dim(self, dim):
        if isinstance(dim, bool):
            raise TypeError("dim must be an int, got bool")
        dim = operator.index(dim)
        if not 0 <= dim < MAX_DIMS:
            raise ValueError(f"dim must be in [0, {MAX_DIMS}), got {dim}")
        return dim

    def _full(self):
        """The value as (d0, d1, d2, d3, batch)."""
        dims = self._dims + (1,) * (MAX_DIMS - len(self._dims))
        return np.asarray(self._array).reshape(dims + (self._bs,))

    def _like(self, full, dim, size, index):
        """A Tensor of `full` ((d0, ..., d3, batch) with dimension `dim` of `size`) in
        this value's layout."""
        dims = tuple(size if k == dim else d for k, d in enumerate(self._dims))
        shape = dims + ((self._bs,) if self._bs > 1 else ())
        return Tensor(full.reshape(shape if shape else (1,)), dims, self._bs, index)


def _count(num, what):
    if isinstance(num, bool):
        raise TypeError(f"{what}: num must be an int, got bool")
    num = operator.index(num)
    if num < 1:
        raise ValueError(f"{what}: num must be >= 1, got {num}")
    return num
