# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""cg_revert's work on the graph's arrays (the graph, engine/graph.pyx, keeps the sizes a
checkpoint saw and calls these): nodes made after a checkpoint are dropped, and with
them the signatures only they used and every batch computed since the checkpoint
if one of them is in it (their values live in the part of the arena given back)."""
from libc.stdint cimport int32_t, int64_t

from autobatch.runtime.nodes cimport F_DONE
from autobatch.engine.signatures cimport sig_truncate


cdef bint computed_any(const BatchLog* log, int64_t from_batch, int32_t first_dropped) noexcept nogil:
    """Whether a batch from `from_batch` on computed a node >= first_dropped."""
    cdef int64_t k
    if from_batch >= log.n:
        return False
    for k in range(log.at[from_batch], log.n_ids):
        if log.ids[k] >= first_dropped:
            return True
    return False


cdef void uncompute(Node* nodes, BatchLog* log, int64_t from_batch) noexcept nogil:
    """Forget the batches from `from_batch` on: their nodes are computed again when
    needed (their values were in the arena given back). The log may name dropped
    nodes: their entries are still in the node array's memory, and are ignored."""
    cdef int64_t k
    cdef int32_t i
    if from_batch >= log.n:
        return
    for k in range(log.at[from_batch], log.n_ids):
        i = log.ids[k]
        nodes[i].flags &= ~F_DONE
        nodes[i].val = NULL
        nodes[i].aux = NULL
    log.n_ids = log.at[from_batch]
    log.n = from_batch


cdef void drop_signatures(const Node* nodes, SigTable* t, int64_t first, int64_t last,
                          int64_t n_sigs) noexcept nogil:
    """Nodes first..last-1 are dropped: the older signatures count them no more, and
    the signatures interned since the checkpoint (ids >= n_sigs, only dropped nodes
    had them) are forgotten."""
    cdef int64_t i
    cdef int32_t s
    for i in range(first, last):
        s = nodes[i].sig
        if 0 <= s < n_sigs:
            t.count[s] -= 1
    sig_truncate(t, n_sigs)


cdef void drop_uses(Node* nodes, const int32_t* args, int64_t first, int64_t last) noexcept nogil:
    """Nodes first..last-1 are dropped: the older nodes they took as arguments have
    one consumer less each (fusion reads the counts)."""
    cdef int64_t i
    cdef int a
    cdef int32_t y
    cdef Node* arg
    for i in range(first, last):
        for a in range(nodes[i].nargs):
            y = args[nodes[i].args_at + a]
            if y < first:
                arg = &nodes[y]
                arg.uses -= 1
