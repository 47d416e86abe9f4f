# ComputationGraph: DyNet's graph class (dy.cg()), the engine's graph (engine/graph.pyx)
# with DyNet's calls and the views of what ran. Included by api/core.pyx.


cdef class ComputationGraph(EngineGraph):
    """One lazily evaluated graph. Create through `renew_cg()`."""

    def forward(self, e):
        """Compute ``e`` (an Expression, or a node index as DyNet's VariableIndex) and every
        ancestor not computed yet, in batches chosen by the graph's strategy (as
        ``e.forward()``)."""
        self.forward_to(self._node_arg(e))

    def backward(self, e, full=False):
        """Backward from the scalar ``e`` (an Expression or a node index), as
        ``e.backward(full)``: the batches of the forward pass in reverse, gradients added
        into the parameters' (and, with ``full=True``, kept for every node)."""
        self.backward_from(self._node_arg(e), full)

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

    def batch_lower_bound(self):
        """A lower bound on the number of batches any strategy needs for the scheduled
        part of this graph: for each signature, the most nodes of that signature on
        any one dependency path (they can never share a batch). Returns
        (total, {signature: bound})."""
        cdef NodeView v = self.view()
        return lower_bound(&v, &self.sigs)

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

    def inc_forward(self, e):
        """Compute node `e` (an Expression or a node index) and what it needs, keeping
        what is already computed (DyNet's incremental_forward)."""
        self.forward_to(self._node_arg(e))

    def inc_forward_scalar(self, e):
        """`inc_forward`, then the value of a one-element node as a float."""
        return self._scalar(self._node_arg(e), False)

    def inc_forward_vec(self, e):
        """`inc_forward`, then the value as a flat list (column-major, batch last)."""
        return self._vec(self._node_arg(e), False)

    def forward_scalar(self, e):
        """Compute every value again up to `e` (DyNet's forward) and return it as a
        float; `e` must have one element."""
        return self._scalar(self._node_arg(e), True)

    def forward_vec(self, e):
        """Compute every value again up to `e` and return it as a flat list."""
        return self._vec(self._node_arg(e), True)

    def _scalar(self, int32_t i, bint again):
        if self.nodes[i].size != 1:
            raise ValueError(f"forward_scalar: node {i} has {self.nodes[i].size} elements, not one")
        return float(self._vec(i, again)[0])

    def _vec(self, int32_t i, bint again):
        if again:
            self.invalidate()
        self.forward_to(i)
        return self.value_array(i, False).ravel(order="F").tolist()

    def print_graphviz(self, file=None):
        """The graph in Graphviz's dot language, one line per node "vI = op(vJ, ...)
        shape", to `file` (default: standard error, as DyNet)."""
        out = file if file is not None else sys.stderr
        if not callable(getattr(out, "write", None)):
            raise TypeError(f"print_graphviz: file must have a write() method, got {type(file).__name__}")
        cdef NodeView v = self.view()
        print_graphviz(&v, out)
