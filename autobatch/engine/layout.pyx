# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The memory-layout pass.

A batch's outputs land in memory in the order of its nodes (executor.pyx), and a
product reads its stacked operand in place only when those values are consecutive and
in its order (kernels/common.pxd); otherwise it copies them together. Batches run in
node-id order by default, which suits a reader that takes all of a batch. It does not
suit a batch whose outputs several later products read in parts: the forget-gate
products of each node type of a typed Tree-LSTM each read some of the leaves' h, the
gates of a lattice's word cells some of the character cells' h. So a batch whose nodes
are read by products of more than one signature is ordered by reader: each reader's
operands side by side, in the reader's own (id) order. A batch whose readers all share
one signature keeps id order. Fused stages keep the order of their chain's first batch
(fusion.pyx), so a node no product reads takes the key of its only consumer: a
chain's first batch is ordered for the readers of its last stage. The keys are made
by sched_prepare (a node's first reader) and layout_keys (the chains).

The pass changes where values are, never which values: the same numbers, except that
sums over a batch's nodes (a bias's or a weight's gradient) add in the new order.
stats()["operands"] counts the operands read in place, reused and copied.
set_layout(False) turns it off (with the reuse of copied operands, kernels/common.pxd)."""
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport malloc, free, qsort
from libc.string cimport memcpy

from autobatch.runtime.nodes cimport Node, OpDef, arg_id, arg_is_stacked_operand
from autobatch.engine.optable cimport op_table
from autobatch.runtime.memory cimport grow

cdef const OpDef* OPS = op_table()

cdef bint _on = True

cdef enum:
    MAX_GROUPS = 8      # readers' signatures in one batch that a partition handles


def set_layout(bint on):
    """Turn the memory-layout pass on (the default) or off for the forwards that follow:
    batches ordered by the products that read them, and a stacked operand copied once
    per forward reused by every product that reads the same values (engine/layout.pyx).
    Off, batches run in node-id order and every product copies what is not in place.
    Results are equal either way up to the order of sums over a batch."""
    global _on
    _on = on


def layout_enabled():
    """Whether the memory-layout pass is on (set_layout)."""
    return _on


cdef bint layout_on() noexcept nogil:
    return _on


cdef void layout_keys(Sched* s, int64_t count) noexcept nogil:
    """Complete the keys sched_prepare gave (a node's first reader that stacks it, as
    (that reader's signature + 1, its id), else (0, own id)): a node no product reads
    whose only consumer in this forward has a reader takes that consumer's key, so a
    chain's first batch is ordered for its last stage's readers (fused stages keep the
    first batch's order). Down the ids, so a consumer's key is final first; only the
    scheduler's arrays, no node is read."""
    cdef int64_t p
    cdef int32_t i, c
    for p in range(count - 1, -1, -1):
        i = s.needed[p]
        if s.lkey[i] >> 32 == 0 and s.cons_at[p + 1] - s.cons_at[p] == 1:
            c = s.cons[s.cons_at[p]]
            if s.lkey[c] >> 32 != 0:
                s.lkey[i] = s.lkey[c]


ctypedef struct Keyed:
    int64_t key
    int32_t id


cdef int cmp_keyed(const void* a, const void* b) noexcept nogil:
    cdef const Keyed* x = <const Keyed*>a
    cdef const Keyed* y = <const Keyed*>b
    if x.key != y.key:
        return -1 if x.key < y.key else 1
    return (x.id > y.id) - (x.id < y.id)


cdef bint reads_in_place(const NodeView* v, const int32_t* ids, int n) noexcept nogil:
    """Whether the batch ids[0..n) is a product that reads a stacked operand in place
    in this order (which another order would lose)."""
    cdef const OpDef* op = &OPS[v.nodes[ids[0]].op]
    cdef const Node* x0
    cdef int a, j
    for a in range(v.nodes[ids[0]].nargs):
        if not arg_is_stacked_operand(op, a):
            continue
        x0 = &v.nodes[arg_id(v, ids[0], a)]
        j = 1
        while j < n and v.nodes[arg_id(v, ids[j], a)].val == x0.val + <int64_t>j * x0.size:
            j += 1
        if j == n:
            return True
    return False


cdef int layout_order(Sched* s, const NodeView* v, int32_t* ids, int n) except -1:
    """Order the batch ids[0..n) (ascending) by reader, if its nodes' readers have
    more than one signature and the batch does not read an operand in place in id
    order; else leave it. The readers' signatures are few: a stable partition by
    signature gives the order whenever each part's readers ascend with its ids (a
    reader made after the node it reads, as code builds them), else a sort."""
    cdef int64_t sigs[MAX_GROUPS]
    cdef int64_t sg
    cdef int j, g, ng = 1, m = 0
    sigs[0] = s.lkey[ids[0]] >> 32
    for j in range(1, n):
        sg = s.lkey[ids[j]] >> 32
        g = 0
        while g < ng and sigs[g] != sg:
            g += 1
        if g == ng:
            if ng == MAX_GROUPS:
                ng += 1                 # too many to partition: sort
                break
            sigs[ng] = sg
            ng += 1
    if ng == 1 or reads_in_place(v, ids, n):
        return 0
    if ng > MAX_GROUPS:
        return sort_by_key(s, ids, n)
    cdef int32_t* out = <int32_t*>grow(s.lbuf, &s.cap_lbuf, n, sizeof(int32_t))
    s.lbuf = out
    insertion_sort(sigs, ng)
    for g in range(ng):
        for j in range(n):
            if s.lkey[ids[j]] >> 32 == sigs[g]:
                if m > 0 and s.lkey[out[m - 1]] >> 32 == sigs[g] and \
                        s.lkey[out[m - 1]] > s.lkey[ids[j]]:
                    return sort_by_key(s, ids, n)
                out[m] = ids[j]
                m += 1
    memcpy(ids, out, n * sizeof(int32_t))
    return 0


cdef void insertion_sort(int64_t* a, int n) noexcept nogil:
    cdef int i, j
    cdef int64_t x
    for i in range(1, n):
        x = a[i]
        j = i - 1
        while j >= 0 and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x


cdef int sort_by_key(Sched* s, int32_t* ids, int n) except -1:
    """ids[0..n) by (key, id)."""
    cdef Keyed* k = <Keyed*>malloc(<size_t>n * sizeof(Keyed))
    cdef int j
    if k == NULL:
        raise MemoryError("autobatch: the layout pass's sort")
    for j in range(n):
        k[j].key = s.lkey[ids[j]]
        k[j].id = ids[j]
    qsort(k, n, sizeof(Keyed), cmp_keyed)
    for j in range(n):
        ids[j] = k[j].id
    free(k)
    return 0
