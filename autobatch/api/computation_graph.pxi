# ComputationGraph: DyNet's graph class (dy.cg()), the engine's graph (engine/graph.pyx)
# with DyNet's calls and the views of what ran. Included by api/core.pyx.


cdef class ComputationGraph(EngineGraph):
    """One lazily evaluated graph. Create through `renew_cg()`."""

    def forward(self, index):
        """Compute ``index`` (an Expression, or a node index: DyNet's VariableIndex) and every
        ancestor not computed yet, in batches chosen by the graph's strategy (as
        ``e.forward()``)."""
        self.forward_to(self._node_arg(index))

    def backward(self, index, full=False):
        """Backward from the scalar ``index`` (an Expression or a node index), as
        ``e.backward(full)``: the batches of the forward pass in reverse, gradients added
        into the parameters' (and, with ``full=True``, kept for every node)."""
        self.backward_from(self._node_arg(index), full)

    def version(self):
        """This graph's version: renew_cg() gives every new graph a new one (DyNet's
        ComputationGraph.version)."""
        return self.version_id

    def stats(self):
        """Statistics of what ran so far in this graph (see the README)."""
        cdef NodeView v = self.view()
        out = {"strategy": getattr(self.strategy, "name", repr(self.strategy))}
        out.update(batch_stats(&v, &self.log, &self.sigs, self.strategy_id == S_NONE))
        out["fused"] = fusion_stats(&v, &self.log)
        out["fused"]["backward_chains"] = int(self.n_backward_chains)
        out["fused"]["shared_weight_grads"] = int(self.n_shared_weight_grads)
        out.update({
            "forward_calls": self.n_forward_calls,
            "backward_calls": self.n_backward_calls,
            "seconds": {"build": self.t_build, "schedule": self.t_schedule,
                        "forward": self.t_forward, "backward": self.t_backward},
            # bytes used by this graph's values, and by its last backward; the
            # capacity is what the process keeps for the next graph
            "arena_bytes": int(self.leaf_arena.peak + self.arena.peak),
            "grad_arena_bytes": int(self.garena.peak),
            "arena_capacity_bytes": int(arena_capacity(&self.leaf_arena) + arena_capacity(&self.arena)
                                        + arena_capacity(&self.garena)),
            "operands": operand_stats(&self.traffic),
            "node_capacity": int(self.cap_nodes),     # room for nodes before the array grows
        })
        if self.profiling:
            out["profile"] = profile_stats(&self.prof, self.t_build, self.t_schedule,
                                           self.t_forward, self.t_backward)
        return out

    def batches(self):
        """The batches in execution order: a list of (op name, [node ids])."""
        cdef NodeView v = self.view()
        return batch_list(&v, &self.log)

    def print_batches(self, file=None):
        """Debug view: every batch in execution order with its signature and shapes."""
        cdef NodeView v = self.view()
        print_batch_list(&v, &self.log, file or sys.stdout)

    def node_info(self, int32_t i):
        """(op name, shape, batch size, signature id, argument ids) of node i."""
        if not 0 <= i < self.n_nodes:
            raise IndexError(f"no node {i} in this graph ({self.n_nodes} nodes)")
        cdef Node* n = &self.nodes[i]
        return (OPS[n.op].name.decode(), self.shape_of(i), n.bs, n.sig,
                [self.args[n.args_at + a] for a in range(n.nargs)])

    def batch_lower_bound(self, passes=False):
        """A lower bound on the number of batches any strategy needs for the part of
        this graph computed so far: for each signature, the most computed nodes of that
        signature on any one dependency path (they can never share a batch); nodes no
        forward needed do not count. Returns (total, {signature: bound}).

        With ``passes=True``, the bound on ``stats()["passes"]`` (batches that are not
        a fused stage: a stage runs in its producer's pass): nodes that fusion may run
        as a stage (a plain elementwise op, sole consumer of a computed argument of
        its shape) count 0 (docs/fusion.md)."""
        cdef NodeView v = self.view()
        return lower_bound(&v, &self.sigs, passes)

    def signature_nodes(self):
        """{signature id: number of nodes created with it}."""
        return {s: self.sigs.count[s] for s in range(self.sigs.n)}

    @property
    def num_nodes(self):
        """The number of nodes created in this graph so far."""
        return int(self.n_nodes)

    def renew(self, immediate_compute=False, check_validity=False, autobatching=None,
              strategy=None, fusion=None):
        """`dy.renew_cg(...)` for this graph, which must be the calling thread's; returns it."""
        if cg() is not self:
            raise RuntimeError("renew: this is not the calling thread's current graph")
        return renew_cg(immediate_compute, check_validity, strategy=strategy,
                        autobatching=autobatching, fusion=fusion)

    cdef int32_t _node_arg(self, e) except -1:
        """A node from an Expression or DyNet's VariableIndex (an int)."""
        if isinstance(e, int) and not isinstance(e, bool):
            if not 0 <= e < self.n_nodes:
                raise IndexError(f"no node {e} in this graph ({self.n_nodes} nodes)")
            return e
        if not hasattr(e, "vindex"):
            raise TypeError(f"expected an Expression or a node index, got {type(e).__name__}")
        return self._index_of(e)

    def inc_forward(self, index):
        """Compute node `index` (an Expression or a node index) and what it needs, keeping
        what is already computed (DyNet's incremental_forward)."""
        self.forward_to(self._node_arg(index))

    def inc_forward_scalar(self, index):
        """`inc_forward`, then the value of a one-element node as a float."""
        return self._scalar(self._node_arg(index), False)

    def inc_forward_vec(self, index):
        """`inc_forward`, then the value as a flat list (column-major, batch last)."""
        return self._vec(self._node_arg(index), False)

    def forward_scalar(self, index):
        """Compute every value again up to `index` (DyNet's forward) and return it as a
        float; the node must have one element."""
        return self._scalar(self._node_arg(index), True)

    def forward_vec(self, index):
        """Compute every value again up to `index` and return it as a flat list."""
        return self._vec(self._node_arg(index), True)

    def _scalar(self, int32_t i, bint again):
        if self.nodes[i].size != 1:
            raise ValueError(f"forward_scalar: node {i} has {self.nodes[i].size} elements, not one")
        return float(self._vec(i, again)[0])

    def _vec(self, int32_t i, bint again):
        if again:
            self.invalidate()
        self.forward_to(i)
        return self.value_array(i, False).ravel(order="F").tolist()

    def inputMatrixLiteral(self, v, d, batch_size=1, device=""):
        """DyNet's ``cg.inputMatrixLiteral(v, d, batch_size=1, device="")``: an input of
        shape ``d`` x ``batch_size`` from the flat values ``v`` (column-major, the batch
        last), which ``set()`` may replace, in this graph (the current one)."""
        self._check_current("inputMatrixLiteral")
        _cpu_only(device, "inputMatrixLiteral")
        return _flat_input(v, d, batch_size, INPUT_VALUES, "inputMatrixLiteral")

    def inputSparseTensor(self, idxs, v, dim, batch_size=1, defval=0.0, device=""):
        """DyNet's ``cg.inputSparseTensor(idxs, v, dim, batch_size=1, defval=0.0,
        device="")``: an input of shape ``dim`` x ``batch_size`` equal to ``defval``
        except at the flat column-major positions ``idxs`` (the batch last), which hold
        ``v``; a repeated position keeps its last value. (``dy.sparse_inputTensor`` takes
        one index array per dimension.)"""
        self._check_current("inputSparseTensor")
        _cpu_only(device, "inputSparseTensor")
        return _sparse_flat_input(idxs, v, dim, batch_size, defval, "inputSparseTensor")

    cdef int _check_current(self, str where) except -1:
        if self is not _here():
            raise RuntimeError(f"{where}: this graph is not the calling thread's current "
                               f"graph (dy.cg()); nodes go to the current graph only")
        return 0

    def dump(self, filename, show_values, show_gradients, nan_check_only):
        """DyNet's ``cg.dump(filename, show_values, show_gradients, nan_check_only)``: every
        node's value and gradient as text, to the file ``filename`` (str or bytes; ""
        writes to standard output). Computes every node first. A value prints as DyNet
        prints a matrix (rows of right-aligned numbers; one matrix per batch element here,
        where DyNet refuses batches); ``nan_check_only`` prints "valid" (all finite) or
        "invalid" instead. A gradient is "(not computed)" before a backward or for nodes
        after the one it started from. DyNet leaves out the last node; here every node
        is listed."""
        if not isinstance(filename, (str, bytes, os.PathLike)):
            raise TypeError(f"dump: filename must be a path (str or bytes), got "
                            f"{type(filename).__name__}")
        name = os.fsdecode(filename)
        out = open(name, "w") if name else sys.stdout
        try:
            if self.n_nodes == 0:
                out.write("(Computation graph is empty)\n")
                return
            self._forward_all()
            for i in range(self.n_nodes):
                out.write(f"Node {i}\n")
                if show_values:
                    out.write("Value: " + _dump_value(self.value_array(i, False), i, self,
                                                      nan_check_only) + "\n")
                if show_gradients:
                    if self.backward_target < 0 or i > self.backward_target:
                        out.write("Gradient: (not computed)\n")
                    else:
                        out.write("Gradient: " + _dump_value(self.value_array(i, True), i, self,
                                                             nan_check_only) + "\n")
        finally:
            if name:
                out.close()

    cdef int _forward_all(self) except -1:
        """Compute every node of the graph (in one pass: its batches as usual)."""
        cdef int64_t k, n = self.n_nodes
        cdef int32_t* ids = <int32_t*>malloc(n * sizeof(int32_t))
        if ids == NULL:
            raise MemoryError()
        try:
            for k in range(n):
                ids[k] = <int32_t>k
            self.forward_many(ids, n)
        finally:
            free(ids)
        return 0

    def print_graphviz(self, file=None):
        """The graph in Graphviz's dot language, one line per node "vI = op(vJ, ...)
        shape", to `file` (default: standard error, as DyNet)."""
        out = file if file is not None else sys.stderr
        if not callable(getattr(out, "write", None)):
            raise TypeError(f"print_graphviz: file must have a write() method, got {type(file).__name__}")
        cdef NodeView v = self.view()
        print_graphviz(&v, out)


cdef str _dump_value(object a, int32_t i, ComputationGraph g, bint nan_check_only):
    """A value for ComputationGraph.dump: "valid"/"invalid", or its matrices."""
    if nan_check_only:
        return "valid" if np.all(np.isfinite(a)) else "invalid"
    cdef Node* n = &g.nodes[i]
    per = np.asarray(a).reshape(n.d[0], -1, n.bs, order="F") if n.bs > 1 else \
        np.asarray(a).reshape(n.d[0], -1, 1, order="F")
    return "\n" + "\n".join(_matrix_text(per[:, :, b]) for b in range(per.shape[2]))


cdef str _matrix_text(object m):
    """A matrix as Eigen prints it (and so DyNet): "%g" numbers right-aligned to the
    widest, one row a line."""
    cells = [[f"{float(v):g}" for v in row] for row in m]
    width = max(len(c) for row in cells for c in row)
    return "\n".join(" ".join(c.rjust(width) for c in row) for row in cells)
