"""DyNet's module-level helpers beyond its reference manual, kept for programs that use them.

``HAVE_CUDA`` is False: autobatch runs on the CPU only."""
import numpy as np

from autobatch.api.core import Expression, _adopt_node, _transposed_input, forward, zeros

HAVE_CUDA = False


def npvalues(exps, recalculate=False):
    """The values of the expressions in exps as numpy arrays (as each one's npvalue()),
    computed in one forward pass so that their nodes batch together (DyNet's npvalues)."""
    exps = list(exps)
    forward(exps, recalculate)
    return [e.npvalue() for e in exps]


def values(exps, recalculate=False):
    """The values of the expressions in exps (as each one's value(): a float, a list or
    an array, as in DyNet), computed in one forward pass (DyNet's values)."""
    exps = list(exps)
    forward(exps, recalculate)
    return [e.value() for e in exps]


def zeroes(dim, batch_size=1):
    """DyNet's other spelling of zeros(dim, batch_size): a constant 0 input."""
    return zeros(dim, batch_size)


def available_devices():
    """The devices expressions can live on (DyNet's available_devices): the CPU only."""
    return ["CPU"]


class inputTensorTranspose(Expression):
    """DyNet's ``dy.inputTensorTranspose(val, dim=None, batch_size=1, device="")``: an input
    Expression from flat values in column-major order (the batch last), of shape ``dim``
    (default: one vector of them all) times ``batch_size``. ``set()`` may replace its
    values. Batching: a leaf.

    Example::

        x = dy.inputTensorTranspose([1, 2, 3, 4, 5, 6], (2, 3))   # [[1, 3, 5], [2, 4, 6]]
    """

    def __new__(cls, val, dim=None, batch_size=1, device=""):
        self = Expression.__new__(cls)
        _adopt_node(self, _transposed_input(val, dim, batch_size, device))
        return self


# what DyNet raises for GPU flags (settings.py raises it too): there is no GPU here
ERRMSG = ("autobatch runs on the CPU only (no GPU support); drop the GPU flag to run on "
          "the CPU")


class DeviceInfo:
    """A device's name, id and type (DyNet's DeviceInfo, from ``get_device_info``); the
    type is -1, as DyNet reports it."""

    def __init__(self, name, id, dtype):
        self.name = name
        self.type = dtype
        self.id = id


def get_device_info(name):
    """DyNet's ``dy.get_device_info(name)``: the DeviceInfo of the device ``name`` ("CPU",
    the one device here: name b"CPU", id 0, type -1, as dynet38 answers); RuntimeError
    for any other name, as DyNet's for a device it does not have."""
    text = name.decode() if isinstance(name, bytes) else name
    if text not in ("CPU", "cpu"):
        raise RuntimeError(f"Invalid device name: {text} (autobatch runs on the CPU only)")
    return DeviceInfo(b"CPU", 0, -1)


def print_graphviz(**kwargs):
    """DyNet's ``dy.print_graphviz``: without ``--dynet-viz`` (DyNet's visualisation
    module, which autobatch does not have) DyNet prints a note and draws nothing; so
    does this, naming ``dy.print_text_graphviz()``, which prints the graph."""
    print("print_graphviz: DyNet's --dynet-viz visualisation is not available; "
          "dy.print_text_graphviz() prints the current graph in Graphviz's dot language")


# DyNet's value holders ("pointers" its inputs read at forward time): a float, an
# unsigned int, or a list of them, stored as DyNet stores them (float32, uint32).

def _float32(v):
    return float(np.float32(_number(v)))


def _uint32(v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"an unsigned int is needed, got {type(v).__name__}")
    if not 0 <= v < 2 ** 32:
        raise OverflowError(f"{v} is not an unsigned int (0 to 2^32 - 1)")
    return int(v)


def _number(v):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"a number is needed, got {type(v).__name__}")
    return v


class _ScalarValue:
    def __init__(self, val=0):
        self.set(val)

    def set(self, val):
        """Store ``val``, converted as DyNet stores it (float32, or uint32)."""
        self._val = self._convert(val)

    def get(self):
        """The value stored."""
        return self._val


class _VectorValue:
    def __init__(self, vals):
        self.set(vals)

    def set(self, newval):
        """Store the numbers of ``newval``, each converted as DyNet stores it."""
        self._vals = [self._convert(v) for v in newval]

    def get(self):
        """The values stored, as a list."""
        return list(self._vals)

    def size(self):
        """How many values are stored."""
        return len(self._vals)


class FloatValue(_ScalarValue):
    """A float (float32) to get and set (DyNet's FloatValue)."""
    _convert = staticmethod(_float32)


class UnsignedValue(_ScalarValue):
    """An unsigned int (uint32) to get and set (DyNet's UnsignedValue)."""
    _convert = staticmethod(_uint32)


class FloatVectorValue(_VectorValue):
    """A list of floats (float32) to get and set (DyNet's FloatVectorValue)."""
    _convert = staticmethod(_float32)


class UnsignedVectorValue(_VectorValue):
    """A list of unsigned ints (uint32) to get and set (DyNet's UnsignedVectorValue)."""
    _convert = staticmethod(_uint32)
