"""DyNet's module-level helpers beyond its reference manual, kept for programs that use them.

``HAVE_CUDA`` is False: autobatch runs on the CPU only."""
from autobatch.api.core import forward, zeros

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
