"""Parameter initializers with DyNet's names, arguments and defaults.

An initializer is called as ``init(shape, rng, lookup=False)`` and returns an array of
``shape``: the parameter's shape (1 to 4 dims), or ``(n_rows,) + row shape`` for
lookup tables (``lookup=True``). ``rng`` is a ``numpy.random.Generator``.

DyNet stores a lookup table as one tensor of dims ``row shape + (n_rows,)``; the
formulas below (taken from dynet/param-init.cc) refer to those dims where it matters.
"""
import numpy as np


class PyInitializer:
    """Base class of the parameter initializers (DyNet's name). A subclass defines
    ``__call__(shape, rng, lookup=False)`` returning the initial values; pass an
    instance as ``init=`` to `add_parameters` / `add_lookup_parameters`. Not to be
    created directly."""

    def __init__(self):
        raise TypeError("Do not create PyInitializer directly: use one of its subclasses "
                        "(GlorotInitializer, NormalInitializer, ...)")

    def __call__(self, shape, rng, lookup=False):
        raise NotImplementedError


class GlorotInitializer(PyInitializer):
    """Uniform in ``[-s, s]``, DyNet's Glorot scale (dynet/param-init.cc, measured with
    dynet38): over the tensor's ``k`` dims (leaving out the last one when
    ``is_lookup=True``),

    - ``k == 4`` (a convolution filter ``(H, W, In, Out)``):
      ``s = gain * sqrt(6 / ((In + Out) * H * W))``;
    - otherwise ``s = gain * sqrt(3 * k / sum(dims))``: a matrix ``(m, n)`` gets
      ``sqrt(6 / (m + n))``, a vector ``(d,)`` ``sqrt(3 / d)``, a 3-d tensor
      ``sqrt(9 / (a + b + c))``.

    A lookup table of ``n_rows`` rows of shape ``r`` has DyNet dims ``r + (n_rows,)``.
    DyNet's Python ``add_lookup_parameters`` defaults to ``GlorotInitializer()``
    (``is_lookup=False``: the row count is one of the dims), and so does this library.
    """

    def __init__(self, is_lookup=False, gain=1.0):
        self.is_lookup = bool(is_lookup)
        self.gain = float(gain)

    def __call__(self, shape, rng, lookup=False):
        if 0 in tuple(shape):       # an empty tensor: no values, no scale to compute
            return np.zeros(shape, dtype=np.float32)
        dims = tuple(shape[1:]) + (shape[0],) if lookup else tuple(shape)
        dims = dims[:-1] if self.is_lookup else dims
        if sum(dims) <= 0:
            raise ValueError(f"GlorotInitializer(is_lookup=True) needs a tensor of at least "
                             f"two dimensions, got shape {tuple(shape)}")
        if len(dims) == 4:  # fans of a filter count its receptive field, as DyNet's
            s = self.gain * np.sqrt(6.0 / ((dims[2] + dims[3]) * dims[0] * dims[1]))
        else:
            s = self.gain * np.sqrt(3.0 * len(dims) / sum(dims))
        return rng.uniform(-s, s, size=shape)


class NormalInitializer(PyInitializer):
    """Gaussian with the given mean and *variance* (standard deviation ``sqrt(var)``)."""

    def __init__(self, mean=0, var=1):
        if var < 0:
            raise ValueError(f"NormalInitializer: variance must be >= 0, got {var}")
        self.mean, self.var = float(mean), float(var)

    def __call__(self, shape, rng, lookup=False):
        return rng.normal(self.mean, np.sqrt(self.var), size=shape)


class UniformInitializer(PyInitializer):
    """Uniform in ``[-scale, scale]``."""

    def __init__(self, scale):
        self.scale = float(scale)

    def __call__(self, shape, rng, lookup=False):
        return rng.uniform(-self.scale, self.scale, size=shape)


class ConstInitializer(PyInitializer):
    """Every element equal to ``c``."""

    def __init__(self, c):
        self.c = float(c)

    def __call__(self, shape, rng, lookup=False):
        return np.full(shape, self.c)


class IdentityInitializer(PyInitializer):
    """The identity matrix (square matrices only, as in DyNet; a square lookup table
    (n, n) gets row i = e_i)."""

    def __init__(self):
        pass

    def __call__(self, shape, rng, lookup=False):
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ValueError(f"IdentityInitializer needs a square matrix, got shape {tuple(shape)}")
        return np.eye(shape[0])


class SaxeInitializer(PyInitializer):
    """Random orthonormal matrix times ``scale`` (Saxe et al. 2014): the left singular
    vectors of a standard Gaussian matrix. Square matrices give an orthogonal matrix, as in
    DyNet; a non-square matrix gets orthonormal columns (or rows, whichever is fewer)."""

    def __init__(self, scale=1.0):
        self.scale = float(scale)

    def __call__(self, shape, rng, lookup=False):
        if lookup or len(shape) != 2:
            raise ValueError(f"SaxeInitializer needs a matrix, got shape {tuple(shape)}")
        u, _, vt = np.linalg.svd(rng.normal(size=shape), full_matrices=False)
        return self.scale * (u if shape[0] >= shape[1] else vt)


class NumpyInitializer(PyInitializer):
    """Values copied from ``array`` (its shape must equal the parameter's)."""

    def __init__(self, array):
        self.array = np.array(array, dtype=np.float32)

    def __call__(self, shape, rng, lookup=False):
        if self.array.shape != tuple(shape):
            raise ValueError(f"NumpyInitializer: array of shape {self.array.shape} "
                             f"for a parameter of shape {tuple(shape)}")
        return self.array


class FromFileInitializer(PyInitializer):
    """Whitespace-separated floats read from a text file, in DyNet's element order:
    column-major for matrices, one row after another for lookup tables. The file must
    hold exactly as many numbers as the parameter has elements."""

    def __init__(self, fname):
        self.fname = fname

    def __call__(self, shape, rng, lookup=False):
        with open(self.fname) as f:
            vals = np.array(f.read().split(), dtype=np.float64)
        size = int(np.prod(shape))
        if vals.size != size:
            raise ValueError(f"FromFileInitializer: {self.fname!r} holds {vals.size} numbers, "
                             f"the parameter of shape {tuple(shape)} needs {size}")
        if lookup:      # row after row, each column-major
            return np.stack([r.reshape(shape[1:], order="F") for r in vals.reshape(shape[0], -1)])
        return vals.reshape(shape, order="F")


def resolve_initializer(init, shape, scale=1.0, mean=0.0, std=1.0, lookup=False):
    """DyNet's ``add_parameters(init=...)`` forms: None (Glorot), a number (constant),
    an initializer object, or one of the strings 'glorot', 'identity', 'uniform'
    (``scale``), 'normal' (``mean``, ``std``), 'he' (Normal(0, 1 / (2 * shape[-1]))),
    'saxe'."""
    if init is None:
        return GlorotInitializer()
    if isinstance(init, (bool, int, float, np.integer, np.floating)):
        return ConstInitializer(init)
    if isinstance(init, str):
        named = {
            "glorot": GlorotInitializer,
            "identity": IdentityInitializer,
            "saxe": SaxeInitializer,
            "uniform": lambda: UniformInitializer(scale),
            "normal": lambda: NormalInitializer(mean, std * std),
            "he": lambda: NormalInitializer(0, 1.0 / (2 * max(shape[-1], 1))),   # (0: empty)
        }
        if init not in named:
            raise ValueError(f"unknown initializer {init!r}; expected one of {sorted(named)}")
        return named[init]()
    if callable(init):
        return init
    raise TypeError(f"cannot use {type(init).__name__} as an initializer")
