# Named batching strategies: the built-in ones, the Frontier that Python strategies
# read, and the registry. Included by _core.pyx.

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
        """Whether nodes of this signature may share a batch: True for every op of
        this version (kept so that strategies can ask)."""
        self._graph()
        self._check(sig)
        return True

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
