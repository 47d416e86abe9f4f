"""Calls every public expression function of autobatch with generated bad arguments
(and runs half of the expressions made, forward and backward);
run by tests/api/test_fuzz_functions.py in a child process, so that a crash (a signal) is
seen as one. Prints one line per unexpected exception type and, at the end, the
number of calls."""
import inspect
import math
import random
import sys
import time

import numpy as np

import autobatch as dy

ALLOWED = (TypeError, ValueError, IndexError, KeyError, RuntimeError, NotImplementedError,
           OverflowError, MemoryError, dy.DimensionError, dy.StaleExpressionError)
SKIP = {"renew_cg", "cg", "cg_version", "set_random_seed", "register_strategy",
        "set_default_strategy", "default_strategy", "available_strategies",
        "blas_info", "set_blas_threads", "save", "load", "load_generator",
        "reset_random_seed"}


def functions():
    out = []
    for name in sorted(dir(dy)):
        f = getattr(dy, name)
        if name.startswith("_") or name in SKIP or inspect.isclass(f) or inspect.ismodule(f):
            continue
        if callable(f):
            out.append((name, f))
    return out


def values(rng, pc, stale):
    """A bad or odd argument: wrong types, sizes at and past the limits, NaN, stale
    and foreign expressions, parameters, shapes of every rank."""
    x = rng.choice([
        lambda: None, lambda: 1.5, lambda: math.nan, lambda: -1, lambda: 0, lambda: 2**31,
        lambda: 2**63, lambda: -2**31, lambda: True, lambda: "x", lambda: [], lambda: [1, "a"],
        lambda: (2**20, 2**20), lambda: (0, 3), lambda: (1, 2, 3, 4, 5), lambda: [0, 1, 2],
        lambda: [[1.0, 2.0], [3.0]], lambda: np.zeros((2, 0)), lambda: np.full(3, np.nan),
        lambda: stale, lambda: pc.add_parameters(3), lambda: pc.add_lookup_parameters((4, 2)),
        lambda: dy.inputTensor(np.ones((2, 3))), lambda: dy.inputVector([1.0, 2.0]),
        lambda: dy.inputTensor(np.ones((2, 2, 2, 2))), lambda: dy.zeros(1, batch_size=3),
        lambda: [dy.inputVector([1.0]), dy.zeros((2, 2))], lambda: object(),
        # empty values (a dimension of 0), which DyNet allows
        lambda: dy.zeros((0, 3)), lambda: dy.inputVector([]), lambda: dy.zeros((2, 0), batch_size=2),
        lambda: pc.add_parameters((0, 2)), lambda: pc.add_lookup_parameters((3, 0)),
        lambda: [dy.zeros(0), dy.inputVector([1.0])],
    ])
    return x()


def compute(rng, result):
    """Sometimes run what a call made, forward and backward: the kernels see the odd
    shapes too (an empty value, a product with an empty inner dimension)."""
    if not isinstance(result, dy.Expression) or rng.random() < 0.5:
        return
    result.npvalue()
    dy.sum_elems(dy.sum_batches(result)).backward()


def main(seconds, seed):
    rng = random.Random(seed)
    pc = dy.ParameterCollection(seed=seed)
    dy.renew_cg()
    stale = dy.inputVector([1.0])
    dy.renew_cg()
    calls, deadline, funcs = 0, time.monotonic() + seconds, functions()
    while time.monotonic() < deadline:
        name, f = funcs[calls % len(funcs)]
        args = [values(rng, pc, stale) for _ in range(rng.randint(0, 4))]
        try:
            compute(rng, f(*args))
        except ALLOWED:
            pass
        except Exception as e:          # a bare exception of another type: report it
            print(f"UNEXPECTED {name}: {type(e).__name__}: {e}")
        calls += 1
        if calls % 500 == 0:
            dy.renew_cg()
            pc = dy.ParameterCollection(seed=seed + calls)
    print(f"calls {calls}")


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]))
