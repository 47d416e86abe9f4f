"""DyNet's ``dynet_config`` module: global settings from Python code.

DyNet programs write ``import dynet_config; dynet_config.set(mem=4, random_seed=9)``
before ``import dynet``; here ``autobatch.config.set(...)`` (for example
``import autobatch.config as dynet_config``) applies the settings at once, so it may
come before or after ``import autobatch``. The arguments and their meaning are those
of `autobatch.DynetParams` (see `autobatch.settings` for what each does here).
"""
from autobatch.settings import DynetParams

_config = None


def set(mem="512", random_seed=0, autobatch=0, profiling=0, weight_decay=0,
        shared_parameters=0, requested_gpus=0, gpu_mask=None):
    """Record and apply the global settings (DyNet's `dynet_config.set`, same
    arguments and defaults). `requested_gpus` > 0 or a GPU in `gpu_mask` is a
    RuntimeError: autobatch runs on the CPU only."""
    global _config
    conf = {"mem": mem, "seed": random_seed, "autobatch": autobatch, "profiling": profiling,
            "weight_decay": weight_decay, "shared_params": shared_parameters,
            "requested_gpus": requested_gpus, "gpu_mask": list(gpu_mask) if gpu_mask else []}
    params = DynetParams()
    params.from_config(conf)        # checks everything before anything changes
    params.init()
    _config = conf


def set_gpu(flag=True):
    """DyNet's request for the GPU: a RuntimeError here when `flag` is true."""
    if flag:
        raise RuntimeError("autobatch.config.set_gpu: autobatch runs on the CPU only (no GPU support)")


def gpu():
    """Whether a GPU was requested: always False here (None before any request, as DyNet)."""
    return None


def get():
    """The settings of the last `set(...)` as a dict (DyNet's keys), or None."""
    return dict(_config) if _config is not None else None
