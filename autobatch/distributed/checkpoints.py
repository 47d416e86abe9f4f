"""Saving and loading a model in a job of several processes: `save` writes on rank 0
only, `load` and `populate` read on every rank, each with a barrier so that no rank
reads files that are still being written."""
from autobatch.distributed.processes import barrier, is_main
from autobatch.io import formats


def save(basename, objects):
    """`dy.save` on rank 0 only; the other ranks wait until the files are written."""
    if is_main():
        formats.save(basename, objects)
    barrier()


def load(basename, pc):
    """`dy.load` on every rank (the files must be readable by all of them: a shared file
    system, or copies); returns the loaded objects."""
    barrier()
    return formats.load(basename, pc)


def populate(pc, fname, key=""):
    """`pc.populate(fname)` on every rank (the file readable by all of them)."""
    barrier()
    pc.populate(fname, key=key)
