# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The engine: node arrays, signatures, scheduling strategies, executor, and the
DyNet-style expression API that records nodes.

User code only appends nodes (C structs) behind tiny `Expression` handles. When a
value is needed, the ancestors that are not computed yet are grouped into batches by
a strategy and every batch runs as one kernel call (see _kernels.pyx).
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport malloc, free, realloc, qsort
from libc.string cimport memcpy, memset
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from cpython.object cimport PyObject

from autobatch._kernels cimport *

import operator

import operator

import numpy as np

cdef const OpDef* OPS = op_table()
OP_NAMES = [OPS[i].name.decode() for i in range(<int>N_OPS)]


class DimensionError(ValueError):
    """Arguments of an op have shapes that do not fit together."""


class StaleExpressionError(RuntimeError):
    """An Expression from a computation graph that has been renewed."""


cdef inline double now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef void* grow(void* p, int64_t* cap, int64_t need, size_t item) except NULL:
    """Make room for `need` items, doubling; raises MemoryError instead of crashing."""
    cdef int64_t c = cap[0]
    if need <= c and p != NULL:
        return p
    if c < 16:
        c = 16
    while c < need:
        c *= 2
    cdef void* q = realloc(p, c * item)
    if q == NULL:
        raise MemoryError("autobatch: cannot grow graph arrays")
    cap[0] = c
    return q


cdef int cmp_int32(const void* a, const void* b) noexcept nogil:
    return (<int32_t*>a)[0] - (<int32_t*>b)[0]


cdef inline uint64_t mix(uint64_t h, uint64_t v) noexcept nogil:
    h ^= v + <uint64_t>0x9E3779B97F4A7C15 + (h << 6) + (h >> 2)
    return h * <uint64_t>0xBF58476D1CE4E5B9


cdef inline int64_t shape_code(Node* n) noexcept nogil:
    return (<int64_t>n.d0) | ((<int64_t>n.d1) << 21) | ((<int64_t>n.bs) << 42)


cdef inline int64_t float_bits(float f) noexcept nogil:
    cdef int32_t bits
    memcpy(&bits, &f, 4)
    return bits


# strategy ids of the built-in (Cython) strategies; anything else is a Python object
cdef enum:
    S_NONE, S_DEPTH, S_AGENDA, S_CRITICAL, S_PYTHON


cdef class ComputationGraph:
    """One lazily evaluated graph. Create through `renew_cg()`."""
    # nodes and their arguments
    cdef Node* nodes
    cdef int64_t n_nodes, cap_nodes
    cdef int32_t* args
    cdef int64_t n_args, cap_args
    cdef int32_t* ibuf                  # per-node integer data (index lists)
    cdef int64_t n_ibuf, cap_ibuf
    cdef Arena arena                    # values and forward aux, reset on renew
    cdef Arena garena                   # gradients and backward scratch, reset per backward
    cdef Rng rng
    cdef readonly int version
    cdef list keepalive                 # Python objects whose memory nodes point into
    # signatures: interned keys
    cdef int64_t* keybuf
    cdef int64_t cap_keybuf
    cdef int64_t* sig_keys
    cdef int64_t n_sig_keys, cap_sig_keys
    cdef int32_t* sig_key_at
    cdef int32_t* sig_key_len
    cdef uint64_t* sig_hash
    cdef int32_t* sig_count             # nodes created with this signature
    cdef int32_t* sig_first             # first node with this signature
    cdef int64_t n_sigs, cap_sigs
    cdef int32_t* table                 # open addressing: sig id or -1
    cdef int64_t table_size
    # executed batches, in order
    cdef int32_t* batch_ids
    cdef int64_t n_batch_ids, cap_batch_ids
    cdef int32_t* batch_at
    cdef int32_t* batch_n
    cdef float** batch_block
    cdef int64_t n_batches, cap_batches
    # scheduler work arrays (sized like the nodes / signatures)
    cdef int32_t* mark
    cdef int32_t* depth
    cdef int32_t* height               # longest path to a node nobody needed consumes
    cdef int32_t* indeg
    cdef int32_t* loc
    cdef int64_t cap_work
    cdef int32_t stamp
    cdef int32_t* cons_at
    cdef int32_t* cons
    cdef int32_t* needed
    cdef int32_t* picked
    cdef int64_t cap_cons, cap_needed, cap_edges, cap_rd, cap_picked
    cdef int32_t* rd_at                 # per signature: ready nodes rd[rd_at : rd_at + rd_n]
    cdef int32_t* rd_n
    cdef double* sig_avg_depth          # per signature: mean depth of its pending nodes
    cdef double* sig_avg_height         # ... and mean height
    cdef int32_t* rd
    cdef int32_t* active                # signatures with ready nodes
    cdef int32_t* active_pos
    cdef int64_t n_active, cap_sigwork
    # strategy
    cdef int strategy_id
    cdef readonly object strategy
    # statistics
    cdef public double t_build, t_schedule, t_forward, t_backward
    cdef double t_last
    cdef public int n_forward_calls, n_backward_calls

    def __cinit__(self):
        self.table = NULL
        self.table_size = 0

    def __init__(self, strategy):
        self.keepalive = []
        self.version = 0
        self._reset_tables()
        self.set_strategy(strategy)
        self.t_last = now()

    def __dealloc__(self):
        arena_free(&self.arena)
        arena_free(&self.garena)
        free(self.nodes); free(self.args); free(self.ibuf); free(self.keybuf)
        free(self.sig_keys); free(self.sig_key_at); free(self.sig_key_len); free(self.sig_hash)
        free(self.sig_count); free(self.sig_first); free(self.table)
        free(self.batch_ids); free(self.batch_at); free(self.batch_n); free(self.batch_block)
        free(self.mark); free(self.depth); free(self.height); free(self.indeg); free(self.loc)
        free(self.cons_at); free(self.cons); free(self.needed); free(self.picked)
        free(self.rd_at); free(self.rd_n); free(self.sig_avg_depth); free(self.sig_avg_height); free(self.rd)
        free(self.active); free(self.active_pos)

    cdef void _reset_tables(self):
        self.n_nodes = 0
        self.n_args = 0
        self.n_ibuf = 0
        self.n_sigs = 0
        self.n_sig_keys = 0
        self.n_batch_ids = 0
        self.n_batches = 0
        if self.table != NULL:
            memset(self.table, 0xff, self.table_size * sizeof(int32_t))
        self.t_build = self.t_schedule = self.t_forward = self.t_backward = 0
        self.n_forward_calls = self.n_backward_calls = 0

    cdef renew(self, strategy, int version, uint64_t seed):
        """Start a new graph in the same memory (arenas keep their capacity)."""
        arena_reset(&self.arena)
        arena_reset(&self.garena)
        self.keepalive = []
        self.version = version
        self._reset_tables()
        self.set_strategy(strategy)
        rng_seed(&self.rng, seed)
        self.t_last = now()

    cpdef set_strategy(self, strategy):
        s = resolve_strategy(strategy)
        self.strategy = s
        if isinstance(s, BuiltinStrategy):
            self.strategy_id = (<BuiltinStrategy>s).sid
        else:
            self.strategy_id = S_PYTHON

    # ------------------------------------------------------------ nodes ----

    cdef int32_t add_node(self, int op, int nargs, const int32_t* argv, int d0, int d1, int bs,
                          int ia, int ib, float fa, int32_t idata) except -1:
        cdef int64_t i = self.n_nodes
        cdef int a
        if i >= 2147483000:
            raise MemoryError("autobatch: too many nodes in one graph")
        self.nodes = <Node*>grow(self.nodes, &self.cap_nodes, i + 1, sizeof(Node))
        self.args = <int32_t*>grow(self.args, &self.cap_args, self.n_args + nargs, sizeof(int32_t))
        cdef Node* n = &self.nodes[i]
        memset(n, 0, sizeof(Node))
        n.op = op
        n.nargs = nargs
        n.args_at = <int32_t>self.n_args
        n.d0 = d0
        n.d1 = d1
        n.bs = bs
        n.size = d0 * d1 * bs
        n.ia = ia
        n.ib = ib
        n.fa = fa
        n.idata = idata
        for a in range(nargs):
            self.args[self.n_args + a] = argv[a]
            if self.nodes[argv[a]].flags & F_NEEDS_GRAD:
                n.flags |= F_NEEDS_GRAD
        if op == OP_NOBACKPROP:
            n.flags &= ~F_NEEDS_GRAD
        self.n_args += nargs
        self.n_nodes = i + 1
        if OPS[op].kind == LEAF:
            n.sig = -1
            n.flags |= F_DONE
        else:
            n.sig = self.intern_signature(<int32_t>i)
        return <int32_t>i

    cdef float* leaf_memory(self, int32_t i):
        """Arena memory for a leaf's value, filled by the caller."""
        cdef float* p = arena_alloc(&self.arena, self.nodes[i].size)
        self.nodes[i].val = p
        return p

    cdef int32_t add_ints(self, object values, int count) except -1:
        """Store per-node integer data; returns its offset in ibuf."""
        cdef int64_t at = self.n_ibuf
        cdef int k
        self.ibuf = <int32_t*>grow(self.ibuf, &self.cap_ibuf, at + count, sizeof(int32_t))
        for k in range(count):
            self.ibuf[at + k] = values[k]
        self.n_ibuf = at + count
        return <int32_t>at

    # ------------------------------------------------------- signatures ----

    cdef int32_t intern_signature(self, int32_t i) except -1:
        """Everything that must be equal for nodes to share a kernel call: op, shape,
        attributes, identity of shared arguments, shapes of stacked arguments."""
        cdef Node* n = &self.nodes[i]
        cdef int kind = OPS[n.op].kind
        cdef int64_t need = 9 + n.nargs
        cdef int a, k
        cdef int32_t arg
        cdef bint shared
        self.keybuf = <int64_t*>grow(self.keybuf, &self.cap_keybuf, need, sizeof(int64_t))
        cdef int64_t* key = self.keybuf
        key[0] = n.op
        key[1] = n.nargs
        key[2] = shape_code(n)
        key[3] = n.ia
        key[4] = n.ib
        key[5] = float_bits(n.fa)
        key[6] = i if kind == UNBATCHED else -1
        key[7] = 0
        key[8] = 0
        for a in range(n.nargs):
            arg = self.args[n.args_at + a]
            shared = (kind == SHARED_FIRST and a == 0) or (kind == SHARED_AFFINE and a % 2 == 1)
            key[9 + a] = (-1 - <int64_t>arg) if shared else shape_code(&self.nodes[arg])
        cdef int klen = <int>need
        cdef uint64_t h = 1469598103934665603
        for k in range(klen):
            h = mix(h, <uint64_t>key[k])
        if 2 * (self.n_sigs + 1) > self.table_size:
            self._rehash()
        cdef int64_t mask = self.table_size - 1
        cdef int64_t slot = <int64_t>(h & <uint64_t>mask)
        cdef int32_t s
        while True:
            s = self.table[slot]
            if s < 0:
                break
            if self.sig_hash[s] == h and self.sig_key_len[s] == klen and \
                    memcmp_i64(self.sig_keys + self.sig_key_at[s], key, klen):
                self.sig_count[s] += 1
                return s
            slot = (slot + 1) & mask
        s = <int32_t>self.n_sigs
        self.sig_key_at = <int32_t*>grow(self.sig_key_at, &self.cap_sigs, s + 1, sizeof(int32_t))
        cdef int64_t cap = self.cap_sigs
        self.sig_key_len = <int32_t*>realloc(self.sig_key_len, cap * sizeof(int32_t))
        self.sig_hash = <uint64_t*>realloc(self.sig_hash, cap * sizeof(uint64_t))
        self.sig_count = <int32_t*>realloc(self.sig_count, cap * sizeof(int32_t))
        self.sig_first = <int32_t*>realloc(self.sig_first, cap * sizeof(int32_t))
        if self.sig_key_len == NULL or self.sig_hash == NULL or self.sig_count == NULL or self.sig_first == NULL:
            raise MemoryError()
        self.sig_keys = <int64_t*>grow(self.sig_keys, &self.cap_sig_keys, self.n_sig_keys + klen, sizeof(int64_t))
        memcpy(self.sig_keys + self.n_sig_keys, key, klen * sizeof(int64_t))
        self.sig_key_at[s] = <int32_t>self.n_sig_keys
        self.sig_key_len[s] = klen
        self.sig_hash[s] = h
        self.sig_count[s] = 1
        self.sig_first[s] = i
        self.n_sig_keys += klen
        self.n_sigs = s + 1
        self.table[slot] = s
        return s

    cdef int _rehash(self) except -1:
        cdef int64_t size = 1024 if self.table_size == 0 else 2 * self.table_size
        while 2 * (self.n_sigs + 1) > size:
            size *= 2
        cdef int32_t* t = <int32_t*>malloc(size * sizeof(int32_t))
        if t == NULL:
            raise MemoryError()
        memset(t, 0xff, size * sizeof(int32_t))
        cdef int64_t s, slot
        for s in range(self.n_sigs):
            slot = <int64_t>(self.sig_hash[s] & <uint64_t>(size - 1))
            while t[slot] >= 0:
                slot = (slot + 1) & (size - 1)
            t[slot] = <int32_t>s
        free(self.table)
        self.table = t
        self.table_size = size
        return 0

    # ---------------------------------------------------------- forward ----

    cdef int forward_to(self, int32_t target) except -1:
        """Compute `target` and every ancestor not computed yet, in batches."""
        if self.nodes[target].flags & F_DONE:
            return 0
        cdef double t0 = now()
        self.t_build += t0 - self.t_last
        self.n_forward_calls += 1
        cdef int64_t count = self.collect_needed(target)
        self.prepare_schedule(count)
        cdef double t_sched = now() - t0
        cdef double t_run = 0, t1
        cdef int n
        cdef int64_t remaining = count, pos = 0
        if self.strategy_id == S_NONE:
            # creation order is a topological order; every node is its own batch
            for pos in range(count):
                t1 = now()
                self.run_batch(&self.needed[pos], 1)
                t_run += now() - t1
        else:
            self.push_ready_initial(count)
            while remaining > 0:
                t1 = now()
                n = self.pick()
                t_sched += now() - t1
                t1 = now()
                self.run_batch(self.picked, n)
                t_run += now() - t1
                t1 = now()
                self.release(n)
                t_sched += now() - t1
                remaining -= n
        self.t_schedule += t_sched
        self.t_forward += t_run
        self.t_last = now()
        return 0

    cdef int ensure_work(self) except -1:
        cdef int64_t cap = self.cap_work
        if cap >= self.n_nodes:
            return 0
        cap = self.n_nodes * 2
        self.mark = <int32_t*>realloc(self.mark, cap * sizeof(int32_t))
        self.depth = <int32_t*>realloc(self.depth, cap * sizeof(int32_t))
        self.height = <int32_t*>realloc(self.height, cap * sizeof(int32_t))
        self.indeg = <int32_t*>realloc(self.indeg, cap * sizeof(int32_t))
        self.loc = <int32_t*>realloc(self.loc, cap * sizeof(int32_t))
        if self.mark == NULL or self.depth == NULL or self.height == NULL or self.indeg == NULL or self.loc == NULL:
            raise MemoryError()
        memset(self.mark + self.cap_work, 0, (cap - self.cap_work) * sizeof(int32_t))
        self.cap_work = cap
        return 0

    cdef int64_t collect_needed(self, int32_t target) except -1:
        """Mark the uncomputed ancestors of target; list them in id (= topological) order."""
        self.ensure_work()
        self.stamp += 1
        cdef int32_t st = self.stamp
        cdef int64_t head = 0, count = 0
        cdef int a
        cdef int32_t x, y
        self.needed = <int32_t*>grow(self.needed, &self.cap_needed, self.n_nodes, sizeof(int32_t))
        # breadth-first walk with `needed` as the queue: cost is the size of the
        # uncomputed part only, so calling value() at every step of a parser stays linear
        self.mark[target] = st
        self.needed[count] = target
        count += 1
        while head < count:
            x = self.needed[head]
            head += 1
            for a in range(self.nodes[x].nargs):
                y = self.args[self.nodes[x].args_at + a]
                if self.mark[y] != st and not (self.nodes[y].flags & F_DONE):
                    self.mark[y] = st
                    self.needed[count] = y
                    count += 1
        # id order (a topological order): scan the id range when the needed nodes fill
        # much of it (a whole-graph forward), else sort the few (a parser's step)
        cdef int32_t lo = target, i
        for head in range(count):
            if self.needed[head] < lo:
                lo = self.needed[head]
        if target - lo + 1 <= 8 * count:
            head = 0
            for i in range(lo, target + 1):
                if self.mark[i] == st and not (self.nodes[i].flags & F_DONE):
                    self.needed[head] = i
                    head += 1
        else:
            qsort(self.needed, count, sizeof(int32_t), cmp_int32)
        return count

    cdef int prepare_schedule(self, int64_t count) except -1:
        """Depths, in-degrees, consumer lists and per-signature ready lists."""
        cdef int64_t p, q, e = 0, s
        cdef int a
        cdef int32_t i, y, d
        cdef Node* n
        self.cons_at = <int32_t*>grow(self.cons_at, &self.cap_cons, count + 1, sizeof(int32_t))
        for p in range(count):
            self.loc[self.needed[p]] = <int32_t>p
            self.cons_at[p] = 0
        self.cons_at[count] = 0
        # depth, in-degree and consumer counts
        for p in range(count):
            i = self.needed[p]
            n = &self.nodes[i]
            d = 0
            self.indeg[i] = 0
            for a in range(n.nargs):
                y = self.args[n.args_at + a]
                if not (self.nodes[y].flags & F_DONE):
                    self.indeg[i] += 1
                    self.cons_at[self.loc[y]] += 1
                    e += 1
                    if self.depth[y] > d:
                        d = self.depth[y]
            self.depth[i] = d + 1
        cdef int64_t cap_edges = e
        # prefix sums -> start offsets (cons_at[p] becomes the fill cursor)
        cdef int32_t acc = 0, c
        for p in range(count):
            c = self.cons_at[p]
            self.cons_at[p] = acc
            acc += c
        self.cons_at[count] = acc
        self.cons = <int32_t*>grow(self.cons, &self.cap_edges, cap_edges + 1, sizeof(int32_t))
        # fill consumers (cons_at[q] is q's fill cursor)
        for p in range(count):
            i = self.needed[p]
            n = &self.nodes[i]
            for a in range(n.nargs):
                y = self.args[n.args_at + a]
                if not (self.nodes[y].flags & F_DONE):
                    q = self.loc[y]
                    self.cons[self.cons_at[q]] = i
                    self.cons_at[q] += 1
        # cons_at[q] now points at the end of q's list; shift back to starts
        for p in range(count, 0, -1):
            self.cons_at[p] = self.cons_at[p - 1]
        self.cons_at[0] = 0
        # per-signature ready lists, sized by the count of needed nodes of that signature
        self._ensure_sigwork(count)
        # heights, in reverse topological order: 1 + the highest needed consumer
        for p in range(count - 1, -1, -1):
            i = self.needed[p]
            d = 0
            for q in range(self.cons_at[p], self.cons_at[p + 1]):
                if self.height[self.cons[q]] + 1 > d:
                    d = self.height[self.cons[q]] + 1
            self.height[i] = d
        for s in range(self.n_sigs):
            self.rd_n[s] = 0
            self.sig_avg_depth[s] = 0
            self.sig_avg_height[s] = 0
        for p in range(count):
            s = self.nodes[self.needed[p]].sig
            self.rd_n[s] += 1
            self.sig_avg_depth[s] += self.depth[self.needed[p]]
            self.sig_avg_height[s] += self.height[self.needed[p]]
        acc = 0
        for s in range(self.n_sigs):
            self.rd_at[s] = acc
            acc += self.rd_n[s]
            if self.rd_n[s] > 0:
                self.sig_avg_depth[s] /= self.rd_n[s]
                self.sig_avg_height[s] /= self.rd_n[s]
            self.rd_n[s] = 0
            self.active_pos[s] = -1
        self.n_active = 0
        return 0

    cdef int _ensure_sigwork(self, int64_t count) except -1:
        cdef int64_t cap = self.n_sigs + 1
        if cap > self.cap_sigwork:
            cap *= 2
            self.rd_at = <int32_t*>realloc(self.rd_at, cap * sizeof(int32_t))
            self.rd_n = <int32_t*>realloc(self.rd_n, cap * sizeof(int32_t))
            self.sig_avg_depth = <double*>realloc(self.sig_avg_depth, cap * sizeof(double))
            self.sig_avg_height = <double*>realloc(self.sig_avg_height, cap * sizeof(double))
            self.active = <int32_t*>realloc(self.active, cap * sizeof(int32_t))
            self.active_pos = <int32_t*>realloc(self.active_pos, cap * sizeof(int32_t))
            if self.rd_at == NULL or self.rd_n == NULL or self.sig_avg_depth == NULL or self.sig_avg_height == NULL or \
                    self.active == NULL or self.active_pos == NULL:
                raise MemoryError()
            self.cap_sigwork = cap
        self.rd = <int32_t*>grow(self.rd, &self.cap_rd, count + 1, sizeof(int32_t))
        self.picked = <int32_t*>grow(self.picked, &self.cap_picked, count + 1, sizeof(int32_t))
        return 0

    cdef inline void make_ready(self, int32_t i) noexcept nogil:
        cdef int32_t s = self.nodes[i].sig
        self.rd[self.rd_at[s] + self.rd_n[s]] = i
        self.rd_n[s] += 1
        if self.active_pos[s] < 0:
            self.active_pos[s] = <int32_t>self.n_active
            self.active[self.n_active] = s
            self.n_active += 1

    cdef inline void deactivate(self, int32_t s) noexcept nogil:
        cdef int32_t p = self.active_pos[s]
        cdef int32_t last = self.active[self.n_active - 1]
        self.active[p] = last
        self.active_pos[last] = p
        self.active_pos[s] = -1
        self.n_active -= 1

    cdef void push_ready_initial(self, int64_t count) noexcept nogil:
        cdef int64_t p
        for p in range(count):
            if self.indeg[self.needed[p]] == 0:
                self.make_ready(self.needed[p])

    cdef int take(self, int32_t s, int32_t max_depth) noexcept nogil:
        """Move the ready nodes of signature s (with depth <= max_depth) to `picked`."""
        cdef int32_t* lst = self.rd + self.rd_at[s]
        cdef int k, n = 0, keep = 0
        for k in range(self.rd_n[s]):
            if self.depth[lst[k]] <= max_depth:
                self.picked[n] = lst[k]
                n += 1
            else:
                lst[keep] = lst[k]
                keep += 1
        self.rd_n[s] = keep
        if keep == 0:
            self.deactivate(s)
        qsort(self.picked, n, sizeof(int32_t), cmp_int32)
        return n

    cdef int pick(self) except -1:
        """One batch from the ready frontier, by the graph's strategy."""
        cdef int64_t k
        cdef int32_t s, best = -1, d, k2
        cdef double avg, best_avg = 0
        cdef int32_t* lst
        if self.strategy_id == S_AGENDA:
            # DyNet's agenda: unbatchable first, else the signature whose pending nodes
            # (ready or not) have the lowest average depth; static per forward, so a
            # signature that still has deep nodes to come waits for them
            for k in range(self.n_active):
                s = self.active[k]
                if OPS[self.nodes[self.sig_first[s]].op].kind == UNBATCHED:
                    return self.take(s, 2147483647)
                avg = self.sig_avg_depth[s]
                if best < 0 or avg < best_avg or (avg == best_avg and s < best):
                    best = s
                    best_avg = avg
            return self.take(best, 2147483647)
        if self.strategy_id == S_CRITICAL:
            # critical path first: the signature whose pending nodes have the longest
            # way still to go; side branches (an output layer per position) wait
            # and run together; ties go to the lower average depth
            for k in range(self.n_active):
                s = self.active[k]
                if OPS[self.nodes[self.sig_first[s]].op].kind == UNBATCHED:
                    return self.take(s, 2147483647)
                if best < 0 or self.sig_avg_height[s] > best_avg or \
                        (self.sig_avg_height[s] == best_avg and
                         self.sig_avg_depth[s] < self.sig_avg_depth[best]):
                    best = s
                    best_avg = self.sig_avg_height[s]
            return self.take(best, 2147483647)
        if self.strategy_id == S_DEPTH:
            # TensorFlow Fold: the lowest depth first, one signature at a time
            for k in range(self.n_active):
                s = self.active[k]
                lst = self.rd + self.rd_at[s]
                for k2 in range(self.rd_n[s]):
                    d = self.depth[lst[k2]]
                    if best < 0 or d < best_avg or (d == best_avg and s < best):
                        best = s
                        best_avg = d
            return self.take(best, <int32_t>best_avg)
        return self.pick_python()

    cdef int pick_python(self) except -1:
        frontier = Frontier.__new__(Frontier)
        (<Frontier>frontier).g = self
        try:
            choice = self.strategy.select(frontier)
        finally:
            (<Frontier>frontier).g = None     # a kept frontier must not read stale arrays
        nodes = None
        if isinstance(choice, tuple):
            if len(choice) != 2:
                raise ValueError(f"strategy {self.strategy!r}: select() returned a tuple of "
                                 f"{len(choice)} items; expected (signature, node_ids)")
            choice, nodes = choice
        if isinstance(choice, bool) or not isinstance(choice, (int, np.integer)):
            raise TypeError(f"strategy {self.strategy!r}: select() must return a signature id "
                            f"(int) or (signature, node_ids), not {type(choice).__name__}")
        if not (0 <= choice < self.n_sigs) or self.active_pos[<int32_t>choice] < 0:
            raise ValueError(f"strategy {self.strategy!r} chose signature {choice}, which has no ready node")
        cdef int32_t s = <int32_t>choice
        if nodes is None:
            return self.take(s, 2147483647)
        try:
            wanted = set(operator.index(x) for x in nodes)
        except TypeError:
            raise TypeError(f"strategy {self.strategy!r}: node ids must be ints") from None
        if not wanted:
            raise ValueError(f"strategy {self.strategy!r} chose no node")
        cdef int32_t* lst = self.rd + self.rd_at[s]
        cdef int k, n = 0, keep = 0
        for k in range(self.rd_n[s]):
            if lst[k] in wanted:
                n += 1
        if n != len(wanted):
            raise ValueError(f"strategy {self.strategy!r} chose nodes that are not ready "
                             f"or do not have signature {s}")
        n = 0
        for k in range(self.rd_n[s]):
            if lst[k] in wanted:
                self.picked[n] = lst[k]
                n += 1
            else:
                lst[keep] = lst[k]
                keep += 1
        self.rd_n[s] = keep
        if keep == 0:
            self.deactivate(s)
        qsort(self.picked, n, sizeof(int32_t), cmp_int32)
        return n

    cdef void release(self, int n) noexcept nogil:
        """The picked nodes are computed: their consumers may become ready."""
        cdef int j
        cdef int32_t p, c, k
        for j in range(n):
            p = self.loc[self.picked[j]]
            for k in range(self.cons_at[p], self.cons_at[p + 1]):
                c = self.cons[k]
                self.indeg[c] -= 1
                if self.indeg[c] == 0:
                    self.make_ready(c)

    cdef int run_batch(self, int32_t* ids, int n) except -1:
        """Run one batch: outputs contiguous in the arena, one kernel call."""
        cdef Node* n0 = &self.nodes[ids[0]]
        cdef int64_t per = n0.size
        cdef float* block = arena_alloc(&self.arena, per * n)
        cdef int j
        for j in range(n):
            self.nodes[ids[j]].val = block + j * per
        cdef int64_t at = self.n_batch_ids
        self.batch_ids = <int32_t*>grow(self.batch_ids, &self.cap_batch_ids, at + n, sizeof(int32_t))
        memcpy(self.batch_ids + at, ids, n * sizeof(int32_t))
        self.n_batch_ids = at + n
        cdef int64_t nb = self.n_batches
        self.batch_at = <int32_t*>grow(self.batch_at, &self.cap_batches, nb + 1, sizeof(int32_t))
        cdef int64_t cap = self.cap_batches
        self.batch_n = <int32_t*>realloc(self.batch_n, cap * sizeof(int32_t))
        self.batch_block = <float**>realloc(self.batch_block, cap * sizeof(float*))
        if self.batch_n == NULL or self.batch_block == NULL:
            raise MemoryError()
        self.batch_at[nb] = <int32_t>at
        self.batch_n[nb] = n
        self.batch_block[nb] = block
        self.n_batches = nb + 1
        cdef Batch b
        b.nodes = self.nodes
        b.args = self.args
        b.ibuf = self.ibuf
        b.ids = self.batch_ids + at
        b.n = n
        b.block = block
        b.arena = &self.arena
        b.scratch = &self.garena
        b.rng = &self.rng
        b.defer = NULL
        with nogil:
            OPS[n0.op].fwd(&b)
        for j in range(n):
            self.nodes[ids[j]].flags |= F_DONE
        return 0

    # --------------------------------------------------------- backward ----

    cdef int backward_from(self, int32_t target) except -1:
        self.forward_to(target)
        cdef Node* t = &self.nodes[target]
        if t.d0 * t.d1 != 1:
            raise ValueError(f"backward() needs a scalar expression; this one has shape "
                             f"{self.shape_of(target)} (sum it first, e.g. with dy.sum_elems)")
        cdef double t0 = now()
        self.t_build += t0 - self.t_last
        self.n_backward_calls += 1
        arena_reset(&self.garena)
        self.ensure_work()
        # ancestors of target (all computed)
        self.stamp += 1
        cdef int32_t st = self.stamp
        self.needed = <int32_t*>grow(self.needed, &self.cap_needed, self.n_nodes, sizeof(int32_t))
        cdef int64_t top = 0, nanc = 0, k
        cdef int a
        cdef int32_t x, y
        cdef int64_t sink_size = 1
        self.mark[target] = st
        self.needed[nanc] = target
        nanc += 1
        while top < nanc:
            x = self.needed[top]
            top += 1
            for a in range(self.nodes[x].nargs):
                y = self.args[self.nodes[x].args_at + a]
                if self.mark[y] != st:
                    self.mark[y] = st
                    self.needed[nanc] = y
                    nanc += 1
        # leaves: gradient storage of trainable ones is the parameter's; others write a sink.
        # Nodes that are not ancestors of target still need valid gradient storage: a batch
        # holding an ancestor may hold non-ancestors too, and its kernel adds their (zero)
        # gradient into their arguments. They share a zeroed sink, which stays zero.
        for k in range(self.n_nodes):
            if self.nodes[k].size > sink_size:
                sink_size = self.nodes[k].size
        cdef float* sink = arena_alloc(&self.garena, sink_size)
        cdef float* zsink = arena_alloc(&self.garena, sink_size)
        memset(zsink, 0, sink_size * sizeof(float))
        for k in range(self.n_nodes):
            if OPS[self.nodes[k].op].kind == LEAF and not (self.nodes[k].flags & F_ALIAS and self.nodes[k].flags & F_NEEDS_GRAD):
                self.nodes[k].grad = sink if self.mark[k] == st else zsink
        # one zeroed gradient block per batch that holds an ancestor
        cdef int64_t bi, j, per
        cdef int32_t* ids
        cdef bint any_anc, any_work
        cdef uint8_t* run = <uint8_t*>malloc(self.n_batches + 1)
        if run == NULL:
            raise MemoryError()
        cdef float* g
        for bi in range(self.n_batches):
            ids = self.batch_ids + self.batch_at[bi]
            any_anc = any_work = False
            for j in range(self.batch_n[bi]):
                if self.mark[ids[j]] == st:
                    any_anc = True
                    if self.nodes[ids[j]].flags & F_NEEDS_GRAD:
                        any_work = True
            run[bi] = any_work
            if any_anc:
                per = self.nodes[ids[0]].size
                g = arena_alloc(&self.garena, per * self.batch_n[bi])
                memset(g, 0, per * self.batch_n[bi] * sizeof(float))
                for j in range(self.batch_n[bi]):
                    self.nodes[ids[j]].grad = g + j * per
            else:
                for j in range(self.batch_n[bi]):
                    self.nodes[ids[j]].grad = zsink
        t = &self.nodes[target]
        for j in range(t.bs):
            t.grad[j] += 1.0
        cdef Batch b
        b.nodes = self.nodes
        b.args = self.args
        b.ibuf = self.ibuf
        b.arena = &self.arena
        b.scratch = &self.garena
        b.rng = &self.rng
        # A batch may mix ancestors of target with other nodes: backward runs over the
        # ancestors only, so that nothing flows from nodes the loss does not use (not
        # even 0 * inf = NaN from a node whose local derivative is infinite).
        cdef int64_t most = 1
        for bi in range(self.n_batches):
            if self.batch_n[bi] > most:
                most = self.batch_n[bi]
        cdef int32_t* sub = <int32_t*>malloc(most * sizeof(int32_t))
        # room for one postponed weight gradient per product term
        cdef WeightGrads defer
        defer.n = 0
        defer.cap = 0
        for bi in range(self.n_batches):
            if run[bi]:
                defer.cap += max(1, self.nodes[self.batch_ids[self.batch_at[bi]]].nargs // 2)
        defer.items = <WeightGrad*>malloc((defer.cap + 1) * sizeof(WeightGrad))
        if sub == NULL or defer.items == NULL:
            free(sub)
            free(defer.items)
            free(run)
            raise MemoryError()
        # postponing weight gradients batches them across nodes: not for 'none', the
        # unbatched reference
        b.defer = NULL if self.strategy_id == S_NONE else &defer
        cdef int32_t nsub
        with nogil:
            for bi in range(self.n_batches - 1, -1, -1):
                if not run[bi]:
                    continue
                ids = self.batch_ids + self.batch_at[bi]
                nsub = 0
                for j in range(self.batch_n[bi]):
                    if self.mark[ids[j]] == st:
                        sub[nsub] = ids[j]
                        nsub += 1
                if nsub == self.batch_n[bi]:
                    b.ids = ids
                    b.n = nsub
                    b.block = self.nodes[ids[0]].grad
                else:
                    b.ids = sub
                    b.n = nsub
                    b.block = NULL
                OPS[self.nodes[ids[0]].op].bwd(&b)
            flush_weight_grads(&defer, &self.garena)
        free(defer.items)
        free(sub)
        free(run)
        self.t_backward += now() - t0
        self.t_last = now()
        return 0

    # ------------------------------------------------------ inspection ----

    cdef tuple shape_of(self, int32_t i):
        cdef Node* n = &self.nodes[i]
        if n.d1 == 1:
            return (n.d0,)
        return (n.d0, n.d1)

    cdef object value_array(self, int32_t i, bint grad):
        """Copy of a node's value (or gradient) as numpy, DyNet's shape conventions."""
        cdef Node* n = &self.nodes[i]
        out = np.empty(n.size, dtype=np.float32)
        cdef float[::1] view = out
        cdef float* src = n.grad if grad else n.val
        if grad and (src == NULL or not (n.flags & F_NEEDS_GRAD)):
            out[:] = 0
        elif n.size > 0:
            memcpy(&view[0], src, n.size * sizeof(float))
        shape = self.shape_of(i)
        if n.bs > 1:
            shape = shape + (n.bs,)
        return out.reshape(shape, order="F")

    def stats(self):
        """Statistics of what ran so far in this graph (see docs/statistics)."""
        hist = {}
        unbatched = {}
        cdef int64_t bi, nodes_run = 0
        cdef int32_t first, n, s
        for bi in range(self.n_batches):
            first = self.batch_ids[self.batch_at[bi]]
            n = self.batch_n[bi]
            nodes_run += n
            name = OP_NAMES[self.nodes[first].op]
            h = hist.setdefault(name, {})
            h[n] = h.get(n, 0) + 1
            if n == 1:
                s = self.nodes[first].sig
                if OPS[self.nodes[first].op].kind == UNBATCHED:
                    why = "op is not batchable"
                elif self.sig_count[s] == 1:
                    why = "no other node has its signature"
                else:
                    why = "no other node with its signature was ready" if self.strategy_id != S_NONE \
                        else "strategy 'none' runs every node alone"
                u = unbatched.setdefault(name, {})
                u[why] = u.get(why, 0) + 1
        return {
            "strategy": getattr(self.strategy, "name", repr(self.strategy)),
            "nodes": int(self.n_nodes),
            "nodes_run": int(nodes_run),
            "batches": int(self.n_batches),
            "signatures": int(self.n_sigs),
            "batch_sizes": hist,
            "unbatched": unbatched,
            "unbatched_nodes": sum(sum(v.values()) for v in unbatched.values()),
            "forward_calls": self.n_forward_calls,
            "backward_calls": self.n_backward_calls,
            "seconds": {"build": self.t_build, "schedule": self.t_schedule,
                        "forward": self.t_forward, "backward": self.t_backward},
            # bytes used by this graph's values, and by its last backward; the
            # capacity is what the process keeps for the next graph
            "arena_bytes": int(self.arena.peak), "grad_arena_bytes": int(self.garena.peak),
            "arena_capacity_bytes": int(sum(self.arena.caps[i] for i in range(self.arena.nchunks))
                                        + sum(self.garena.caps[i] for i in range(self.garena.nchunks))),
        }

    def batches(self):
        """The batches in execution order: a list of (op name, [node ids])."""
        out = []
        cdef int64_t bi, j
        for bi in range(self.n_batches):
            ids = [self.batch_ids[self.batch_at[bi] + j] for j in range(self.batch_n[bi])]
            out.append((OP_NAMES[self.nodes[ids[0]].op], ids))
        return out

    def print_batches(self, file=None):
        """Debug view: every batch in execution order with its signature and shapes."""
        import sys
        file = file or sys.stdout
        cdef int64_t bi
        cdef int32_t first
        for bi in range(self.n_batches):
            first = self.batch_ids[self.batch_at[bi]]
            n = self.batch_n[bi]
            ids = [self.batch_ids[self.batch_at[bi] + j] for j in range(min(n, 8))]
            more = "" if n <= 8 else f" ... (+{n - 8})"
            print(f"#{bi:<5d} {OP_NAMES[self.nodes[first].op]:<22s} x{n:<4d} sig={self.nodes[first].sig:<5d} "
                  f"shape={self.shape_of(first)}x{self.nodes[first].bs} nodes={ids}{more}", file=file)

    def node_info(self, int32_t i):
        """(op name, shape, batch size, signature id, argument ids) of node i."""
        if not 0 <= i < self.n_nodes:
            raise IndexError(f"no node {i} in this graph ({self.n_nodes} nodes)")
        cdef Node* n = &self.nodes[i]
        return (OP_NAMES[n.op], self.shape_of(i), n.bs, n.sig,
                [self.args[n.args_at + a] for a in range(n.nargs)])

    def batch_lower_bound(self):
        """A lower bound on the number of batches any strategy needs for the scheduled
        part of this graph: for each signature, the most nodes of that signature on
        any one dependency path (they can never share a batch). Returns
        (total, {signature: bound})."""
        cdef int64_t N = self.n_nodes, i
        cdef int32_t s, best, v
        cdef int a
        cdef Node* n
        cdef int32_t* longest = <int32_t*>malloc((N + 1) * sizeof(int32_t))
        if longest == NULL:
            raise MemoryError()
        bounds = {}
        try:
            for s in range(self.n_sigs):
                best = 0
                for i in range(N):             # ids are a topological order
                    n = &self.nodes[i]
                    v = 0
                    for a in range(n.nargs):
                        if longest[self.args[n.args_at + a]] > v:
                            v = longest[self.args[n.args_at + a]]
                    if n.sig == s:
                        v += 1
                    longest[i] = v
                    if v > best:
                        best = v
                bounds[s] = best
        finally:
            free(longest)
        return sum(bounds.values()), bounds

    def signature_nodes(self):
        """{signature id: number of nodes created with it}."""
        return {s: self.sig_count[s] for s in range(self.n_sigs)}

    @property
    def num_nodes(self):
        return int(self.n_nodes)

    def forward(self, Expression e):
        _check(e)
        self.forward_to(e.idx)

    def backward(self, Expression e):
        _check(e)
        self.backward_from(e.idx)


cdef inline bint memcmp_i64(const int64_t* a, const int64_t* b, int n) noexcept nogil:
    cdef int k
    for k in range(n):
        if a[k] != b[k]:
            return False
    return True


# --------------------------------------------------------------- strategies ----

cdef class BuiltinStrategy:
    """A batching strategy implemented in Cython over C arrays."""
    cdef readonly int sid
    cdef readonly str name
    cdef readonly str description

    def __init__(self, int sid, str name, str description):
        self.sid = sid
        self.name = name
        self.description = description

    def __repr__(self):
        return f"<strategy {self.name!r} (built in)>"


cdef class Frontier:
    """Read-only view of the ready nodes, given to a Python strategy's `select()`.

    Nodes are ready when all their arguments are computed. They are grouped by
    signature: every group can run as one batch. `select` returns a signature id
    (run all its ready nodes) or `(signature, node_ids)` (run those only).
    """
    cdef ComputationGraph g

    cdef ComputationGraph _graph(self):
        if self.g is None:
            raise RuntimeError("this Frontier is only valid during select()")
        return self.g

    def signatures(self):
        """Signature ids that have ready nodes."""
        g = self._graph()
        return sorted(g.active[k] for k in range(g.n_active))

    def nodes(self, int32_t sig):
        """Ready node ids of a signature."""
        g = self._graph()
        self._check(sig)
        return [g.rd[g.rd_at[sig] + k] for k in range(g.rd_n[sig])]

    def depths(self, int32_t sig):
        """Depth (1 + the deepest argument still to compute) of each ready node."""
        g = self._graph()
        self._check(sig)
        return [g.depth[g.rd[g.rd_at[sig] + k]] for k in range(g.rd_n[sig])]

    def average_depth(self, int32_t sig):
        """Mean depth of all nodes of this signature still to compute in this forward
        (ready or not): the agenda strategy's priority."""
        g = self._graph()
        self._check(sig)
        return g.sig_avg_depth[sig]

    def average_height(self, int32_t sig):
        """Mean height (longest path to an output of this forward) of all nodes of this
        signature still to compute: the critical strategy's priority."""
        g = self._graph()
        self._check(sig)
        return g.sig_avg_height[sig]

    def op_name(self, int32_t sig):
        g = self._graph()
        self._check(sig)
        return OP_NAMES[g.nodes[g.sig_first[sig]].op]

    def batchable(self, int32_t sig):
        """False for ops that never share a batch."""
        g = self._graph()
        self._check(sig)
        return OPS[g.nodes[g.sig_first[sig]].op].kind != UNBATCHED

    def total_nodes(self, int32_t sig):
        """Nodes of this signature in the whole graph (ready or not)."""
        g = self._graph()
        self._check(sig)
        return g.sig_count[sig]

    cdef _check(self, int32_t sig):
        g = self.g
        if not (0 <= sig < g.n_sigs) or g.active_pos[sig] < 0:
            raise KeyError(f"signature {sig} has no ready node")


_STRATEGIES = {}
_default_strategy = ["agenda"]


def register_strategy(obj, name=None):
    """Make a strategy available by name to `renew_cg(strategy=name)`.

    `obj` is a built-in strategy or any object with a `select(frontier)` method
    (see autobatch.strategies.Strategy)."""
    name = name or getattr(obj, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError("a strategy needs a name")
    if not isinstance(obj, BuiltinStrategy) and not callable(getattr(obj, "select", None)):
        raise TypeError(f"{obj!r} is not a strategy: it needs a select(frontier) method")
    _STRATEGIES[name] = obj
    return obj


def available_strategies():
    return dict(_STRATEGIES)


def resolve_strategy(strategy):
    if strategy is None:
        strategy = _default_strategy[0]
    if isinstance(strategy, str):
        try:
            return _STRATEGIES[strategy]
        except KeyError:
            raise ValueError(f"unknown strategy {strategy!r}; known: {sorted(_STRATEGIES)}") from None
    if isinstance(strategy, BuiltinStrategy) or callable(getattr(strategy, "select", None)):
        return strategy
    if isinstance(strategy, int):
        raise TypeError("strategies are chosen by name ('none', 'depth', 'agenda'), not by number")
    raise TypeError(f"{strategy!r} is not a strategy")


def set_default_strategy(strategy):
    """Process-wide strategy for graphs created without one."""
    resolve_strategy(strategy)
    _default_strategy[0] = strategy


def default_strategy():
    return _default_strategy[0]


NONE = register_strategy(BuiltinStrategy(S_NONE, "none", "every node alone, in creation order"))
DEPTH = register_strategy(BuiltinStrategy(S_DEPTH, "depth", "same depth and signature (TensorFlow Fold)"))
CRITICAL = register_strategy(BuiltinStrategy(
    S_CRITICAL, "critical",
    "all ready nodes of the signature whose pending nodes have the longest path still to "
    "go (critical path first); branches off the critical path wait and batch together"))
AGENDA = register_strategy(BuiltinStrategy(
    S_AGENDA, "agenda",
    "all ready nodes of the signature whose pending nodes have the lowest average depth (DyNet)"))


# ----------------------------------------------------------- current graph ----

cdef ComputationGraph _cg = ComputationGraph(None)
cdef int _version = 0
cdef uint64_t _seed_state = 0x5DEECE66D


def renew_cg(immediate_compute=False, check_validity=False, strategy=None, autobatching=None):
    """Start a new computation graph; every earlier Expression becomes stale."""
    global _version, _seed_state
    _version += 1
    _seed_state += 1
    _cg.renew(strategy, _version, _seed_state)
    return _cg


def cg_version():
    return _version


def cg():
    """The current computation graph."""
    return _cg


def set_random_seed(uint64_t seed):
    """Seed for dropout/noise/random_normal in later graphs (parameters use numpy's)."""
    global _seed_state
    _seed_state = seed
    rng_seed(&_cg.rng, seed)


cdef inline Node* _check(Expression e) except NULL:
    if e.version != _version:
        raise StaleExpressionError(
            "stale Expression: it was created before the computation graph was renewed")
    return &_cg.nodes[e.idx]


cdef inline Expression _wrap(int32_t idx):
    cdef Expression e = Expression.__new__(Expression)
    e.idx = idx
    e.version = _version
    return e


cdef str _dimstr(Node* n):
    s = f"({n.d0},)" if n.d1 == 1 else f"({n.d0}, {n.d1})"
    return s if n.bs == 1 else f"{s} x batch {n.bs}"


cdef inline int _bs2(str op, Node* x, Node* y) except -1:
    """Batch size of an op over x and y; one of them may broadcast."""
    if x.bs == y.bs or y.bs == 1:
        return x.bs
    if x.bs == 1:
        return y.bs
    raise DimensionError(f"{op}: batch sizes {x.bs} and {y.bs} do not match")


# ------------------------------------------------------------------ Expression ----

@cython.freelist(1024)
cdef class Expression:
    """Handle to a node of the current computation graph (graph version + index)."""
    cdef int32_t idx
    cdef int32_t version

    @property
    def vindex(self):
        return self.idx

    @property
    def cg_version(self):
        return self.version

    def is_stale(self):
        return self.version != _version

    def dim(self):
        """(shape, batch size), as in DyNet."""
        cdef Node* n = _check(self)
        return _cg.shape_of(self.idx), n.bs

    def forward(self, recalculate=False):
        _check(self)
        _cg.forward_to(self.idx)
        return self

    incremental_forward = forward

    def value(self, recalculate=False):
        """A float for a scalar, a list for a vector, else a numpy array."""
        cdef Node* n = _check(self)
        _cg.forward_to(self.idx)
        n = &_cg.nodes[self.idx]
        if n.size == 1:
            return float(n.val[0])
        if n.d1 == 1 and n.bs == 1:
            return [float(n.val[i]) for i in range(n.d0)]
        return _cg.value_array(self.idx, False)

    def npvalue(self, recalculate=False):
        """Numpy copy of the value; the batch is the last axis when batch size > 1."""
        _check(self)
        _cg.forward_to(self.idx)
        return _cg.value_array(self.idx, False)

    def scalar_value(self, recalculate=False):
        cdef Node* n = _check(self)
        if n.size != 1:
            raise ValueError(f"scalar_value() of an expression of shape {_dimstr(n)}")
        _cg.forward_to(self.idx)
        return float(_cg.nodes[self.idx].val[0])

    def vec_value(self, recalculate=False):
        """The value flattened to a list (column-major, batch last)."""
        _check(self)
        _cg.forward_to(self.idx)
        return _cg.value_array(self.idx, False).ravel(order="F").tolist()

    def tensor_value(self, recalculate=False):
        return self.npvalue()

    def backward(self, full=False):
        """Accumulate d(self)/d(parameter) into every parameter's gradient."""
        _check(self)
        _cg.backward_from(self.idx)

    def gradient(self):
        """d(last backward's loss)/d(self) as numpy (zeros where nothing flows)."""
        cdef Node* n = _check(self)
        if not (n.flags & F_DONE):
            raise RuntimeError("gradient() before forward/backward")
        return _cg.value_array(self.idx, True)

    def __repr__(self):
        if self.version != _version:
            return f"<Expression {self.idx} (stale)>"
        n = &_cg.nodes[self.idx]
        return f"<Expression {self.idx}: {OP_NAMES[n.op]} {_dimstr(n)}>"

    def __add__(self, other):
        return _add(self, other)

    def __radd__(self, other):
        return _add(other, self)

    def __sub__(self, other):
        return _sub(self, other)

    def __rsub__(self, other):
        return _sub(other, self)

    def __mul__(self, other):
        return _mul(self, other)

    def __rmul__(self, other):
        return _mul(other, self)

    def __truediv__(self, other):
        return _div(self, other)

    def __rtruediv__(self, other):
        return _div(other, self)

    def __neg__(self):
        return _unary(OP_NEG, self, 0.0)

    def __getitem__(self, index):
        if isinstance(index, slice):
            if index.step not in (None, 1):
                raise ValueError("slices of expressions take no step")
            n = _check(self)
            start = 0 if index.start is None else index.start
            stop = n.d0 if index.stop is None else index.stop
            return pick_range(self, start, stop)
        return pick(self, index)


cdef inline Expression _as_expr(object x):
    if isinstance(x, Expression):
        return <Expression>x
    if isinstance(x, Parameters):
        return (<Parameters>x).expr()
    if isinstance(x, LookupParameters):
        return (<LookupParameters>x).expr()
    raise TypeError(f"expected an Expression, got {type(x).__name__}")


cdef inline bint _is_number(object x):
    return isinstance(x, (int, float)) or isinstance(x, np.number)


cdef Expression _add(object x, object y):
    if _is_number(y):
        return _unary(OP_ADD_CONST, _as_expr(x), y)
    if _is_number(x):
        return _unary(OP_ADD_CONST, _as_expr(y), x)
    return _binary(OP_ADD, _as_expr(x), _as_expr(y))


cdef Expression _sub(object x, object y):
    if _is_number(y):
        return _unary(OP_ADD_CONST, _as_expr(x), -y)
    if _is_number(x):
        return _unary(OP_RSUB_CONST, _as_expr(y), x)
    return _binary(OP_SUB, _as_expr(x), _as_expr(y))


cdef Expression _mul(object x, object y):
    if _is_number(y):
        return _unary(OP_MUL_CONST, _as_expr(x), y)
    if _is_number(x):
        return _unary(OP_MUL_CONST, _as_expr(y), x)
    cdef Expression a = _as_expr(x), b = _as_expr(y)
    cdef Node* na = _check(a)
    cdef Node* nb = _check(b)
    if na.d1 == nb.d0 or (na.d0 * na.d1 != 1 and nb.d0 * nb.d1 != 1):
        return _matmul(a, b)
    return _binary(OP_CMULT, a, b)      # a scalar times an expression


cdef Expression _div(object x, object y):
    if _is_number(y):
        if y == 0:
            raise ZeroDivisionError("expression divided by zero")
        return _unary(OP_MUL_CONST, _as_expr(x), 1.0 / y)
    if _is_number(x):
        return _unary(OP_RDIV_CONST, _as_expr(y), x)
    return _binary(OP_CDIV, _as_expr(x), _as_expr(y))


cdef inline Expression _unary(int op, Expression x, float fa):
    cdef Node* n = _check(x)
    return _wrap(_cg.add_node(op, 1, &x.idx, n.d0, n.d1, n.bs, 0, 0, fa, 0))


cdef Expression _binary(int op, Expression x, Expression y):
    """Elementwise op with broadcasting of a single element or a single batch element."""
    cdef Node* a = _check(x)
    cdef Node* b = _check(y)
    cdef int32_t argv[2]
    cdef Node* shape = a
    name = OP_NAMES[op]
    if a.d0 != b.d0 or a.d1 != b.d1:
        if b.d0 * b.d1 == 1:
            shape = a
        elif a.d0 * a.d1 == 1:
            shape = b
        else:
            raise DimensionError(f"{name}: shapes {_dimstr(a)} and {_dimstr(b)} do not match")
    cdef int bs = _bs2(name, a, b)
    argv[0] = x.idx
    argv[1] = y.idx
    return _wrap(_cg.add_node(op, 2, argv, shape.d0, shape.d1, bs, 0, 0, 0.0, 0))


cdef Expression _matmul(Expression x, Expression y):
    cdef Node* a = _check(x)
    cdef Node* b = _check(y)
    if a.d1 != b.d0:
        raise DimensionError(f"matmul: cannot multiply {_dimstr(a)} by {_dimstr(b)}")
    cdef int bs = _bs2("matmul", a, b)
    cdef int32_t argv[2]
    argv[0] = x.idx
    argv[1] = y.idx
    return _wrap(_cg.add_node(OP_MATMUL, 2, argv, a.d0, b.d1, bs, 0, 0, 0.0, 0))


cdef int32_t _collect(object xs, str name, int32_t** out) except -1:
    """Argument ids of a list of expressions, in a malloc'd array."""
    cdef Py_ssize_t k, n = len(xs)
    if n == 0:
        raise ValueError(f"{name}: needs at least one expression")
    cdef int32_t* ids = <int32_t*>malloc(n * sizeof(int32_t))
    if ids == NULL:
        raise MemoryError()
    cdef Expression e
    try:
        for k in range(n):
            e = _as_expr(xs[k])
            _check(e)
            ids[k] = e.idx
    except BaseException:
        free(ids)
        raise
    out[0] = ids
    return <int32_t>n


cdef Expression _nary_same(int op, object xs, bint allow_batch_broadcast):
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, OP_NAMES[op], &ids)
    cdef Node* a
    cdef Node* first = &_cg.nodes[ids[0]]
    cdef int k, bs = first.bs
    try:
        for k in range(n):
            a = &_cg.nodes[ids[k]]
            if a.d0 != first.d0 or a.d1 != first.d1:
                raise DimensionError(f"{OP_NAMES[op]}: argument {k} has shape {_dimstr(a)}, "
                                     f"argument 0 has {_dimstr(first)}")
            if a.bs != bs:
                if allow_batch_broadcast and (a.bs == 1 or bs == 1):
                    bs = a.bs if bs == 1 else bs
                else:
                    raise DimensionError(f"{OP_NAMES[op]}: batch sizes {a.bs} and {bs} do not match")
        return _wrap(_cg.add_node(op, n, ids, first.d0, first.d1, bs, 0, 0, 0.0, 0))
    finally:
        free(ids)


# ------------------------------------------------------------- parameters ----

cdef float* _float_ptr(object arr):
    cdef float[::1] view = arr
    return &view[0] if view.shape[0] > 0 else NULL


cdef class Parameters:
    """A trainable tensor. Values and gradient are fixed numpy arrays (updated in place)."""
    cdef readonly object _flat            # 1-D float32 storage (column-major)
    cdef readonly object _grad_flat
    cdef float* vptr
    cdef float* gptr
    cdef int d0, d1
    cdef int32_t cached_idx[2]
    cdef int32_t cached_version[2]
    cdef public object _name
    cdef public bint _updated
    cdef public object _owner

    def __init__(self, shape, name="", owner=None):
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if not 1 <= len(shape) <= 2 or any(s <= 0 for s in shape):
            raise ValueError(f"parameter shape must be 1 or 2 positive dims, got {shape}")
        self.d0 = shape[0]
        self.d1 = shape[1] if len(shape) == 2 else 1
        self._flat = np.zeros(self.d0 * self.d1, dtype=np.float32)
        self._grad_flat = np.zeros(self.d0 * self.d1, dtype=np.float32)
        self.vptr = _float_ptr(self._flat)
        self.gptr = _float_ptr(self._grad_flat)
        self.cached_version[0] = self.cached_version[1] = -1
        self._name = name
        self._updated = True
        self._owner = owner

    def shape(self):
        if self.d1 == 1:
            return (self.d0,)
        return (self.d0, self.d1)

    def _view(self, arr):
        return arr if self.d1 == 1 else arr.reshape((self.d1, self.d0)).T

    def as_array(self):
        """Copy of the values, shaped like the parameter."""
        return self._view(self._flat).copy()

    def grad_as_array(self):
        return self._view(self._grad_flat).copy()

    @property
    def values(self):
        """Writable view of the values (same memory the graph reads)."""
        return self._view(self._flat)

    @property
    def grad(self):
        return self._view(self._grad_flat)

    def set_value(self, value):
        arr = np.asarray(value, dtype=np.float32)
        if arr.shape != self.shape() and arr.size != self.d0 * self.d1:
            raise ValueError(f"set_value: shape {arr.shape} does not match parameter shape {self.shape()}")
        self._view(self._flat)[...] = arr.reshape(self.shape())

    def zero(self):
        self._flat[:] = 0

    def scale(self, float s):
        self._flat *= s

    def scale_gradient(self, float s):
        self._grad_flat *= s

    def name(self):
        return self._name

    def is_updated(self):
        return self._updated

    def set_updated(self, b):
        self._updated = bool(b)

    def expr(self, update=True):
        """The parameter as an Expression of the current graph (one node per graph)."""
        cdef int k = 0 if (update and self._updated) else 1
        if self.cached_version[k] == _version:
            return _wrap(self.cached_idx[k])
        cdef int32_t i = _cg.add_node(OP_PARAM, 0, NULL, self.d0, self.d1, 1, 0, 0, 0.0, 0)
        _cg.nodes[i].val = self.vptr
        _cg.nodes[i].flags |= F_ALIAS
        if k == 0:
            _cg.nodes[i].grad = self.gptr
            _cg.nodes[i].flags |= F_NEEDS_GRAD
        _cg.keepalive.append(self)
        self.cached_idx[k] = i
        self.cached_version[k] = _version
        return _wrap(i)

    def __add__(self, other): return _add(self, other)
    def __radd__(self, other): return _add(other, self)
    def __sub__(self, other): return _sub(self, other)
    def __rsub__(self, other): return _sub(other, self)
    def __mul__(self, other): return _mul(self, other)
    def __rmul__(self, other): return _mul(other, self)
    def __truediv__(self, other): return _div(self, other)
    def __rtruediv__(self, other): return _div(other, self)
    def __neg__(self): return _unary(OP_NEG, self.expr(), 0.0)

    def __repr__(self):
        return f"<Parameters {self._name or ''} {self.shape()}>"


cdef class LookupParameters:
    """A table of trainable rows; `lp[i]` looks row i up. Rows that were looked up
    are remembered so that trainers can update only those (sparse updates)."""
    cdef readonly object _flat
    cdef readonly object _grad_flat
    cdef float* vptr
    cdef float* gptr
    cdef readonly int n_rows, row_size
    cdef readonly object _used_mask       # uint8 numpy array, one per row
    cdef uint8_t* used
    cdef readonly object _used_list       # rows looked up since the last clear
    cdef public object _name
    cdef public bint _updated
    cdef public object _owner
    cdef int32_t cached_idx
    cdef int32_t cached_version

    def __init__(self, shape, name="", owner=None):
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2 or shape[0] <= 0 or shape[1] <= 0:
            raise ValueError(f"lookup parameters need shape (rows, dim), got {shape}")
        self.n_rows, self.row_size = shape
        self._flat = np.zeros(self.n_rows * self.row_size, dtype=np.float32)
        self._grad_flat = np.zeros(self.n_rows * self.row_size, dtype=np.float32)
        self.vptr = _float_ptr(self._flat)
        self.gptr = _float_ptr(self._grad_flat)
        self._used_mask = np.zeros(self.n_rows, dtype=np.uint8)
        cdef uint8_t[::1] m = self._used_mask
        self.used = &m[0]
        self._used_list = []
        self._name = name
        self._updated = True
        self._owner = owner
        self.cached_version = -1

    def shape(self):
        return (self.n_rows, self.row_size)

    def as_array(self):
        return self._flat.reshape(self.n_rows, self.row_size).copy()

    def grad_as_array(self):
        return self._grad_flat.reshape(self.n_rows, self.row_size).copy()

    @property
    def values(self):
        """Writable (rows, dim) view of the table."""
        return self._flat.reshape(self.n_rows, self.row_size)

    @property
    def grad(self):
        return self._grad_flat.reshape(self.n_rows, self.row_size)

    def used_rows(self):
        """Rows looked up since the last `clear_used()`, as a sorted int array."""
        return np.flatnonzero(self._used_mask)

    def clear_used(self):
        self._used_mask[:] = 0

    def set_value(self, value):
        arr = np.asarray(value, dtype=np.float32)
        if arr.shape != (self.n_rows, self.row_size):
            raise ValueError(f"set_value: shape {arr.shape} does not match {(self.n_rows, self.row_size)}")
        self.values[...] = arr

    def init_row(self, int i, row):
        self._row_check(i)
        self.values[i] = np.asarray(row, dtype=np.float32).reshape(self.row_size)

    def init_from_array(self, arr):
        self.set_value(arr)

    def zero(self):
        self._flat[:] = 0

    def scale(self, float s):
        self._flat *= s

    def scale_gradient(self, float s):
        self._grad_flat *= s

    def name(self):
        return self._name

    def is_updated(self):
        return self._updated

    def set_updated(self, b):
        self._updated = bool(b)

    cdef int _row_check(self, long i) except -1:
        if not 0 <= i < self.n_rows:
            raise IndexError(f"lookup index {i} out of range for a table of {self.n_rows} rows")
        return 0

    def __getitem__(self, i):
        return lookup(self, i)

    def batch(self, ids):
        return lookup_batch(self, ids)

    def expr(self, update=True):
        """The whole table as a (dim, rows) matrix expression, as in DyNet."""
        cdef int32_t i = _cg.add_node(OP_PARAM, 0, NULL, self.row_size, self.n_rows, 1, 0, 0, 0.0, 0)
        _cg.nodes[i].val = self.vptr
        _cg.nodes[i].flags |= F_ALIAS
        if update and self._updated:
            _cg.nodes[i].grad = self.gptr
            _cg.nodes[i].flags |= F_NEEDS_GRAD
            self._used_mask[:] = 1
        _cg.keepalive.append(self)
        return _wrap(i)

    def __repr__(self):
        return f"<LookupParameters {self._name or ''} {self.shape()}>"


# ---------------------------------------------------- expression functions ----

def parameter(*ps, update=True):
    """Parameters as expressions (one node per parameter per graph)."""
    out = []
    for p in ps:
        if isinstance(p, Parameters):
            out.append((<Parameters>p).expr(update))
        elif isinstance(p, LookupParameters):
            out.append((<LookupParameters>p).expr(update))
        else:
            raise TypeError(f"parameter() takes Parameters, got {type(p).__name__}")
    return out[0] if len(out) == 1 else out


def const_parameter(*ps):
    return parameter(*ps, update=False)


cdef object _as_index(object i, str name):
    """An integer index; floats and other non-integers are refused, not truncated."""
    try:
        return operator.index(i)
    except TypeError:
        raise TypeError(f"{name}: index must be an int, got {type(i).__name__}") from None


def lookup(LookupParameters p not None, index, update=True):
    """Row `index` of a lookup table (no copy: the node reads the table's memory)."""
    cdef long i = _as_index(index, "lookup")
    p._row_check(i)
    cdef int32_t n = _cg.add_node(OP_LOOKUP, 0, NULL, p.row_size, 1, 1, 0, 0, 0.0, <int32_t>i)
    _cg.nodes[n].val = p.vptr + i * p.row_size
    _cg.nodes[n].flags |= F_ALIAS
    if update and p._updated:
        _cg.nodes[n].grad = p.gptr + i * p.row_size
        _cg.nodes[n].flags |= F_NEEDS_GRAD
        p.used[i] = 1
    if not _cg.keepalive or _cg.keepalive[len(_cg.keepalive) - 1] is not p:
        _cg.keepalive.append(p)
    return _wrap(n)


def lookup_batch(LookupParameters p not None, indices, update=True):
    """Rows as one expression with a batch element per index."""
    idx = [_as_index(i, "lookup_batch") for i in indices]
    if not idx:
        raise ValueError("lookup_batch: needs at least one index")
    for i in idx:
        p._row_check(i)
    cdef int32_t at = _cg.add_ints(idx, len(idx))
    cdef int32_t n = _cg.add_node(OP_LOOKUP_BATCH, 0, NULL, p.row_size, 1, len(idx), 0, 0, 0.0, at)
    _cg.nodes[n].src = p.vptr
    if update and p._updated:
        _cg.nodes[n].srcgrad = p.gptr
        _cg.nodes[n].flags |= F_NEEDS_GRAD
        for i in idx:
            p.used[i] = 1
    _cg.keepalive.append(p)
    return _wrap(n)


cdef Expression _leaf_from_flat(object flat, int d0, int d1, int bs):
    cdef int32_t i = _cg.add_node(OP_INPUT, 0, NULL, d0, d1, bs, 0, 0, 0.0, 0)
    cdef float* dst = _cg.leaf_memory(i)
    cdef float[::1] src
    if d0 * d1 * bs > 0:
        src = flat
        memcpy(dst, &src[0], d0 * d1 * bs * sizeof(float))
    return _wrap(i)


cdef tuple _dims(object dim):
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    dim = tuple(int(d) for d in dim)
    if not 1 <= len(dim) <= 2 or any(d <= 0 for d in dim):
        raise DimensionError(f"shapes have 1 or 2 positive dimensions, got {dim}")
    return (dim[0], dim[1] if len(dim) == 2 else 1)


def inputTensor(arr, batched=False, device=""):
    """A constant from a numpy array (or nested lists); with batched=True the last
    axis is the batch."""
    a = np.asarray(arr, dtype=np.float32)
    if not np.all(np.isfinite(a)):
        raise ValueError("inputTensor: the input holds NaN or infinity")
    shape = a.shape
    bs = 1
    if batched:
        if a.ndim == 0:
            raise DimensionError("inputTensor(batched=True) needs at least one axis")
        bs = shape[len(shape) - 1]
        shape = shape[:len(shape) - 1]
    if len(shape) == 0:
        shape = (1,)
    if len(shape) > 2:
        raise DimensionError(f"inputTensor: at most 2 dimensions (plus batch), got {a.shape}")
    d0, d1 = shape[0], (shape[1] if len(shape) == 2 else 1)
    if d0 * d1 * bs == 0:
        raise DimensionError(f"inputTensor: empty input of shape {a.shape}")
    return _leaf_from_flat(np.ascontiguousarray(a.ravel(order="F")), d0, d1, bs)


def inputVector(v):
    return inputTensor(np.asarray(v, dtype=np.float32).reshape(-1))


def scalarInput(float x):
    return inputTensor(np.array([x], dtype=np.float32))


def inputMatrix(v, d):
    """DyNet's column-major matrix input from a flat list."""
    return inputTensor(np.asarray(v, dtype=np.float32).reshape(tuple(d), order="F"))


def constant(dim, float val, int batch_size=1):
    d0, d1 = _dims(dim)
    return _leaf_from_flat(np.full(d0 * d1 * batch_size, val, dtype=np.float32), d0, d1, batch_size)


def zeros(dim, int batch_size=1):
    return constant(dim, 0.0, batch_size)


def ones(dim, int batch_size=1):
    return constant(dim, 1.0, batch_size)


def random_normal(dim, float mean=0.0, float stddev=1.0, int batch_size=1):
    d0, d1 = _dims(dim)
    cdef int32_t i = _cg.add_node(OP_INPUT, 0, NULL, d0, d1, batch_size, 0, 0, 0.0, 0)
    cdef float* p = _cg.leaf_memory(i)
    cdef int k
    for k in range(d0 * d1 * batch_size):
        p[k] = mean + stddev * rng_normal(&_cg.rng)
    return _wrap(i)


def random_uniform(dim, float left, float right, int batch_size=1):
    d0, d1 = _dims(dim)
    cdef int32_t i = _cg.add_node(OP_INPUT, 0, NULL, d0, d1, batch_size, 0, 0, 0.0, 0)
    cdef float* p = _cg.leaf_memory(i)
    cdef int k
    for k in range(d0 * d1 * batch_size):
        p[k] = left + (right - left) * rng_uniform(&_cg.rng)
    return _wrap(i)


# unary elementwise
def tanh(Expression x): return _unary(OP_TANH, x, 0.0)
def logistic(Expression x): return _unary(OP_LOGISTIC, x, 0.0)
def rectify(Expression x): return _unary(OP_RELU, x, 0.0)
def elu(Expression x, float alpha=1.0): return _unary(OP_ELU, x, alpha)
def selu(Expression x): return _unary(OP_SELU, x, 0.0)
def exp(Expression x): return _unary(OP_EXP, x, 0.0)
def log(Expression x): return _unary(OP_LOG, x, 0.0)
def sqrt(Expression x): return _unary(OP_SQRT, x, 0.0)
def square(Expression x): return _unary(OP_SQUARE, x, 0.0)
def abs(Expression x): return _unary(OP_ABS, x, 0.0)
def nobackprop(Expression x): return _unary(OP_NOBACKPROP, x, 0.0)
def scale_gradient(Expression x, float lambd=1.0): return _unary(OP_SCALE_GRAD, x, lambd)


def dropout(Expression x, float p):
    """Zero each element with probability p, scale the rest by 1/(1-p)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    return _unary(OP_DROPOUT, x, p)


def noise(Expression x, float stddev):
    if stddev < 0:
        raise ValueError(f"noise: stddev must be >= 0, got {stddev}")
    return _unary(OP_NOISE, x, stddev)


def cmult(x, y): return _binary(OP_CMULT, _as_expr(x), _as_expr(y))
def cdiv(x, y): return _binary(OP_CDIV, _as_expr(x), _as_expr(y))


def pow(x, y):
    """Elementwise x ** y; y may be a one-element expression (or a number)."""
    if _is_number(y):
        y = constant((1,), y)
    return _binary(OP_POW, _as_expr(x), _as_expr(y))


def esum(xs): return _nary_same(OP_ESUM, xs, True)
def average(xs): return _nary_same(OP_AVERAGE, xs, True)
def logsumexp(xs): return _nary_same(OP_LOGSUMEXP, xs, False)


def concatenate_to_batch(xs):
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "concatenate_to_batch", &ids)
    cdef Node* a
    cdef Node* first = &_cg.nodes[ids[0]]
    cdef int k, bs = 0
    try:
        for k in range(n):
            a = &_cg.nodes[ids[k]]
            if a.d0 != first.d0 or a.d1 != first.d1:
                raise DimensionError(f"concatenate_to_batch: argument {k} has shape {_dimstr(a)}, "
                                     f"argument 0 has {_dimstr(first)}")
            bs += a.bs
        return _wrap(_cg.add_node(OP_CONCAT_TO_BATCH, n, ids, first.d0, first.d1, bs, 0, 0, 0.0, 0))
    finally:
        free(ids)


def concatenate(xs, int d=0):
    """Concatenate along rows (d=0) or columns (d=1)."""
    if d not in (0, 1):
        raise DimensionError(f"concatenate: d must be 0 or 1, got {d}")
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "concatenate", &ids)
    cdef Node* a
    cdef Node* first = &_cg.nodes[ids[0]]
    cdef int k, total = 0, bs = first.bs
    try:
        for k in range(n):
            a = &_cg.nodes[ids[k]]
            if (d == 0 and a.d1 != first.d1) or (d == 1 and a.d0 != first.d0):
                raise DimensionError(f"concatenate(d={d}): argument {k} has shape {_dimstr(a)}, "
                                     f"argument 0 has {_dimstr(first)}")
            if a.bs != bs:
                if a.bs == 1 or bs == 1:
                    bs = a.bs if bs == 1 else bs
                else:
                    raise DimensionError(f"concatenate: batch sizes {a.bs} and {bs} do not match")
            total += a.d0 if d == 0 else a.d1
        if d == 0:
            return _wrap(_cg.add_node(OP_CONCAT, n, ids, total, first.d1, bs, 0, 0, 0.0, 0))
        return _wrap(_cg.add_node(OP_CONCAT, n, ids, first.d0, total, bs, 1, 0, 0.0, 0))
    finally:
        free(ids)


def concatenate_cols(xs):
    return concatenate(xs, 1)


def affine_transform(xs):
    """xs = [b, W1, x1, W2, x2, ...]: b + W1 x1 + W2 x2 + ..."""
    xs = list(xs)
    if len(xs) % 2 != 1:
        raise ValueError("affine_transform: expects [b, W1, x1, W2, x2, ...] (an odd number)")
    if len(xs) == 1:
        return _as_expr(xs[0])
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "affine_transform", &ids)
    cdef Node* b = &_cg.nodes[ids[0]]
    cdef Node* w
    cdef Node* x
    cdef int k, rows = -1, cols = -1, bs = b.bs
    try:
        for k in range(1, n, 2):
            w = &_cg.nodes[ids[k]]
            x = &_cg.nodes[ids[k + 1]]
            if w.d1 != x.d0 or (rows >= 0 and (w.d0 != rows or x.d1 != cols)):
                raise DimensionError(f"affine_transform: term {k // 2} multiplies {_dimstr(w)} by "
                                     f"{_dimstr(x)}")
            rows, cols = w.d0, x.d1
            for a in (w.bs, x.bs):
                if a != bs:
                    if a == 1 or bs == 1:
                        bs = a if bs == 1 else bs
                    else:
                        raise DimensionError(f"affine_transform: batch sizes {a} and {bs} do not match")
        if b.d0 != rows or not (b.d1 == 1 or b.d1 == cols):
            raise DimensionError(f"affine_transform: bias of shape {_dimstr(b)} does not fit a "
                                 f"({rows}, {cols}) result")
        return _wrap(_cg.add_node(OP_AFFINE, n, ids, rows, cols, bs, 0, 0, 0.0, 0))
    finally:
        free(ids)


cdef Expression _reduce(int op, Expression x):
    cdef Node* n = _check(x)
    return _wrap(_cg.add_node(op, 1, &x.idx, 1, 1, n.bs, 0, 0, 0.0, 0))


def sum_elems(Expression x): return _reduce(OP_SUM_ELEMS, x)
def mean_elems(Expression x): return _reduce(OP_MEAN_ELEMS, x)
def squared_norm(Expression x): return _reduce(OP_SQUARED_NORM, x)
def l2_norm(Expression x): return _reduce(OP_L2_NORM, x)


cdef Expression _pair_reduce(int op, Expression x, Expression y):
    cdef Node* a = _check(x)
    cdef Node* b = _check(y)
    name = OP_NAMES[op]
    if a.d0 != b.d0 or a.d1 != b.d1:
        raise DimensionError(f"{name}: shapes {_dimstr(a)} and {_dimstr(b)} do not match")
    cdef int bs = _bs2(name, a, b)
    cdef int32_t argv[2]
    argv[0] = x.idx
    argv[1] = y.idx
    return _wrap(_cg.add_node(op, 2, argv, 1, 1, bs, 0, 0, 0.0, 0))


def dot_product(Expression x, Expression y): return _pair_reduce(OP_DOT, x, y)
def squared_distance(Expression x, Expression y): return _pair_reduce(OP_SQUARED_DISTANCE, x, y)
def binary_log_loss(Expression x, Expression y): return _pair_reduce(OP_BINARY_LOG_LOSS, x, y)


def sum_batches(Expression x):
    cdef Node* n = _check(x)
    return _wrap(_cg.add_node(OP_SUM_BATCHES, 1, &x.idx, n.d0, n.d1, 1, 0, 0, 0.0, 0))


def max_dim(Expression x, int d=0):
    """Max over rows (d=0: one per column) or over columns (d=1: one per row)."""
    cdef Node* n = _check(x)
    if d not in (0, 1):
        raise DimensionError(f"max_dim: d must be 0 or 1, got {d}")
    cdef int out = n.d1 if d == 0 else n.d0
    return _wrap(_cg.add_node(OP_MAX_DIM, 1, &x.idx, out, 1, n.bs, d, 0, 0.0, 0))


def softmax(Expression x, int d=0):
    if d != 0:
        raise DimensionError("softmax: only d=0 (over each column) is supported")
    return _unary(OP_SOFTMAX, x, 0.0)


def log_softmax(Expression x, restrict=None):
    if restrict is not None:
        raise NotImplementedError("log_softmax(restrict=...) is not supported")
    return _unary(OP_LOG_SOFTMAX, x, 0.0)


cdef int32_t _index_list(object index, int bs, int limit, str name) except -1:
    """Store one index per batch element (a single int is repeated); check the range."""
    if isinstance(index, (list, tuple, np.ndarray)):
        idx = [_as_index(i, name) for i in index]
        if len(idx) != bs:
            raise ValueError(f"{name}: {len(idx)} indices for a batch of {bs}")
    else:
        idx = [_as_index(index, name)] * bs
    for i in idx:
        if not 0 <= i < limit:
            raise IndexError(f"{name}: index {i} out of range [0, {limit})")
    return _cg.add_ints(idx, bs)


def pickneglogsoftmax(Expression x, v):
    """-log softmax(x)[v]; v is an int or one int per batch element."""
    cdef Node* n = _check(x)
    if n.d1 != 1:
        raise DimensionError(f"pickneglogsoftmax: needs a vector, got {_dimstr(n)}")
    cdef int bs = n.bs
    if isinstance(v, (list, tuple, np.ndarray)):
        bs = len(v) if n.bs == 1 else n.bs
    cdef int32_t at = _index_list(v, bs, n.d0, "pickneglogsoftmax")
    return _wrap(_cg.add_node(OP_PICKNLS, 1, &x.idx, 1, 1, bs, 0, 0, 0.0, at))


def pickneglogsoftmax_batch(Expression x, v):
    return pickneglogsoftmax(x, list(v))


def hinge(Expression x, v, float m=1.0):
    cdef Node* n = _check(x)
    if n.d1 != 1:
        raise DimensionError(f"hinge: needs a vector, got {_dimstr(n)}")
    cdef int bs = n.bs
    if isinstance(v, (list, tuple, np.ndarray)):
        bs = len(v) if n.bs == 1 else n.bs
    cdef int32_t at = _index_list(v, bs, n.d0, "hinge")
    return _wrap(_cg.add_node(OP_HINGE, 1, &x.idx, 1, 1, bs, 0, 0, m, at))


def hinge_batch(Expression x, v, float m=1.0):
    return hinge(x, list(v), m)


def pick(Expression x, v, int d=0):
    """Element v along dimension d (DyNet: that dimension is removed)."""
    cdef Node* n = _check(x)
    if d not in (0, 1):
        raise DimensionError(f"pick: d must be 0 or 1, got {d}")
    cdef int bs = n.bs
    if isinstance(v, (list, tuple, np.ndarray)):
        bs = len(v) if n.bs == 1 else n.bs
    cdef int limit = n.d0 if d == 0 else n.d1
    cdef int32_t at = _index_list(v, bs, limit, "pick")
    cdef int out = (n.d1 if d == 0 else n.d0)
    return _wrap(_cg.add_node(OP_PICK, 1, &x.idx, out, 1, bs, d, 0, 0.0, at))


def pick_batch(Expression x, v, int d=0):
    return pick(x, list(v), d)


def pick_range(Expression x, s, e, int d=0):
    """Elements [s, e) along dimension d."""
    s, e = _as_index(s, "pick_range"), _as_index(e, "pick_range")
    cdef Node* n = _check(x)
    if d not in (0, 1):
        raise DimensionError(f"pick_range: d must be 0 or 1, got {d}")
    cdef int limit = n.d0 if d == 0 else n.d1
    if not 0 <= s < e <= limit:
        raise IndexError(f"pick_range: range [{s}, {e}) is not inside [0, {limit})")
    if d == 0:
        return _wrap(_cg.add_node(OP_PICK_RANGE, 1, &x.idx, e - s, n.d1, n.bs, 0, 0, 0.0, s))
    return _wrap(_cg.add_node(OP_PICK_RANGE, 1, &x.idx, n.d0, e - s, n.bs, 1, 0, 0.0, s))


def pick_batch_elems(Expression x, indices):
    cdef Node* n = _check(x)
    idx = [_as_index(i, "pick_batch_elems") for i in indices]
    if not idx:
        raise ValueError("pick_batch_elems: needs at least one index")
    for i in idx:
        if not 0 <= i < n.bs:
            raise IndexError(f"pick_batch_elems: batch element {i} out of range [0, {n.bs})")
    cdef int32_t at = _cg.add_ints(idx, len(idx))
    n = &_cg.nodes[x.idx]
    return _wrap(_cg.add_node(OP_PICK_BATCH_ELEMS, 1, &x.idx, n.d0, n.d1, len(idx), 0, 0, 0.0, at))


def pick_batch_elem(Expression x, int i):
    return pick_batch_elems(x, [i])


def transpose(Expression x):
    cdef Node* n = _check(x)
    return _wrap(_cg.add_node(OP_TRANSPOSE, 1, &x.idx, n.d1, n.d0, n.bs, 0, 0, 0.0, 0))


def reshape(Expression x, d, batch_size=None):
    cdef Node* n = _check(x)
    d0, d1 = _dims(d)
    bs = n.bs if batch_size is None else int(batch_size)
    if bs != n.bs:
        raise DimensionError("reshape: changing the batch size is not supported")
    if d0 * d1 != n.d0 * n.d1:
        raise DimensionError(f"reshape: cannot reshape {_dimstr(n)} to {tuple(d)}")
    return _wrap(_cg.add_node(OP_RESHAPE, 1, &x.idx, d0, d1, n.bs, 0, 0, 0.0, 0))


# ---------------------------------------------------------- fused LSTM ops ----
# Gate vectors hold blocks of `hidden_dim`: [i, f_1 .. f_k, o, g].

def lstm_gates(Expression pre, int hidden_dim, float forget_bias=0.0):
    """Gate activations of a pre-activation vector of blocks [i, f_1..f_k, o, g]:
    logistic on all blocks but the last (forget blocks get + forget_bias), tanh on g."""
    cdef Node* n = _check(pre)
    if hidden_dim <= 0 or n.d1 != 1 or n.d0 % hidden_dim != 0 or n.d0 // hidden_dim < 3:
        raise DimensionError(f"lstm_gates: pre-activations of shape {_dimstr(n)} are not "
                             f"3 or more blocks of {hidden_dim}")
    return _wrap(_cg.add_node(OP_LSTM_GATES, 1, &pre.idx, n.d0, 1, n.bs, hidden_dim, 0,
                              forget_bias, 0))


def lstm_cell(Expression gates, prev_cells=()):
    """Cell update c = i * g + sum_m f_m * prev_cells[m] (gates from lstm_gates with
    len(prev_cells) forget blocks)."""
    cdef Node* g = _check(gates)
    cdef int k = len(prev_cells)
    if g.d1 != 1 or g.d0 % (k + 3) != 0:
        raise DimensionError(f"lstm_cell: gates of shape {_dimstr(g)} are not {k + 3} blocks")
    cdef int h = g.d0 // (k + 3)
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect([gates] + list(prev_cells), "lstm_cell", &ids)
    cdef Node* c
    try:
        for m in range(1, n):
            c = &_cg.nodes[ids[m]]
            if c.d0 != h or c.d1 != 1 or c.bs != g.bs:
                raise DimensionError(f"lstm_cell: previous cell {m - 1} has shape {_dimstr(c)}, "
                                     f"expected ({h},) with batch {g.bs}")
        return _wrap(_cg.add_node(OP_LSTM_CELL, n, ids, h, 1, g.bs, 0, 0, 0.0, 0))
    finally:
        free(ids)


def lstm_hidden(Expression cell, Expression gates):
    """Hidden output h = o * tanh(cell); o is the second-to-last block of gates."""
    cdef Node* c = _check(cell)
    cdef Node* g = _check(gates)
    if c.d1 != 1 or g.d1 != 1 or g.d0 % c.d0 != 0 or g.d0 // c.d0 < 3 or c.bs != g.bs:
        raise DimensionError(f"lstm_hidden: cell {_dimstr(c)} does not fit gates {_dimstr(g)}")
    cdef int32_t argv[2]
    argv[0] = cell.idx
    argv[1] = gates.idx
    return _wrap(_cg.add_node(OP_LSTM_HIDDEN, 2, argv, c.d0, 1, c.bs, 0, 0, 0.0, 0))


def vanilla_lstm_gates(x_t, h_tm1, Wx, Wh, b, float weightnoise_std=0.0):
    """DyNet's fused LSTM gates [i, f, o, g] from input and previous hidden state
    (forget bias +1, as in DyNet)."""
    if weightnoise_std != 0.0:
        raise NotImplementedError("vanilla_lstm_gates: weight noise is not supported")
    b = _as_expr(b)
    pre = affine_transform([b, Wx, x_t, Wh, h_tm1])
    return lstm_gates(pre, _check(b).d0 // 4, 1.0)


def vanilla_lstm_c(c_tm1, gates_t):
    return lstm_cell(gates_t, [c_tm1])


def vanilla_lstm_h(c_t, gates_t):
    return lstm_hidden(c_t, gates_t)
