"""ParameterCollection and initializers (DyNet names and defaults)."""
import numpy as np

from autobatch._core import LookupParameters, Parameters


def _rng(collection):
    return collection._rng


class GlorotInitializer:
    """Uniform in +-sqrt(6 / (fan_in + fan_out)) * gain (DyNet's default). For lookup
    tables DyNet treats a row as the whole fan: sqrt(3 / dim)."""

    def __init__(self, is_lookup=False, gain=1.0):
        self.is_lookup = is_lookup
        self.gain = gain

    def __call__(self, shape, rng):
        if self.is_lookup or len(shape) == 1:
            scale = np.sqrt(3.0 / shape[-1]) if self.is_lookup else np.sqrt(6.0 / (shape[0] + 1))
        else:
            scale = np.sqrt(6.0 / (shape[0] + shape[1]))
        return rng.uniform(-scale * self.gain, scale * self.gain, size=shape)


class NormalInitializer:
    def __init__(self, mean=0.0, var=1.0):
        self.mean, self.var = mean, var

    def __call__(self, shape, rng):
        return rng.normal(self.mean, np.sqrt(self.var), size=shape)


class UniformInitializer:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, shape, rng):
        return rng.uniform(-self.scale, self.scale, size=shape)


class ConstInitializer:
    def __init__(self, c):
        self.c = c

    def __call__(self, shape, rng):
        return np.full(shape, self.c)


class NumpyInitializer:
    def __init__(self, array):
        self.array = np.asarray(array, dtype=np.float32)

    def __call__(self, shape, rng):
        if self.array.shape != tuple(shape):
            raise ValueError(f"NumpyInitializer: array of shape {self.array.shape} "
                             f"for a parameter of shape {tuple(shape)}")
        return self.array


class ParameterCollection:
    """Owns parameters and lookup parameters (DyNet's `Model`)."""

    def __init__(self, seed=None):
        self._rng = np.random.default_rng(seed)
        self._params = []
        self._lookups = []

    def add_parameters(self, dim, init=None, name="", scale=1.0, device=""):
        shape = (int(dim),) if isinstance(dim, (int, np.integer)) else tuple(int(d) for d in dim)
        p = Parameters(shape, name=name, owner=self)
        init = GlorotInitializer() if init is None else init
        if isinstance(init, (int, float)):
            init = ConstInitializer(init)
        p.set_value(np.asarray(init(shape, self._rng), dtype=np.float32) * scale)
        self._params.append(p)
        return p

    def add_lookup_parameters(self, dim, init=None, name="", scale=1.0, device=""):
        shape = tuple(int(d) for d in dim)
        if len(shape) != 2:
            raise ValueError(f"add_lookup_parameters: shape must be (rows, dim), got {shape}")
        p = LookupParameters(shape, name=name, owner=self)
        init = GlorotInitializer(is_lookup=True) if init is None else init
        if isinstance(init, (int, float)):
            init = ConstInitializer(init)
        p.set_value(np.asarray(init(shape, self._rng), dtype=np.float32).reshape(shape) * scale)
        self._lookups.append(p)
        return p

    def parameters_list(self):
        return list(self._params)

    def lookup_parameters_list(self):
        return list(self._lookups)

    def gradient_l2_norm(self):
        total = sum(float(np.dot(p._grad_flat, p._grad_flat)) for p in self._params)
        total += sum(float(np.dot(p._grad_flat, p._grad_flat)) for p in self._lookups)
        return float(np.sqrt(total))


Model = ParameterCollection
