# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kinds, for the learned strategy (engine/learned.pyx): a signature's key hashed with
its shared arguments named by what they are instead of by node id, so that the same
layer of a model has the same kind in every graph; and the open-addressing tables the
strategy keeps kinds, states and models in."""
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memset

from autobatch.runtime.nodes cimport Node, OpDef, F_TRAINABLE, arg_is_shared
from autobatch.runtime.op_ids cimport OP_PARAM
from autobatch.runtime.memory cimport resize
from autobatch.engine.optable cimport op_table

cdef const OpDef* OPS = op_table()


cdef int32_t* rehashed(int32_t* table, int64_t* size, const uint64_t* keys, int64_t n) except NULL:
    """The table at twice its size, for n keys."""
    cdef int64_t new_size = size[0] * 2 if size[0] else 64, k
    free(table)
    table = <int32_t*>resize(NULL, new_size, sizeof(int32_t))
    memset(table, 0xff, new_size * sizeof(int32_t))
    for k in range(n):
        table[find_slot(table, new_size, keys, keys[k])] = <int32_t>k
    size[0] = new_size
    return table


# ------------------------------------------------------------------ kinds ----

cdef inline uint64_t fold(uint64_t h, uint64_t w) noexcept nogil:
    return mix64(h ^ (w * <uint64_t>0x9E3779B97F4A7C15))


cdef uint64_t parameter_identity(const Node* n) noexcept nogil:
    """A parameter node as the same in every graph: a trained one by its gradient's
    memory (its values' memory alternates between two buffers as trainers update it:
    runtime/param_buffers.pyx), any other by its shape."""
    cdef uint64_t h = fold(<uint64_t>OP_PARAM, <uint64_t>n.bs)
    cdef int k
    if n.flags & F_TRAINABLE:
        return mix64(h ^ <uint64_t><size_t>n.grad)
    for k in range(4):
        h = fold(h, <uint64_t>n.d[k])
    return h


cdef uint64_t kind_key(const SigTable* sigs, const NodeView* v, int32_t g,
                       uint64_t* weights) noexcept nogil:
    """Signature g's kind (signatures.pyx lays its key out): the hash of its op, its
    attributes and, for each argument shared by identity, the parameter's identity (any
    other node: its op). No shapes and no arity: those of a sentence's concatenation,
    of the sum of a batch's losses or of an attention over a sentence follow the data,
    and would make every graph's kinds new. weights[0] gets the sum of the hashes of
    the parameters read (the model's key is made of them)."""
    cdef const int64_t* key = sigs.keys + sigs.key_at[g]
    cdef int op = <int>(key[0] & <int64_t>0xffffffff), nargs = <int>(key[0] >> 32), a, k
    cdef const OpDef* od = &OPS[op]
    cdef int at = 7 if od.attrs[0] != 0 else 4
    cdef uint64_t h = fold(0, <uint64_t>op), w
    cdef const Node* n
    for k in range(4, at):
        h = fold(h, <uint64_t>key[k])
    for a in range(nargs):
        if arg_is_shared(od, a):
            n = &v.nodes[-1 - key[at]]
            if n.op == OP_PARAM:
                w = parameter_identity(n)
                weights[0] += w
                h = fold(h, w)
            else:
                h = fold(h, <uint64_t>n.op)
            at += 1
        else:
            at += 3
    return h
