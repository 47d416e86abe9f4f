# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The 'cost' strategy: choose the next batch to minimise estimated time, not batches.

A batch of n nodes of one signature costs, in the model,

    fixed(sig) + n * per_node(sig)

fixed: the kernel call and the engine's per-batch work (choosing, logging, releasing:
`call_ns`), plus, for a product, packing its shared weight once per batch
(`weight_ns` per weight element). per_node: the arithmetic, the copies of operands
that are not contiguous, the fused stages' loops. Every schedule runs every node once,
so the per-node part is (nearly) the same whatever the strategy chooses: what a
strategy changes is how many times each signature pays its fixed part. The greedy
choice therefore weighs the batches it would add:

- a ready signature is *complete* when none of its nodes still to run could join its
  ready ones later (no pending node of it at a depth <= its shallowest ready node's:
  such a node depends on none of them; the scheduler's depth lists answer that in
  amortised O(1)); running it now adds no batch: its regret is 0;
- otherwise running it now leaves those nodes for another batch: its regret is its
  fixed cost.

The policy runs the signature of least regret; ties (every complete one) go to the
critical path ('critical': the longest average height first), so the graph's long
chains start early. When even the chosen one has regret, a ready signature feeding it
runs first (the rule of 'lookahead'), so that its batch grows. A signature whose fixed cost
is small may run early in pieces, one with a large weight waits for all its nodes.
Fused stages
cost no call (they run in their producer's pass): fusion (engine/fusion.pyx) runs them
as it finds them and they never reach the frontier.

The constants are defaults measured on the development machine by
benchmarks/calibrate_cost.py (a batch: 210 ns forward and backward; no per-batch
packing: packed weights are cached for the pass); `set_constants` replaces them
(process-wide)."""
from libc.stdint cimport int32_t, int64_t

from autobatch.runtime.nodes cimport OpDef, arg_is_shared, arg_id
from autobatch.engine.optable cimport op_table
from autobatch.engine.scheduler cimport sched_feeder, sched_pending_upto, sched_take

cdef const OpDef* OPS = op_table()

# nanoseconds: measured by benchmarks/calibrate_cost.py (docs/strategies.md)
cdef double CALL_NS = 210.0
cdef double WEIGHT_NS = 0.0

cdef int32_t ALL_DEPTHS = 2147483647


cdef double fixed_cost(const NodeView* v, int32_t first) noexcept nogil:
    """The fixed part of a batch of the signature of node `first`: the call, and the
    shared arguments (a product's weight) packed once per batch."""
    cdef const OpDef* op = &OPS[v.nodes[first].op]
    cdef double t = CALL_NS
    cdef int a
    if op.shared_arg >= 0:
        for a in range(v.nodes[first].nargs):
            if arg_is_shared(op, a):
                t += WEIGHT_NS * v.nodes[arg_id(v, first, a)].size
    return t


cdef double regret(Sched* s, const NodeView* v, int32_t g) noexcept nogil:
    """The time running g's ready nodes now adds to the schedule: 0 if no node of g
    still to run could join them later, else g's fixed cost (one more batch)."""
    cdef int32_t* lst = s.rd + s.rd_at[g]
    cdef int32_t r = s.rd_n[g], k, shallowest = s.depth[lst[0]], below = 0
    if s.left[g] == r:                     # every node of g left is ready
        return 0.0
    for k in range(r):
        if s.depth[lst[k]] < shallowest:
            shallowest = s.depth[lst[k]]
    for k in range(r):
        below += s.depth[lst[k]] <= shallowest
    # pending nodes no deeper than the shallowest ready one depend on none of them
    if sched_pending_upto(s, v, g, shallowest, below + 1) <= below:
        return 0.0
    return fixed_cost(v, lst[0])


cdef inline bint before(Sched* s, int32_t g, double rg, int32_t b, double rb) noexcept nogil:
    """Whether g (regret rg) goes before b (regret rb): less regret, then the critical
    order (longest average height, lower average depth, lower id)."""
    if rg != rb:
        return rg < rb
    if s.avg_height[g] != s.avg_height[b]:
        return s.avg_height[g] > s.avg_height[b]
    if s.avg_depth[g] != s.avg_depth[b]:
        return s.avg_depth[g] < s.avg_depth[b]
    return g < b


cdef int pick_cost(Sched* s, const NodeView* v) noexcept nogil:
    """The ready signature of least regret (see the module's docstring); when it has
    regret (no signature is complete), a ready signature feeding it runs first, as in
    'lookahead', so that its batch grows. O(ready nodes) per call."""
    cdef int64_t k
    cdef int32_t g, best = -1, feeder
    cdef double r, best_r = 0
    for k in range(s.n_active):
        g = s.active[k]
        r = regret(s, v, g)
        if best < 0 or before(s, g, r, best, best_r):
            best = g
            best_r = r
    if best_r > 0:
        feeder = sched_feeder(s, v, best)
        if feeder >= 0:
            best = feeder
    return sched_take(s, best, ALL_DEPTHS)


def constants():
    """The cost model's constants as a dict: ``call_ns`` (the fixed time of one batch:
    the kernel call and the engine's work per batch) and ``weight_ns`` (per element of
    a product's shared weight, packed once per batch), in nanoseconds."""
    return {"call_ns": CALL_NS, "weight_ns": WEIGHT_NS}


def set_constants(call_ns=None, weight_ns=None):
    """Replace the cost model's constants (process-wide; see ``constants()``), e.g. with
    the figures benchmarks/calibrate_cost.py measures on this machine. Returns the
    constants now in force."""
    global CALL_NS, WEIGHT_NS
    for value in (call_ns, weight_ns):
        if value is not None and not value >= 0:
            raise ValueError("the cost model's constants are times >= 0 (nanoseconds)")
    if call_ns is not None:
        CALL_NS = float(call_ns)
    if weight_ns is not None:
        WEIGHT_NS = float(weight_ns)
    return constants()
