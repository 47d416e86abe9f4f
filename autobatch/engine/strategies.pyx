# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Named batching strategies. Each picks the next batch from the ready frontier
(engine/scheduler.pyx): the built-in policies are C functions in a table indexed by
strategy id; a strategy written in Python gets a read-only Frontier in select()."""
import operator

import numpy as np

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from autobatch.runtime.nodes cimport OpDef, F_DONE
from autobatch.engine.optable cimport op_table
from autobatch.engine.scheduler cimport sched_feeder, sched_take, sched_take_chosen
from autobatch.engine.cost_model cimport pick_cost

cdef const OpDef* OPS = op_table()

cdef int32_t ALL_DEPTHS = 2147483647


# ------------------------------------------------------ built-in policies ----

cdef int pick_agenda(Sched* s, const NodeView* v) noexcept nogil:
    """DyNet's agenda: the signature whose pending nodes (ready or not) have the
    lowest average depth; static per forward, so a signature that still has deep
    nodes to come waits for them."""
    cdef int64_t k
    cdef int32_t g, best = -1
    cdef double best_avg = 0
    for k in range(s.n_active):
        g = s.active[k]
        if best < 0 or s.avg_depth[g] < best_avg or (s.avg_depth[g] == best_avg and g < best):
            best = g
            best_avg = s.avg_depth[g]
    return sched_take(s, best, ALL_DEPTHS)


cdef int pick_critical(Sched* s, const NodeView* v) noexcept nogil:
    """Critical path first: the signature whose pending nodes have the longest way
    still to go; side branches (an output layer per position) wait and run together;
    ties go to the lower average depth."""
    cdef int64_t k
    cdef int32_t g, best = -1
    for k in range(s.n_active):
        g = s.active[k]
        if best < 0 or s.avg_height[g] > s.avg_height[best] or \
                (s.avg_height[g] == s.avg_height[best] and s.avg_depth[g] < s.avg_depth[best]):
            best = g
    return sched_take(s, best, ALL_DEPTHS)


cdef inline int32_t critical_sig(Sched* s) noexcept nogil:
    """The signature 'critical' picks: longest average height, ties to the lower
    average depth, then the lower id."""
    cdef int64_t k
    cdef int32_t g, best = -1
    for k in range(s.n_active):
        g = s.active[k]
        if best < 0 or s.avg_height[g] > s.avg_height[best] or \
                (s.avg_height[g] == s.avg_height[best] and
                 (s.avg_depth[g] < s.avg_depth[best] or
                  (s.avg_depth[g] == s.avg_depth[best] and g < best))):
            best = g
    return best


cdef int pick_lookahead(Sched* s, const NodeView* v) noexcept nogil:
    """'critical' with one step of lookahead: before running the chosen signature C,
    run a ready signature whose nodes feed a node of signature C, so that C's batch
    grows (two LSTM directions have their own weights, so their gate products are two
    batches, but their gate nonlinearities share a signature). The choice is always a
    ready signature, so it never stalls. The feeders of C come from the scheduler's
    feeder lists (amortised O(1) per consumer edge), not from a scan of the frontier."""
    cdef int32_t best = critical_sig(s)
    cdef int32_t feeder = sched_feeder(s, v, best)
    return sched_take(s, best if feeder < 0 else feeder, ALL_DEPTHS)


cdef int pick_depth(Sched* s, const NodeView* v) noexcept nogil:
    """TensorFlow Fold: the lowest depth first, one signature at a time."""
    cdef int64_t k, r
    cdef int32_t g, best = -1, d, best_d = 0
    cdef int32_t* lst
    for k in range(s.n_active):
        g = s.active[k]
        lst = s.rd + s.rd_at[g]
        for r in range(s.rd_n[g]):
            d = s.depth[lst[r]]
            if best < 0 or d < best_d or (d == best_d and g < best):
                best = g
                best_d = d
    return sched_take(s, best, best_d)


ctypedef int (*Policy)(Sched* s, const NodeView* v) noexcept nogil

# indexed by strategy id; 'none' never picks (the forward runs nodes in id order)
cdef Policy POLICIES[6]
POLICIES[S_NONE] = NULL
POLICIES[S_DEPTH] = pick_depth
POLICIES[S_AGENDA] = pick_agenda
POLICIES[S_CRITICAL] = pick_critical
POLICIES[S_LOOKAHEAD] = pick_lookahead
POLICIES[S_COST] = pick_cost


cdef int pick_batch(int sid, object strategy, Sched* s, const NodeView* v,
                    const SigTable* sigs) except -1:
    """Move the next batch to s.picked; returns its size."""
    if sid != S_PYTHON:
        return POLICIES[sid](s, v)
    return pick_python(strategy, s, v, sigs)


# ------------------------------------------------------ Python strategies ----

cdef class Frontier:
    """Read-only view of the ready nodes, given to a Python strategy's `select()`.

    Nodes are ready when all their arguments are computed. They are grouped by
    signature: every group can run as one batch. `select` returns a signature id
    (run all its ready nodes) or `(signature, node_ids)` (run those only).
    """
    cdef Sched* s
    cdef const NodeView* v
    cdef const SigTable* sigs

    cdef int _check(self, int32_t sig) except -1:
        if self.s == NULL:
            raise RuntimeError("this Frontier is only valid during select()")
        if not (0 <= sig < self.sigs.n) or self.s.active_pos[sig] < 0:
            raise KeyError(f"signature {sig} has no ready node")
        return 0

    def signatures(self):
        """Signature ids that have ready nodes."""
        if self.s == NULL:
            raise RuntimeError("this Frontier is only valid during select()")
        return sorted(self.s.active[k] for k in range(self.s.n_active))

    def nodes(self, int32_t sig):
        """Ready node ids of a signature."""
        self._check(sig)
        return [self.s.rd[self.s.rd_at[sig] + k] for k in range(self.s.rd_n[sig])]

    def depths(self, int32_t sig):
        """Depth (1 + the deepest argument still to compute) of each ready node."""
        self._check(sig)
        return [self.s.depth[self.s.rd[self.s.rd_at[sig] + k]] for k in range(self.s.rd_n[sig])]

    def average_depth(self, int32_t sig):
        """Mean depth of all nodes of this signature still to compute in this forward
        (ready or not): the agenda strategy's priority."""
        self._check(sig)
        return self.s.avg_depth[sig]

    def average_height(self, int32_t sig):
        """Mean height (longest path to an output of this forward) of all nodes of this
        signature still to compute: the critical strategy's priority."""
        self._check(sig)
        return self.s.avg_height[sig]

    def op_name(self, int32_t sig):
        """The name of the op of signature ``sig`` (e.g. 'matmul', 'tanh')."""
        self._check(sig)
        return OPS[self.v.nodes[self.sigs.first[sig]].op].name.decode()

    def batchable(self, int32_t sig):
        """Whether nodes of this signature may share a batch: True for every op of
        this version (kept so that strategies can ask)."""
        self._check(sig)
        return True

    def total_nodes(self, int32_t sig):
        """Nodes of this signature in the whole graph (ready or not)."""
        self._check(sig)
        return self.sigs.count[sig]


cdef int pick_python(object strategy, Sched* s, const NodeView* v,
                     const SigTable* sigs) except -1:
    frontier = Frontier.__new__(Frontier)
    (<Frontier>frontier).s = s
    (<Frontier>frontier).v = v
    (<Frontier>frontier).sigs = sigs
    try:
        choice = strategy.select(frontier)
    finally:
        (<Frontier>frontier).s = NULL      # a kept frontier must not read stale arrays
    nodes = None
    if isinstance(choice, tuple):
        if len(choice) != 2:
            raise ValueError(f"strategy {strategy!r}: select() returned a tuple of "
                             f"{len(choice)} items; expected (signature, node_ids)")
        choice, nodes = choice
    if isinstance(choice, bool) or not isinstance(choice, (int, np.integer)):
        raise TypeError(f"strategy {strategy!r}: select() must return a signature id "
                        f"(int) or (signature, node_ids), not {type(choice).__name__}")
    if not (0 <= choice < sigs.n) or s.active_pos[<int32_t>choice] < 0:
        raise ValueError(f"strategy {strategy!r} chose signature {choice}, which has no ready node")
    cdef int32_t sig = <int32_t>choice
    if nodes is None:
        return sched_take(s, sig, ALL_DEPTHS)
    try:
        wanted = set(operator.index(x) for x in nodes)
    except TypeError:
        raise TypeError(f"strategy {strategy!r}: node ids must be ints") from None
    if not wanted:
        raise ValueError(f"strategy {strategy!r} chose no node")
    cdef int32_t* lst = s.rd + s.rd_at[sig]
    cdef int k, n = s.rd_n[sig], found = 0
    cdef char* chosen = <char*>malloc(n + 1)
    if chosen == NULL:
        raise MemoryError()
    try:
        for k in range(n):
            chosen[k] = lst[k] in wanted
            found += chosen[k]
        if found != len(wanted):
            raise ValueError(f"strategy {strategy!r} chose nodes that are not ready "
                             f"or do not have signature {sig}")
        return sched_take_chosen(s, sig, chosen)
    finally:
        free(chosen)


# -------------------------------------------------------------- registry ----

cdef class BuiltinStrategy:
    """A batching strategy implemented in Cython over C arrays."""

    def __init__(self, int sid, str name, str description):
        self.sid = sid
        self.name = name
        self.description = description

    def __repr__(self):
        return f"<strategy {self.name!r} (built in)>"


_STRATEGIES = {}
# the one that was fastest across the bench's thirteen workloads (docs/strategies.md,
# "The default strategy")
_default_strategy = ["lookahead"]


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
    """The registered strategies as a dict {name: strategy}: the built-in "none", "depth",
    "agenda", "critical", "lookahead" and "cost", and any added by ``register_strategy``. Each chooses what
    runs as one batch; every one gives the same numbers.

    Example::

        for name in dy.available_strategies():
            dy.renew_cg(strategy=name)
    """
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


cdef int strategy_id(object strategy) except -1:
    """The id of a resolved strategy (S_PYTHON for one written in Python)."""
    if isinstance(strategy, BuiltinStrategy):
        return (<BuiltinStrategy>strategy).sid
    return S_PYTHON


def set_default_strategy(strategy):
    """Process-wide strategy for graphs created without one."""
    resolve_strategy(strategy)
    _default_strategy[0] = strategy


def default_strategy():
    """The name (or object) of the strategy that graphs made without one use: "lookahead"
    unless ``set_default_strategy`` (or DyNet's ``--dynet-autobatch``) changed it.
    """
    return _default_strategy[0]


NONE = register_strategy(BuiltinStrategy(S_NONE, "none", "every node alone, in creation order"))
DEPTH = register_strategy(BuiltinStrategy(S_DEPTH, "depth", "same depth and signature (TensorFlow Fold)"))
CRITICAL = register_strategy(BuiltinStrategy(
    S_CRITICAL, "critical",
    "all ready nodes of the signature whose pending nodes have the longest path still to "
    "go (critical path first); branches off the critical path wait and batch together"))
LOOKAHEAD = register_strategy(BuiltinStrategy(
    S_LOOKAHEAD, "lookahead",
    "critical path first, but a ready signature whose nodes feed the chosen one runs "
    "before it, so that the chosen batch grows (one step of lookahead)"))
COST = register_strategy(BuiltinStrategy(
    S_COST, "cost",
    "the least estimated time added: a signature none of whose pending nodes could join "
    "its ready ones runs first (critical path first among them), else the one whose "
    "extra batch costs least (engine/cost_model.pyx)"))
AGENDA = register_strategy(BuiltinStrategy(
    S_AGENDA, "agenda",
    "all ready nodes of the signature whose pending nodes have the lowest average depth (DyNet)"))
