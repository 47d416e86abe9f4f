"""Which items each rank trains on: `shard` (this rank's part of a data set for one epoch),
`split_batch` (this rank's part of one global minibatch, optionally balanced by cost) and
`minibatches` (an epoch's global minibatches, split). Every rank computes the same
assignment from the same arguments, without communicating."""
import numpy as np

from autobatch.distributed.processes import rank, size


def shard(data, epoch=0, seed=0, shuffle=True, drop_last=True):
    """This rank's part of `data` (a sequence) for one epoch, as a list.

    With `shuffle`, the order is a permutation drawn from (seed, epoch), the same on
    every rank; rank r takes items r, r + N, r + 2N, ... of it. So the first b items of
    every rank together are the first N*b items of the permutation: N ranks with
    minibatch b see, step by step, the minibatches of one process with minibatch N*b
    (size 1 gets the whole permutation). `drop_last` drops the len(data) % N last items
    of the permutation so that every rank gets as many items (and takes as many
    training steps: a rank with an extra step would wait for the others forever); for
    evaluation pass drop_last=False and weight the metric (`allreduce_mean`)."""
    n, ranks, me = len(data), size(), rank()
    order = np.random.default_rng([seed, epoch]).permutation(n) if shuffle else np.arange(n)
    if drop_last:
        order = order[:n - n % ranks]
    return [data[i] for i in order[me::ranks]]


def split_batch(batch, cost=None):
    """This rank's part of one global minibatch (the same sequence on every rank).

    Without `cost`, rank r takes items r, r + N, ... With `cost` (a function of an item:
    its length, its number of nodes...), the items go, largest first, to the rank with
    the least cost so far among those with fewer than ceil(len/N) items: every rank gets
    as many items (give or take one) and about as much work, so that no rank waits long
    for the others at the gradient exchange. Every rank computes the same assignment.
    Items keep their order within a part."""
    n, ranks, me = len(batch), size(), rank()
    if cost is None or ranks == 1:
        return list(batch[me::ranks])
    costs = [float(cost(x)) for x in batch]
    cap = -(-n // ranks)
    loads, counts, owner = [0.0] * ranks, [0] * ranks, [0] * n
    for i in sorted(range(n), key=lambda i: -costs[i]):          # stable: ties by position
        r = min((r for r in range(ranks) if counts[r] < cap), key=lambda r: loads[r])
        owner[i] = r
        loads[r] += costs[i]
        counts[r] += 1
    return [x for x, r in zip(batch, owner) if r == me]


def minibatches(data, batch_size, epoch=0, seed=0, cost=None):
    """This rank's parts of the global minibatches of one epoch: `data` in the order
    `shard(..., shuffle=True)` draws at size 1 (seeded by (seed, epoch), the same on
    every rank), cut into minibatches of `batch_size`, each split by `split_batch`. One
    process gets those minibatches whole. A last minibatch of fewer than N items is
    dropped, so that every rank gets a non-empty part of every step."""
    order = np.random.default_rng([seed, epoch]).permutation(len(data))
    for k in range(0, len(data), batch_size):
        batch = [data[i] for i in order[k:k + batch_size]]
        if len(batch) >= size():
            yield split_batch(batch, cost)
