"""DyNet's global settings: `DynetParams`, `init`, `init_from_params` and the
``--dynet-*`` command-line flags.

DyNet reads its flags from ``sys.argv`` when ``import dynet`` runs; so does
``import autobatch`` (without removing them from ``sys.argv``, as DyNet). The flags:

======================== ==================================================================
``--dynet-seed N``       seeds parameter initialisation and the engine's generator
                         (dropout, noise, random_*); 0 (DyNet's default) means "not seeded"
``--dynet-mem M``        accepted and checked (``512`` or ``512,512,512[,512]``, in MB);
                         memory here grows on demand, so it sets no limit
``--dynet-weight-decay`` L2 weight decay lambda in [0, 1) of every ParameterCollection made
                         afterwards, applied by the trainers as DyNet's (see
                         `ParameterCollection.set_weight_decay`)
``--dynet-autobatch K``  the default batching strategy: 1 (DyNet's agenda) -> "agenda",
                         2 (DyNet's by-depth) -> "depth", 3 (DyNet's agenda with a depth
                         constraint) -> "agenda"; 0 (DyNet's default: no batching) keeps
                         our default ("lookahead"), as batching never changes values
``--dynet-profiling K``  accepted (``dy.cg().stats()`` gives the per-op statistics)
``--dynet-gpus N``,      refused with a RuntimeError (N > 0 or a GPU device): autobatch
``--dynet-gpu``,         runs on the CPU only; ``--dynet-devices CPU`` is accepted
``--dynet-devices``
======================== ==================================================================

Unlike DyNet, which ignores a second initialisation with a warning, `init()` may be
called at any time: it applies the settings from then on.
"""
import sys

import numpy as np

from autobatch.api import core
from autobatch.api.extras import ERRMSG
from autobatch.engine.strategies import set_default_strategy

_AUTOBATCH_STRATEGY = {0: None, 1: "agenda", 2: "depth", 3: "agenda"}

# Weight decay lambda given to every new root ParameterCollection (DyNet's global
# `weight_decay_lambda`, set by --dynet-weight-decay or DynetParams.set_weight_decay).
_settings = {"weight_decay": 0.0}


# The process-level generator of parameter initialisation (collections made without a
# seed of their own); reseeded by reset_random_seed and --dynet-seed.
_init_rng = np.random.default_rng()


def default_weight_decay():
    return _settings["weight_decay"]


def init_rng():
    """The process-level generator of parameter initialisation."""
    return _init_rng


def reset_random_seed(seed):
    """Reseed the process-level generator used by collections created without a seed
    (parameter initialisation) and the engine's generator (dropout, noise,
    random_normal...), as DyNet's `dy.reset_random_seed`."""
    global _init_rng
    _init_rng = np.random.default_rng(seed)
    core.set_random_seed(int(seed))


def _gpu_error(what):
    return RuntimeError(f"{what}: {ERRMSG}")


def _number(kind, value, flag, lo=None, hi=None):
    try:
        v = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{flag} expects {'an integer' if kind is int else 'a number'}, "
                         f"got {value!r}") from None
    if isinstance(value, bool) or (lo is not None and v < lo) or (hi is not None and v >= hi):
        raise ValueError(f"{flag}: {value!r} is out of range"
                         + (f" [{lo}, {hi})" if hi is not None else f" (>= {lo})"))
    return v


def _mem(value):
    """DyNet's memory descriptor: one size in MB, or 3 or 4 comma-separated sizes."""
    parts = str(value).split(",")
    if len(parts) not in (1, 3, 4):
        raise ValueError(f"mem expects 1, 3 or 4 comma-separated sizes in MB, got {value!r}")
    for p in parts:
        _number(int, p, "mem", lo=0)
    return str(value)


class DynetParams:
    """DyNet's global parameters (memory, random seed, weight decay, autobatching...),
    set programmatically and applied with `init()` (or `init_from_params`)::

        params = dy.DynetParams()
        params.from_args()            # optional: the --dynet-* flags of sys.argv
        params.set_random_seed(666)
        params.set_weight_decay(1e-6)
        params.init()

    Defaults are DyNet's: mem "512", random_seed 0 (not seeded), weight_decay 0,
    autobatch 0, profiling 0, shared_parameters False, requested_gpus 0. See the module
    docstring for what each does here."""

    def __init__(self):
        self.mem = "512"
        self.random_seed = 0
        self.weight_decay = 0.0
        self.autobatch = 0
        self.profiling = 0
        self.shared_parameters = False
        self.requested_gpus = 0

    # ------------------------------------------------------------- setters ----

    def set_mem(self, mem):
        """Memory in MB, or DyNet's "512,512,512" descriptor (accepted and checked;
        memory grows on demand here)."""
        self.mem = _mem(mem)

    def set_random_seed(self, random_seed):
        """Seed of parameter initialisation and of dropout/noise; 0 leaves them unseeded."""
        self.random_seed = _number(int, random_seed, "set_random_seed", lo=0, hi=2 ** 32)

    def set_weight_decay(self, weight_decay):
        """Weight decay lambda in [0, 1) of the ParameterCollections made after init()."""
        self.weight_decay = _number(float, weight_decay, "set_weight_decay", lo=0.0, hi=1.0)

    def set_autobatch(self, autobatch):
        """DyNet's autobatch flag (0 to 3), mapped to a strategy: see the module docstring."""
        v = _number(int, autobatch, "set_autobatch", lo=0)
        if v not in _AUTOBATCH_STRATEGY:
            raise ValueError(f"set_autobatch: DyNet's autobatch flag is 0, 1, 2 or 3, got {autobatch!r}")
        self.autobatch = v

    def set_profiling(self, profiling):
        """Accepted; per-op statistics are always in `dy.cg().stats()`."""
        self.profiling = _number(int, profiling, "set_profiling", lo=0)

    def set_shared_parameters(self, shared_parameters):
        """Accepted (DyNet's shared memory for multi-process training; see
        `autobatch.distributed` for data-parallel training here)."""
        self.shared_parameters = bool(shared_parameters)

    def set_requested_gpus(self, requested_gpus):
        """Only 0 is possible: autobatch runs on the CPU."""
        n = _number(int, requested_gpus, "set_requested_gpus", lo=0)
        if n:
            raise _gpu_error(f"set_requested_gpus({n})")
        self.requested_gpus = 0

    def set_gpu_mask(self, gpu_mask):
        """DyNet's GPU selection: only a mask of zeros (no GPU) is possible here."""
        mask = list(gpu_mask)
        if any(v not in (0, 1) for v in mask):
            raise ValueError("gpu_mask should only contain 0 and 1s")
        if any(mask):
            raise _gpu_error("set_gpu_mask")

    def set_cpu_mode(self):
        """Run on the CPU: always the case here."""

    # ---------------------------------------------------------- sources ----

    def from_args(self, shared_parameters=None):
        """Read the ``--dynet-*`` flags of ``sys.argv`` (left in place, as DyNet).
        A flag without its value, or with a bad one, is a ValueError; a GPU request a
        RuntimeError."""
        argv = list(sys.argv)
        setters = {"--dynet-mem": self.set_mem, "--dynet-seed": self.set_random_seed,
                   "--dynet-weight-decay": self.set_weight_decay,
                   "--dynet-autobatch": self.set_autobatch, "--dynet-profiling": self.set_profiling,
                   "--dynet-gpus": self.set_requested_gpus, "--dynet-devices": _check_devices}
        for i, arg in enumerate(argv):
            if arg == "--dynet-gpu":
                raise _gpu_error("--dynet-gpu")
            if arg in setters:
                if i + 1 >= len(argv):
                    raise ValueError(f"{arg} expects a value")
                try:
                    setters[arg](argv[i + 1])
                except ValueError as e:
                    raise ValueError(f"{arg} {argv[i + 1]}: {e}") from None
        if shared_parameters is not None:
            self.set_shared_parameters(shared_parameters)

    def from_config(self, conf):
        """Set from a dict as `autobatch.config.get()` returns (DyNet's dynet_config):
        keys mem, seed, autobatch, profiling, weight_decay, shared_params,
        requested_gpus, gpu_mask."""
        if not isinstance(conf, dict):
            raise TypeError(f"from_config takes a dict, got {type(conf).__name__}")
        for key, setter in (("mem", self.set_mem), ("seed", self.set_random_seed),
                            ("autobatch", self.set_autobatch), ("profiling", self.set_profiling),
                            ("weight_decay", self.set_weight_decay),
                            ("shared_params", self.set_shared_parameters),
                            ("requested_gpus", self.set_requested_gpus)):
            if key in conf:
                setter(conf[key])
        self.set_gpu_mask(conf.get("gpu_mask") or ())

    def init(self):
        """Apply these settings to the process (from now on)."""
        if self.random_seed:
            reset_random_seed(self.random_seed)
        _settings["weight_decay"] = float(self.weight_decay)
        strategy = _AUTOBATCH_STRATEGY[self.autobatch]
        if strategy is not None:
            set_default_strategy(strategy)

    def __repr__(self):
        return (f"DynetParams(mem={self.mem!r}, random_seed={self.random_seed}, "
                f"weight_decay={self.weight_decay}, autobatch={self.autobatch})")


def _check_devices(value):
    for dev in str(value).split(","):
        if dev.strip().upper() != "CPU":
            raise _gpu_error(f"--dynet-devices {value}")


def init(shared_parameters=None):
    """Apply the ``--dynet-*`` flags of ``sys.argv`` (DyNet's `dy.init`); import runs it."""
    params = DynetParams()
    params.from_args(shared_parameters)
    params.init()


def init_from_params(params):
    """Apply a `DynetParams` (the same as ``params.init()``)."""
    if not isinstance(params, DynetParams):
        raise TypeError(f"init_from_params takes a DynetParams, got {type(params).__name__}")
    params.init()
