# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The engine's side of a computation graph: node storage (C arrays, append-only),
the passes and checkpoints. A forward collects the needed nodes (scheduler) and runs
the forward loop (forward: the strategy picks batches, the executor runs them, fusion
runs their chains); backward replays the batches in reverse (backward). DyNet's
ComputationGraph (api/computation_graph.pxi) extends it with DyNet's calls and the
views of what ran (stats)."""
import numpy as np

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset
from cpython.exc cimport PyErr_CheckSignals

from autobatch.engine.backward cimport backward_pass, mark_used_rows
from autobatch.engine.checkpoints cimport computed_any, uncompute, drop_signatures, drop_uses
from autobatch.engine.executor cimport run_batch, log_reset, log_free
from autobatch.runtime.nodes cimport OpDef, elems, MAX_DIMS, F_DONE, F_NEEDS_GRAD
from autobatch.runtime.param_buffers cimport ValueSource, add_reader, graph_started, graph_ended
from autobatch.engine.optable cimport op_table, OP_NOBACKPROP, OP_LOOKUP
from autobatch.runtime.rng cimport rng_seed
from autobatch.runtime.memory cimport (arena_alloc_or_raise, arena_reset, arena_free,
                                arena_mark, arena_revert, grow, arrays_always_move,
                                move_array)
from autobatch.engine.forward cimport run_forward
from autobatch.kernels.packed cimport packs_begin, packs_free
from autobatch.engine.scheduler cimport sched_collect_many, sched_free
from autobatch.engine.signatures cimport sig_intern, sig_reset, sig_truncate, sig_free
from autobatch.runtime.profile cimport Profile, Traffic, prof_now
from autobatch.runtime.stacks cimport stacks_clear, stacks_free
from autobatch.engine.layout cimport layout_on
from autobatch.engine.stats cimport profiling_enabled
from autobatch.engine.strategies cimport S_NONE, strategy_id
from autobatch.engine.strategies import resolve_strategy
from autobatch.errors import StaleExpressionError

cdef const OpDef* OPS = op_table()
cdef int32_t _last_version = -1        # the first graph is version 0, as in DyNet
cdef bint ALWAYS_MOVE = arrays_always_move()   # AUTOBATCH_DEBUG_MOVE_ARRAYS (runtime/memory.pyx)


cdef int32_t new_version() except -1:
    """A graph version never used before, in any thread (renew_cg and cg_revert):
    0, 1, 2 ... as DyNet numbers its graphs (a revert takes one too)."""
    global _last_version
    if _last_version >= 2147483600:
        raise OverflowError("autobatch: too many computation graphs in one process")
    _last_version += 1
    return _last_version


cdef int _move_arrays(EngineGraph g) except -1:
    """AUTOBATCH_DEBUG_MOVE_ARRAYS: the node and argument arrays to new memory, the old
    poisoned (runtime/memory.pyx), before an append; out of add_node's own code."""
    g.nodes = <Node*>move_array(g.nodes, g.cap_nodes, g.n_nodes, sizeof(Node))
    g.args = <int32_t*>move_array(g.args, g.cap_args, g.n_args, sizeof(int32_t))
    return 0


cdef class EngineGraph:
    """The engine's side of a computation graph: node storage, the forward and backward
    passes, checkpoints. The DyNet-facing class, ComputationGraph (api/computation_graph.pxi),
    extends it."""

    def __init__(self, strategy):
        self.fusion = True
        self.keepalive = []
        self.version_id = self.base_version = new_version()
        graph_started(self.base_version)
        self._clear()
        self.nodes = <Node*>grow(self.nodes, &self.cap_nodes, NODE_HEADROOM, sizeof(Node))
        self.set_strategy(strategy)
        self.t_last = prof_now()

    def __dealloc__(self):
        graph_ended(self.base_version)
        arena_free(&self.leaf_arena)
        arena_free(&self.arena)
        arena_free(&self.garena)
        free(self.nodes)
        free(self.born)
        free(self.checkpoints)
        free(self.args)
        free(self.ibuf)
        free(self.tables)
        free(self.table_src)
        free(self.reads)
        free(self.marks)
        sig_free(&self.sigs)
        packs_free(&self.packs)
        stacks_free(&self.stacks)
        sched_free(&self.sched)
        log_free(&self.log)

    cdef void _clear(self):
        self.n_nodes = self.n_args = self.n_ibuf = self.n_tables = self.n_marks = 0
        self.n_reads = self.n_read = 0
        self.n_checkpoints = 0
        self.backward_target = -1
        sig_reset(&self.sigs)
        log_reset(&self.log)
        self.t_build = self.t_schedule = self.t_forward = self.t_backward = 0
        self.n_forward_calls = self.n_backward_calls = 0
        self.profiling = profiling_enabled()
        memset(&self.prof, 0, sizeof(Profile))
        memset(&self.traffic, 0, sizeof(Traffic))
        self.n_backward_chains = 0
        self.n_shared_weight_grads = 0

    cdef start(self, strategy, int version, uint64_t seed, bint immediate_compute=False,
               bint check_validity=False, bint fusion=True):
        """Start a new graph in the same memory (arenas keep their capacity)."""
        self.check_idle()
        self.fusion = fusion
        self.immediate_compute = immediate_compute
        self.check_validity = check_validity
        arena_reset(&self.leaf_arena)
        arena_reset(&self.arena)
        arena_reset(&self.garena)
        self.keepalive = []
        graph_ended(self.base_version)      # the buffers it read may be written again
        graph_started(version)
        self.version_id = self.base_version = version
        self._clear()
        self.set_strategy(strategy)
        rng_seed(&self.rng, seed)
        self.t_last = prof_now()

    cpdef set_strategy(self, strategy):
        """Use ``strategy`` (a registered name such as "agenda", or a strategy object) for the
        batches computed from now on in this graph; ``renew_cg(strategy=...)`` sets it for a new
        graph. ValueError for an unknown name.
        """
        self.strategy = resolve_strategy(strategy)
        self.strategy_id = strategy_id(self.strategy)

    cdef NodeView view(self) noexcept:
        cdef NodeView v
        v.nodes = self.nodes
        v.args = self.args
        v.ibuf = self.ibuf
        v.n = self.n_nodes
        return v

    cdef Batch context(self) noexcept:
        """What kernels may touch, for the executor and backward to fill per batch."""
        cdef Batch b
        memset(&b, 0, sizeof(Batch))
        b.nodes = self.nodes
        b.args = self.args
        b.ibuf = self.ibuf
        b.tables = self.tables
        b.arena = &self.arena
        b.scratch = &self.garena
        b.rng = &self.rng
        b.packs = &self.packs
        b.prof = &self.prof if self.profiling else NULL
        b.traffic = &self.traffic
        return b

    # ------------------------------------------------------------ nodes ----

    cdef int32_t add_node(self, int op, int nargs, const int32_t* argv, Shape shape,
                          int32_t idata=0, const Attrs* attr=NULL, bint headroom=True) except -1:
        """Append a node (its shape checked by the caller) with its typed attributes.

        The node array keeps NODE_HEADROOM free slots after every node added with
        headroom: a Parameters used as an Expression gets its node of this graph while
        an op checks its arguments (headroom=False), after the op may already hold
        Node* of earlier arguments; those nodes use the free slots, so the array does
        not move under the op (up to NODE_HEADROOM arguments). The ops do not count on
        it: they check every argument before taking a Node* (_check_args, "Indices
        across appends" in docs/architecture.md); the slots are a second line."""
        cdef int64_t i = self.n_nodes
        cdef int a
        if self.busy:
            self.check_idle()
        if i >= 2147483000:
            raise MemoryError("autobatch: too many nodes in one graph")
        for a in range(nargs):      # earlier nodes of this graph only (never read elsewhere)
            if not 0 <= argv[a] < i:
                raise StaleExpressionError(f"argument {a} is not a node of this graph: an "
                                           f"Expression changed while the op was built")
        if ALWAYS_MOVE:     # the debugging switch: the arrays move on every append
            _move_arrays(self)
        self.nodes = <Node*>grow(self.nodes, &self.cap_nodes,
                                 i + 1 + (NODE_HEADROOM if headroom else 0), sizeof(Node))
        self.born = <int32_t*>grow(self.born, &self.cap_born, i + 1, sizeof(int32_t))
        self.born[i] = self.version_id
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
        cdef Node* arg
        for a in range(nargs):
            self.args[self.n_args + a] = argv[a]
            arg = &self.nodes[argv[a]]
            arg.uses += 1
            if arg.flags & F_NEEDS_GRAD:
                n.flags |= F_NEEDS_GRAD
        if op == OP_NOBACKPROP:
            n.flags &= ~F_NEEDS_GRAD
        self.n_args += nargs
        self.n_nodes = i + 1
        if OPS[op].leaf:
            n.sig = -1
            n.flags |= F_DONE
        else:
            view = self.view()
            n.sig = sig_intern(&self.sigs, &view, <int32_t>i)
        return <int32_t>i

    cdef float* leaf_memory(self, int32_t i) except NULL:
        """Arena memory for a leaf's value, filled by the caller."""
        cdef float* p = arena_alloc_or_raise(&self.leaf_arena, self.nodes[i].size)
        self.nodes[i].val = p
        return p

    cdef int32_t add_ints(self, object values, int count) except -1:
        """Store per-node integer data; returns its offset in ibuf."""
        cdef int64_t at = self.n_ibuf
        cdef int k
        if at + count >= 2147483647:
            raise MemoryError("autobatch: too many indices in one graph")
        if ALWAYS_MOVE:
            self.ibuf = <int32_t*>move_array(self.ibuf, self.cap_ibuf, at, sizeof(int32_t))
        self.ibuf = <int32_t*>grow(self.ibuf, &self.cap_ibuf, at + count, sizeof(int32_t))
        for k in range(count):
            self.ibuf[at + k] = values[k]
        self.n_ibuf = at + count
        return <int32_t>at

    cdef int32_t add_table(self, ValueSource* values, float* grads) except -1:
        """The slot of a lookup table (where its values are, its gradients or NULL) in
        `tables`; the values' pointer is refreshed at each forward (read_leaves)."""
        cdef int64_t n = self.n_tables
        if n > 0 and self.table_src[n - 1] == values and self.tables[2 * n - 1] == grads:
            return <int32_t>(n - 1)
        if n >= 1073741823:
            raise MemoryError("autobatch: too many lookup tables in one graph")
        self.tables = <float**>grow(self.tables, &self.cap_tables, 2 * n + 2, sizeof(float*))
        self.table_src = <ValueSource**>grow(self.table_src, &self.cap_table_src, n + 1,
                                             sizeof(ValueSource*))
        self.tables[2 * n] = values.values
        self.tables[2 * n + 1] = grads
        self.table_src[n] = values
        self.n_tables = n + 1
        return <int32_t>n

    cdef int add_read(self, int32_t node, ValueSource* src) except -1:
        """Leaf `node` reads the parameter values `src` when it is first computed: an
        OP_PARAM node points into them (and the graph becomes their reader), an OP_LOOKUP
        node (with leaf memory) copies its row, as DyNet's nodes copy at forward time."""
        self.reads = <LeafRead*>grow(self.reads, &self.cap_reads, self.n_reads + 1, sizeof(LeafRead))
        self.reads[self.n_reads].node = node
        self.reads[self.n_reads].src = src
        self.n_reads += 1
        return 0

    cdef ValueSource* read_source(self, int32_t node) noexcept:
        """The parameter values leaf `node` reads (NULL: none)."""
        cdef int64_t k
        for k in range(self.n_reads - 1, -1, -1):
            if self.reads[k].node == node:
                return self.reads[k].src
        return NULL

    cdef void read_leaves(self) noexcept:
        """Before a pass computes anything: the leaves made since the last pass (or every
        leaf after invalidate) take the parameters' values of now, and the lookup tables'
        slots point at their current buffers."""
        cdef int64_t k
        cdef Node* n
        cdef ValueSource* src
        for k in range(self.n_read, self.n_reads):
            n = &self.nodes[self.reads[k].node]
            src = self.reads[k].src
            if n.op == OP_LOOKUP:
                if n.size:
                    memcpy(n.val, src.values + <int64_t>n.idata * n.size, n.size * sizeof(float))
            else:
                n.val = src.values
                add_reader(src, self.base_version)
        self.n_read = self.n_reads
        for k in range(self.n_tables):
            self.tables[2 * k] = self.table_src[k].values

    cdef int add_row_mark(self, int32_t node, uint8_t* used, int32_t whole=0) except -1:
        """Remember that a backward from `node` or a later node marks the rows of the
        trainable lookup `node` (whole > 0: all `whole` rows) in `used` (mark_used_rows)."""
        cdef int64_t n = self.n_marks
        self.marks = <RowMark*>grow(self.marks, &self.cap_marks, n + 1, sizeof(RowMark))
        self.marks[n].node = node
        self.marks[n].whole = whole
        self.marks[n].used = used
        self.n_marks = n + 1
        return 0

    # ---------------------------------------------------------- forward ----

    cdef int check_idle(self) except -1:
        if self.busy:
            raise RuntimeError("the graph is in the middle of a forward or backward pass: it "
                               "cannot be built or computed from inside a strategy's select() "
                               "or from another thread")
        return 0

    cdef int forward_to(self, int32_t target) except -1:
        """Compute `target` and every ancestor not computed yet, in batches."""
        return self.forward_many(&target, 1)

    cdef int forward_many(self, const int32_t* targets, int64_t n) except -1:
        """Compute the targets and every ancestor not computed yet, in one forward (so
        the nodes of all targets batch together)."""
        cdef int64_t k
        cdef bint done = True
        if self.n_read < self.n_reads:      # a leaf's value is read even when done
            self.check_idle()
            self.read_leaves()
        for k in range(n):
            if not 0 <= targets[k] < self.n_nodes:
                raise IndexError(f"no node {targets[k]} in this graph ({self.n_nodes} nodes)")
            done = done and (self.nodes[targets[k]].flags & F_DONE) != 0
        if done:
            return 0
        self.check_idle()
        self.busy = True
        try:
            self._forward(targets, n)
        finally:
            self.busy = False
        return 0

    cdef int _forward(self, const int32_t* targets, int64_t n_targets) except -1:
        cdef double t0 = prof_now()
        self.t_build += t0 - self.t_last
        self.n_forward_calls += 1
        cdef NodeView v = self.view()
        cdef Batch ctx = self.context()
        stacks_clear(&self.stacks)      # their sources may have changed since the last pass
        if layout_on():
            ctx.stacks = &self.stacks
        cdef int64_t count = sched_collect_many(&self.sched, &v, targets, n_targets, False)
        self.read_leaves()
        packs_begin(&self.packs)        # parameters may have changed since the last pass
        cdef double t_sched = prof_now() - t0, t_run = 0
        run_forward(&v, &ctx, &self.sched, &self.log, &self.sigs, &self.packs, self.strategy_id,
                    self.strategy, count, self.fusion, self.check_validity, &t_sched, &t_run)
        self.t_schedule += t_sched
        self.t_forward += t_run
        self.t_last = prof_now()
        return 0

    # --------------------------------------------------------- backward ----

    cdef int backward_from(self, int32_t target, bint full=False) except -1:
        """Backward is applied completely or not at all: a Ctrl-C that arrives before
        it starts stops it; one that arrives during it is raised after it finished."""
        self.check_idle()
        self.forward_to(target)
        PyErr_CheckSignals()
        if elems(&self.nodes[target]) != 1:
            raise ValueError(f"backward() needs a scalar expression; this one has shape "
                             f"{self.shape_of(target)} (sum it first, e.g. with dy.sum_elems)")
        cdef double t0 = prof_now()
        self.t_build += t0 - self.t_last
        self.n_backward_calls += 1
        cdef NodeView v = self.view()
        cdef Batch ctx = self.context()
        self.busy = True
        packs_begin(&self.packs)
        try:
            backward_pass(&v, &self.log, &self.sched, &ctx, target, full,
                          self.strategy_id != S_NONE, self.fusion, &self.n_backward_chains,
                          &self.n_shared_weight_grads)
        finally:
            # also after a pass that failed (out of memory) part way: every row it may
            # have added into is marked (a dense update reads only marked rows' gradient)
            mark_used_rows(&v, self.marks, self.n_marks, target)
            self.busy = False
        self.t_backward += prof_now() - t0
        self.t_last = prof_now()
        self.backward_target = target
        return 0

    # ------------------------------------------------------ inspection ----

    cdef tuple shape_of(self, int32_t i):
        # a plain loop, not tuple(genexpr): Expression.dim() calls this for every
        # builder step, and a generator costs a frame and its resumptions per call
        cdef Node* n = &self.nodes[i]
        cdef int a
        cdef list dims = []
        for a in range(n.nd):
            dims.append(n.d[a])
        return tuple(dims)

    cdef object value_array(self, int32_t i, bint grad):
        """Copy of a node's value (or gradient) as numpy, DyNet's shape conventions
        (column-major; the batch is the last axis when there is more than one)."""
        cdef Node* n = &self.nodes[i]
        out = np.empty(n.size, dtype=np.float32)
        cdef float[::1] buf = out
        cdef float* src = n.grad if grad else n.val
        if grad and (src == NULL or not (n.flags & F_NEEDS_GRAD)):
            out[:] = 0
        elif n.size > 0:
            memcpy(&buf[0], src, n.size * sizeof(float))
        shape = self.shape_of(i)
        if n.bs > 1:
            shape = shape + (n.bs,)
        return out.reshape(shape, order="F")

    cdef int32_t _index_of(self, e) except -1:
        """The node of an Expression of this graph (StaleExpressionError otherwise)."""
        idx, version = e.vindex, e.cg_version
        if not 0 <= idx < self.n_nodes or not (version == self.version_id or self.owns(version, idx)):
            raise StaleExpressionError("the Expression does not belong to this computation graph "
                                       "(it is stale, or the graph was renewed)")
        return idx

    cpdef invalidate(self):
        """Forget every computed value (not the inputs): the next value() computes
        the graph again, e.g. after parameters were changed (DyNet's invalidate)."""
        self.check_idle()
        cdef int64_t i
        for i in range(self.n_nodes):
            if self.nodes[i].sig >= 0:
                self.nodes[i].flags &= ~F_DONE
                self.nodes[i].grad = NULL   # its gradient memory goes with the values
        log_reset(&self.log)
        arena_reset(&self.arena)        # computed values go; inputs stay (leaf_arena)
        self.n_read = 0                 # parameters and lookups are read again (DyNet's forward)
        self.backward_target = -1       # gradients of the old values go too
        self.resets += 1

    cdef bint owns(self, int32_t version, int32_t idx) noexcept:
        """Whether node idx made under `version` is a live node of this graph: made
        since the last renew and not dropped by cg_revert (which gives the graph a new
        version, so a node made at the same index later has another one)."""
        return (self.base_version <= version <= self.version_id and 0 <= idx < self.n_nodes
                and self.born[idx] == version)

    # --------------------------------------------------- checkpoint / revert ----

    def checkpoint(self):
        """Remember the graph as it is now (DyNet's cg_checkpoint); checkpoints nest."""
        self.check_idle()
        cdef int64_t k = self.n_checkpoints
        self.checkpoints = <Checkpoint*>grow(self.checkpoints, &self.cap_checkpoints, k + 1,
                                             sizeof(Checkpoint))
        cdef Checkpoint* cp = &self.checkpoints[k]
        cp.n_nodes, cp.n_args, cp.n_ibuf = self.n_nodes, self.n_args, self.n_ibuf
        cp.n_tables, cp.n_sigs, cp.n_keepalive = self.n_tables, self.sigs.n, len(self.keepalive)
        cp.n_marks = self.n_marks
        cp.n_reads = self.n_reads
        cp.log_n, cp.log_n_ids, cp.resets = self.log.n, self.log.n_ids, self.resets
        cp.leaf = arena_mark(&self.leaf_arena)
        cp.values = arena_mark(&self.arena)
        self.n_checkpoints = k + 1

    def revert(self):
        """Drop every node made since the last checkpoint and forget that checkpoint
        (DyNet's cg_revert; without a checkpoint it does nothing). Expressions of
        dropped nodes raise StaleExpressionError from now on; older ones stay valid and
        keep their computed values unless a batch computed since the checkpoint held a
        dropped node (then that part is computed again when needed). The graph gets a
        new version (cg_version()), so caches keyed by it are rebuilt."""
        self.check_idle()
        if self.n_checkpoints == 0:
            return
        self.n_checkpoints -= 1
        cdef Checkpoint cp = self.checkpoints[self.n_checkpoints]
        drop_signatures(self.nodes, &self.sigs, cp.n_nodes, self.n_nodes, cp.n_sigs)
        drop_uses(self.nodes, self.args, cp.n_nodes, self.n_nodes)
        if cp.resets != self.resets:            # recalculated since: the marks are void
            if computed_any(&self.log, 0, <int32_t>cp.n_nodes):
                self.invalidate()
        elif computed_any(&self.log, cp.log_n, <int32_t>cp.n_nodes):
            uncompute(self.nodes, &self.log, cp.log_n)
            arena_revert(&self.arena, cp.values)
        # leaves get their memory only when they are made: what came after the mark
        # belonged to dropped leaves
        arena_revert(&self.leaf_arena, cp.leaf)
        self.n_nodes, self.n_args, self.n_ibuf = cp.n_nodes, cp.n_args, cp.n_ibuf
        self.n_tables, self.n_marks = cp.n_tables, cp.n_marks
        self.n_reads = cp.n_reads
        self.n_read = min(self.n_read, self.n_reads)
        del self.keepalive[cp.n_keepalive:]
        if self.backward_target >= cp.n_nodes:  # the loss was dropped: its gradients go
            self.backward_target = -1
        self.version_id = new_version()
