"""Data-parallel training over MPI: N processes train one model, each on its part of
every minibatch, and combine their gradients before every update::

    import autobatch as dy
    from autobatch import distributed as dist

    dist.init()                                      # size 1 when not started by mpiexec
    pc = dy.ParameterCollection(seed=1)
    ...                                              # build the model, the same on every rank
    dist.broadcast_parameters(pc)                    # every rank starts from rank 0's values
    trainer = dist.DistributedTrainer(dy.AdamTrainer(pc), reduce="sum")
    for epoch in range(epochs):
        mine = dist.shard(train, epoch=epoch, seed=1)      # this rank's part, reshuffled per epoch
        for k in range(0, len(mine), b):                   # b = the global minibatch / size()
            dy.renew_cg()
            loss = dy.esum([model.loss(x) for x in mine[k:k + b]])
            loss.backward()
            trainer.update()                         # gradients of all ranks combined, then the step
    dist.save("model", [pc])                         # written by rank 0 only

Started as ``mpiexec -n 2 python train.py``; see docs/distributed.md for clusters,
Slurm, timeouts and what scales. Importing this module never needs MPI; `init()` needs
mpi4py only when the program was started by an MPI launcher.

How gradients travel, per `update()`:

- dense gradients (every Parameters, and lookup tables when the trainer's sparse updates
  are off) are packed into a few large float32 buffers of at most `bucket_mb` each and
  reduced with one in-place ``Allreduce`` per buffer;
- lookup tables with sparse updates send only the rows this rank's backwards marked
  used: their ids and their gradient rows, all tables in one ``Allgatherv`` for the ids
  and one for the rows;
  every rank adds the rows of all ranks in rank order (so all ranks get the same bits) and
  marks them used, so the trainer updates the union of the touched rows and nothing else;
- with ``reduce="mean"`` the combined gradients are divided by the number of ranks (for
  losses averaged over each rank's minibatch), with ``reduce="sum"`` they are not (for
  DyNet-style summed losses: N ranks with minibatch B/N then make exactly the step of one
  process with minibatch B, up to float32 summation order);
- the wrapped trainer then clips on the global norm of the combined gradients and updates,
  identically on every rank.

Faults: `init()` makes an uncaught exception on any rank print its traceback and a line
naming the rank, then call ``MPI.COMM_WORLD.Abort`` so that the other ranks do not wait
forever in their next collective. `init(timeout=seconds)` (or the environment variable
AUTOBATCH_MPI_TIMEOUT) also aborts the job when a rank waits longer than that in one of
this module's collectives (a rank that hangs, or stopped calling `update()` early).
"""

from autobatch.distributed.checkpoints import load, populate, save
from autobatch.distributed.collectives import allreduce, allreduce_mean, broadcast_parameters
from autobatch.distributed.data import minibatches, shard, split_batch
from autobatch.distributed.processes import (LAUNCHER_SIZE_VARS, barrier, find_mpiexec, init,
                                             is_main, rank, size)
from autobatch.distributed.trainer import DistributedTrainer, wrap

# The parts, each of which reads the MPI state from state.py at call time:
#   state.py        the MPI state that init() sets (mpi4py's MPI, COMM_WORLD)
#   faults.py       abort naming the rank, the exception hook, the timeout watchdog
#   processes.py    init, rank, size, is_main, barrier, find_mpiexec
#   collectives.py  broadcast_parameters, allreduce, allreduce_mean (and the buckets)
#   data.py         shard, split_batch, minibatches
#   checkpoints.py  save, load, populate
#   trainer.py      DistributedTrainer (wrap)

__all__ = ["DistributedTrainer", "LAUNCHER_SIZE_VARS", "allreduce", "allreduce_mean", "barrier",
           "broadcast_parameters", "find_mpiexec", "init", "is_main", "load", "minibatches",
           "populate", "rank", "save", "shard", "size", "split_batch", "wrap"]
