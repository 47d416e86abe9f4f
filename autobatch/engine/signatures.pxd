# Signatures: everything that must be equal for nodes to run as one kernel call,
# interned as full keys (never packed fields or bare hashes).
from libc.stdint cimport int32_t, int64_t, uint64_t
from autobatch.runtime.nodes cimport NodeView

ctypedef struct SigTable:
    int64_t* keybuf             # the key being built
    int64_t cap_keybuf
    int64_t* keys               # every signature's key, back to back
    int64_t n_keys, cap_keys
    int64_t* key_at             # signature s: keys[key_at[s] : key_at[s] + key_len[s]]
    int32_t* key_len
    uint64_t* hash
    int32_t* count              # nodes created with this signature
    int32_t* first              # the first of them
    int64_t n, cap              # signatures
    int32_t* table              # open addressing: signature id or -1
    int64_t table_size

cdef int32_t sig_intern(SigTable* t, const NodeView* v, int32_t i) except -1
cdef void sig_reset(SigTable* t) noexcept nogil
cdef void sig_truncate(SigTable* t, int64_t n) noexcept nogil
cdef void sig_free(SigTable* t) noexcept nogil
