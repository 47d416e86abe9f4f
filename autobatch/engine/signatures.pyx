# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Signature interning. A signature is derived from the op record (runtime/nodes.pxd):
op id, arity, the node's full shape, all words of its typed attributes, and per
argument either its node id (arguments the record shares by identity: the weights of
a product) or its full shape (stacked arguments; so which of them broadcast is part
of it). Keys are compared in full; the hash only finds candidates."""
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from autobatch.runtime.nodes cimport Node, OpDef, arg_is_shared
from autobatch.engine.optable cimport op_table
from autobatch.runtime.memory cimport grow, next_capacity, resize
from autobatch.runtime.nodes cimport arg_id

cdef const OpDef* OPS = op_table()

# A key: op and nargs (one word), the node's shape (3 words), the attribute union (3
# words, only for ops that have attributes), then per argument its shape (3 words) or,
# when the record shares it by identity, -1 - its node id (1 word). The op's record
# fixes the layout, so keys of one op line up word for word and keys of different ops
# differ in word 0.
cdef enum:
    KEY_MAX_HEAD = 7
    KEY_MAX_PER_ARG = 3


cdef inline void shape_words(const Node* n, int64_t* out) noexcept nogil:
    """A node's full shape in three words (each size is a positive int32)."""
    out[0] = (<int64_t>n.d[0]) | ((<int64_t>n.d[1]) << 32)
    out[1] = (<int64_t>n.d[2]) | ((<int64_t>n.d[3]) << 32)
    out[2] = (<int64_t>n.nd) | ((<int64_t>n.bs) << 32)


cdef int build_key(SigTable* t, const NodeView* v, int32_t i) except -1:
    """The key of node i in t.keybuf; returns its length."""
    cdef const Node* n = &v.nodes[i]
    cdef const OpDef* od = &OPS[n.op]
    cdef int a, k, at
    cdef int32_t arg
    t.keybuf = <int64_t*>grow(t.keybuf, &t.cap_keybuf,
                              KEY_MAX_HEAD + KEY_MAX_PER_ARG * n.nargs, sizeof(int64_t))
    cdef int64_t* key = t.keybuf
    key[0] = (<int64_t>n.op) | ((<int64_t>n.nargs) << 32)
    shape_words(n, key + 1)
    at = 4
    if od.attrs[0] != 0:
        for k in range(3):
            key[at + k] = n.attr.words[k]
        at += 3
    for a in range(n.nargs):
        arg = arg_id(v, i, a)
        if arg_is_shared(od, a):
            key[at] = -1 - <int64_t>arg
            at += 1
        else:
            shape_words(&v.nodes[arg], key + at)
            at += 3
    return at


# one multiplier per position (mod 8): the products are independent, so hashing a key
# is a short chain of adds, not one multiply per word in sequence
cdef uint64_t[8] MULTIPLIERS = [
    0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93,
    0xA0761D6478BD642F, 0xE7037ED1A0B428DB, 0x8EBC6AF09C88C6E3, 0x589965CC75374CC3]


cdef inline uint64_t hash_key(const int64_t* key, int n) noexcept nogil:
    cdef uint64_t h = <uint64_t>n
    cdef int k
    for k in range(n):
        h += (<uint64_t>key[k] ^ (<uint64_t>key[k] >> 31)) * MULTIPLIERS[k & 7]
    h ^= h >> 32
    h *= <uint64_t>0xD6E8FEB86659FD93
    return h ^ (h >> 32)


cdef inline bint same_key(const int64_t* a, const int64_t* b, int n) noexcept nogil:
    cdef int k
    for k in range(n):
        if a[k] != b[k]:
            return False
    return True


cdef int32_t sig_intern(SigTable* t, const NodeView* v, int32_t i) except -1:
    """The signature id of node i: an existing one with an equal key, or a new one."""
    cdef int klen = build_key(t, v, i)
    cdef int64_t* key = t.keybuf
    cdef uint64_t h = hash_key(key, klen)
    if 2 * (t.n + 1) > t.table_size:
        rehash(t)
    cdef int64_t mask = t.table_size - 1
    cdef int64_t slot = <int64_t>(h & <uint64_t>mask)
    cdef int32_t s
    while True:
        s = t.table[slot]
        if s < 0:
            break
        if t.hash[s] == h and t.key_len[s] == klen and same_key(t.keys + t.key_at[s], key, klen):
            t.count[s] += 1
            return s
        slot = (slot + 1) & mask
    if t.n >= 2147483000:
        raise MemoryError("autobatch: too many signatures in one graph")
    s = <int32_t>t.n
    if s >= t.cap:
        grow_columns(t, s + 1)
    t.keys = <int64_t*>grow(t.keys, &t.cap_keys, t.n_keys + klen, sizeof(int64_t))
    memcpy(t.keys + t.n_keys, key, klen * sizeof(int64_t))
    t.key_at[s] = t.n_keys
    t.key_len[s] = klen
    t.hash[s] = h
    t.count[s] = 1
    t.first[s] = i
    t.n_keys += klen
    t.n = s + 1
    t.table[slot] = s
    return s


cdef int grow_columns(SigTable* t, int64_t need) except -1:
    """Room for `need` signatures in every per-signature array."""
    cdef int64_t cap = next_capacity(t.cap, need)
    t.key_at = <int64_t*>resize(t.key_at, cap, sizeof(int64_t))
    t.key_len = <int32_t*>resize(t.key_len, cap, sizeof(int32_t))
    t.hash = <uint64_t*>resize(t.hash, cap, sizeof(uint64_t))
    t.count = <int32_t*>resize(t.count, cap, sizeof(int32_t))
    t.first = <int32_t*>resize(t.first, cap, sizeof(int32_t))
    t.cap = cap
    return 0


cdef int rehash(SigTable* t) except -1:
    cdef int64_t size = 1024 if t.table_size == 0 else 2 * t.table_size
    while 2 * (t.n + 1) > size:
        size *= 2
    cdef int32_t* table = <int32_t*>malloc(size * sizeof(int32_t))
    if table == NULL:
        raise MemoryError("autobatch: cannot grow the signature table")
    memset(table, 0xff, size * sizeof(int32_t))
    cdef int64_t s, slot
    for s in range(t.n):
        slot = <int64_t>(t.hash[s] & <uint64_t>(size - 1))
        while table[slot] >= 0:
            slot = (slot + 1) & (size - 1)
        table[slot] = <int32_t>s
    free(t.table)
    t.table = table
    t.table_size = size
    return 0


cdef void sig_reset(SigTable* t) noexcept nogil:
    """Forget every signature (a new graph); keep the memory. The table keeps the
    size of the largest graph the thread built: a small graph clears only the slots of
    its own signatures (each found by its probe), not the whole table, so that one
    large graph does not make every later renew_cg pay for it."""
    cdef int64_t s, slot, mask = t.table_size - 1
    if t.table != NULL:
        if 16 * t.n < t.table_size:
            for s in range(t.n):
                slot = <int64_t>(t.hash[s] & <uint64_t>mask)
                while t.table[slot] != s:
                    slot = (slot + 1) & mask
                t.table[slot] = -1
        else:
            memset(t.table, 0xff, t.table_size * sizeof(int32_t))
    t.n = 0
    t.n_keys = 0


cdef void sig_truncate(SigTable* t, int64_t n) noexcept nogil:
    """Forget the signatures n, n+1, ... (cg_revert: only nodes created after a
    checkpoint used them). They were inserted after every older one, and rehash
    inserts in id order, so clearing their slots leaves every older probe chain whole."""
    cdef int64_t slot
    if n >= t.n:
        return
    for slot in range(t.table_size):
        if t.table[slot] >= n:
            t.table[slot] = -1
    t.n_keys = t.key_at[n]
    t.n = n


cdef void sig_free(SigTable* t) noexcept nogil:
    free(t.keybuf); free(t.keys); free(t.key_at); free(t.key_len); free(t.hash)
    free(t.count); free(t.first); free(t.table)
    memset(t, 0, sizeof(SigTable))
