# The computation graph: node arrays, signatures, scheduling, executor, backward,
# statistics. Included by _core.pyx (one module: no call crosses a module boundary).

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
    cdef bint busy                      # a forward is running (a Python strategy may be called)
    cdef readonly bint immediate_compute   # compute every node when it is created (debugging)
    cdef readonly bint check_validity      # raise on the first NaN or infinity a kernel produces
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
        free(self.batch_ids); free(self.batch_at); free(self.batch_n)
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

    cdef renew(self, strategy, int version, uint64_t seed, bint immediate_compute=False,
               bint check_validity=False):
        """Start a new graph in the same memory (arenas keep their capacity)."""
        self.immediate_compute = immediate_compute
        self.check_validity = check_validity
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

    cdef int32_t add_node(self, int op, int nargs, const int32_t* argv, Shape shape,
                          int32_t idata=0, const Attrs* attr=NULL) except -1:
        """Append a node of a checked shape (see check_shape) with its typed attributes."""
        cdef int64_t i = self.n_nodes
        cdef int a
        if self.busy:
            self.check_idle()
        if i >= 2147483000:
            raise MemoryError("autobatch: too many nodes in one graph")
        self.nodes = <Node*>grow(self.nodes, &self.cap_nodes, i + 1, sizeof(Node))
        self.args = <int32_t*>grow(self.args, &self.cap_args, self.n_args + nargs, sizeof(int32_t))
        cdef Node* n = &self.nodes[i]
        memset(n, 0, sizeof(Node))
        n.op = op
        n.nargs = nargs
        n.args_at = <int32_t>self.n_args
        n.nd = shape.nd
        for a in range(MAX_DIMS):
            n.d[a] = shape.d[a]
        n.bs = shape.bs
        n.size = elems(n) * shape.bs
        if attr != NULL:
            n.attr = attr[0]
        n.idata = idata
        for a in range(nargs):
            self.args[self.n_args + a] = argv[a]
            if self.nodes[argv[a]].flags & F_NEEDS_GRAD:
                n.flags |= F_NEEDS_GRAD
        if op == OP_NOBACKPROP:
            n.flags &= ~F_NEEDS_GRAD
        self.n_args += nargs
        self.n_nodes = i + 1
        if OPS[op].leaf:
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
        """Everything that must be equal for nodes to share a kernel call: op, full
        shape, every attribute, identity of shared arguments, full shapes of stacked
        arguments (and so which of them broadcast). Full keys are compared."""
        cdef Node* n = &self.nodes[i]
        cdef const OpDef* od = &OPS[n.op]
        cdef int64_t need = KEY_HEAD + KEY_PER_ARG * n.nargs
        cdef int a, k
        cdef int32_t arg
        self.keybuf = <int64_t*>grow(self.keybuf, &self.cap_keybuf, need, sizeof(int64_t))
        cdef int64_t* key = self.keybuf
        key[0] = n.op
        key[1] = n.nargs
        shape_words(n, key + 2)
        for k in range(4):
            key[5 + k] = n.attr.words[k]
        for a in range(n.nargs):
            arg = self.args[n.args_at + a]
            if arg_is_shared(od, a):
                key[KEY_HEAD + KEY_PER_ARG * a] = -1 - <int64_t>arg
                key[KEY_HEAD + KEY_PER_ARG * a + 1] = 0
                key[KEY_HEAD + KEY_PER_ARG * a + 2] = 0
            else:
                shape_words(&self.nodes[arg], key + KEY_HEAD + KEY_PER_ARG * a)
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

    cdef int check_idle(self) except -1:
        if self.busy:
            raise RuntimeError("the graph cannot be built or computed from inside a strategy's "
                               "select(): it is in the middle of a forward pass")
        return 0

    cdef int forward_to(self, int32_t target) except -1:
        """Compute `target` and every ancestor not computed yet, in batches."""
        if self.nodes[target].flags & F_DONE:
            return 0
        self.check_idle()
        self.busy = True
        try:
            self._forward(target)
        finally:
            self.busy = False
        return 0

    cdef int _forward(self, int32_t target) except -1:
        cdef double t0 = now()
        self.t_build += t0 - self.t_last
        self.n_forward_calls += 1
        cdef int64_t count = self.collect_needed(target)
        if self.strategy_id != S_NONE:     # 'none' runs the needed list as it is
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
        # heights, in reverse topological order: 1 + the highest needed consumer (read
        # by 'critical' and, through the Frontier, by Python strategies)
        cdef bint heights = self.strategy_id == S_CRITICAL or self.strategy_id == S_PYTHON
        if heights:
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
            if heights:
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
            # DyNet's agenda: the signature whose pending nodes
            # (ready or not) have the lowest average depth; static per forward, so a
            # signature that still has deep nodes to come waits for them
            for k in range(self.n_active):
                s = self.active[k]
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
        if self.batch_n == NULL:
            raise MemoryError()
        self.batch_at[nb] = <int32_t>at
        self.batch_n[nb] = n
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
        if self.check_validity:
            self.check_finite(ids, n, block, per * n)
        return 0

    cdef int check_finite(self, int32_t* ids, int n, float* block, int64_t count) except -1:
        cdef int64_t k
        cdef float v
        for k in range(count):
            v = block[k]
            if v - v != 0:          # NaN or infinity
                i = ids[k // self.nodes[ids[0]].size]
                raise FloatingPointError(
                    f"{OP_NAMES[self.nodes[i].op]} (node {i}) produced {v} "
                    f"(renew_cg(check_validity=True) checks every value)")
        return 0

    # --------------------------------------------------------- backward ----

    cdef int backward_from(self, int32_t target, bint full=False) except -1:
        self.check_idle()
        self.forward_to(target)
        cdef Node* t = &self.nodes[target]
        if elems(t) != 1:
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
        # Leaves: the gradient storage of trainable ones is the parameter's; other
        # ancestors write into a shared sink (kernels add to every argument). Nodes
        # that are not ancestors point at a zeroed sink that nothing writes, so that
        # gradient() reads zeros for them.
        for k in range(self.n_nodes):
            if self.nodes[k].size > sink_size:
                sink_size = self.nodes[k].size
        cdef float* sink = arena_alloc(&self.garena, sink_size)
        cdef float* zsink = arena_alloc(&self.garena, sink_size)
        memset(zsink, 0, sink_size * sizeof(float))
        if full:        # gradients of every ancestor, inputs and constants included
            for k in range(nanc):
                self.nodes[self.needed[k]].flags |= F_NEEDS_GRAD
        for k in range(self.n_nodes):
            if not OPS[self.nodes[k].op].leaf or self.nodes[k].flags & F_TRAINABLE:
                continue
            if self.mark[k] == st and self.nodes[k].flags & F_NEEDS_GRAD:
                self.nodes[k].grad = arena_alloc(&self.garena, self.nodes[k].size)
                memset(self.nodes[k].grad, 0, self.nodes[k].size * sizeof(float))
            else:
                self.nodes[k].grad = sink if self.mark[k] == st else zsink
        # one zeroed gradient block per batch that holds an ancestor
        cdef int64_t bi, j, per
        cdef int32_t* ids
        cdef bint any_anc, any_work
        cdef int64_t most = 1                # the largest batch
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
            if self.batch_n[bi] > most:
                most = self.batch_n[bi]
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
        return tuple(n.d[a] for a in range(n.nd))

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
                if self.sig_count[s] == 1:
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

    cpdef invalidate(self):
        """Forget every computed value (not the inputs): the next value() computes
        the graph again, e.g. after parameters were changed (DyNet's invalidate)."""
        self.check_idle()
        cdef int64_t i
        for i in range(self.n_nodes):
            if self.nodes[i].sig >= 0:
                self.nodes[i].flags &= ~F_DONE
        self.n_batches = 0
        self.n_batch_ids = 0

    def forward(self, Expression e):
        _check(e)
        self.forward_to(e.idx)

    def backward(self, Expression e, full=False):
        _check(e)
        self.backward_from(e.idx, full)


cdef inline bint memcmp_i64(const int64_t* a, const int64_t* b, int n) noexcept nogil:
    cdef int k
    for k in range(n):
        if a[k] != b[k]:
            return False
    return True
