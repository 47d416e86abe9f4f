# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A batch's kernel as ranges of its nodes on the engine's threads (dy.set_num_threads).

Ops whose record allows it (split_fwd, split_bwd: the kernel of a node touches only
that node's value, or only its arguments' gradients, and allocates nothing) run a
large batch as one range of nodes per thread: the same loops over the same elements,
so the numbers are those of one thread. Backward splits only when no two nodes share
an argument and no argument is a leaf (lookup rows alias their table's gradient,
inputs share a sink), so no two threads add into one gradient."""
from libc.stdint cimport int32_t
from libc.stdlib cimport malloc, free, qsort
from libc.string cimport memset

from autobatch.runtime.nodes cimport Batch, Node, OpDef, NodeView, NODE, ARG
from autobatch.engine.optable cimport op_table
from autobatch.runtime.profile cimport Traffic
from autobatch.runtime.threads cimport pool_run, pool_threads, split_worthwhile

cdef const OpDef* OPS = op_table()

cdef enum:
    MAX_PARTS = 64


ctypedef struct Split:
    Batch* b
    const OpDef* op
    bint backward
    int parts
    Traffic traffic[MAX_PARTS]


cdef void run_part(void* ctx, int c) noexcept nogil:
    cdef Split* s = <Split*>ctx
    cdef Batch part = s.b[0]
    cdef int j0 = <int>(<long>c * s.b.n // s.parts), j1 = <int>(<long>(c + 1) * s.b.n // s.parts)
    part.ids = s.b.ids + j0
    part.n = j1 - j0
    if part.block != NULL:
        part.block = s.b.block + <size_t>j0 * NODE(s.b, 0).size
    part.prof = NULL            # the caller times the whole batch
    memset(&s.traffic[c], 0, sizeof(Traffic))
    part.traffic = &s.traffic[c]
    if s.backward:
        s.op.bwd(&part)
    else:
        s.op.fwd(&part)


cdef void run_kernel(const OpDef* op, Batch* b, bint backward) noexcept nogil:
    """op's forward (or backward) kernel on batch b, split over the threads when the
    record allows it and the batch is large enough to gain."""
    cdef Split s
    cdef int c
    if NODE(b, 0).size == 0:
        # empty values (a dimension of 0; the nodes of a batch share their shape): no
        # output to compute, and no output gradient, so no gradient to pass back
        return
    # the work of a node: its own elements, or its first argument's where those are
    # more (a loss over a column of logits)
    cdef int per_node = max(NODE(b, 0).size, ARG(b, 0, 0).size if NODE(b, 0).nargs else 0)
    if not (op.split_bwd if backward else op.split_fwd) or \
            not split_worthwhile(b.n, per_node) or \
            (backward and not gradients_disjoint(b.nodes, b.args, b.ids, b.n)):
        if backward:
            op.bwd(b)
        else:
            op.fwd(b)
        return
    s.b, s.op, s.backward = b, op, backward
    s.parts = min(min(pool_threads(), b.n), MAX_PARTS)
    pool_run(run_part, &s, s.parts)
    for c in range(s.parts):
        b.traffic.in_place += s.traffic[c].in_place
        b.traffic.copied += s.traffic[c].copied
        b.traffic.copied_floats += s.traffic[c].copied_floats
        b.traffic.grads_in_place += s.traffic[c].grads_in_place
        b.traffic.grads_scattered += s.traffic[c].grads_scattered


cdef int cmp_ids(const void* a, const void* b) noexcept nogil:
    cdef int32_t x = (<const int32_t*>a)[0], y = (<const int32_t*>b)[0]
    return (x > y) - (x < y)


cdef bint distinct_non_leaves(int32_t* ids, int m, const Node* nodes) noexcept nogil:
    """ids[0..m) (reordered) are distinct nodes, none a leaf."""
    cdef int i
    for i in range(m):
        if OPS[nodes[ids[i]].op].leaf:
            return False
    qsort(ids, m, sizeof(int32_t), cmp_ids)
    for i in range(1, m):
        if ids[i] == ids[i - 1]:
            return False
    return True


cdef bint gradients_disjoint(const Node* nodes, const int32_t* args, const int32_t* ids,
                             int n) noexcept nogil:
    """No two (node, argument) pairs of the nodes ids[0..n) name one node, and none is a
    leaf: their backward kernels add into disjoint gradients."""
    cdef int j, a, m = 0
    cdef long total = 0
    for j in range(n):
        total += nodes[ids[j]].nargs
    cdef int32_t* arg_ids = <int32_t*>malloc(<size_t>total * sizeof(int32_t))
    cdef bint ok
    if arg_ids == NULL:
        return False
    for j in range(n):
        for a in range(nodes[ids[j]].nargs):
            arg_ids[m] = args[nodes[ids[j]].args_at + a]
            m += 1
    ok = distinct_non_leaves(arg_ids, m, nodes)
    free(arg_ids)
    return ok
