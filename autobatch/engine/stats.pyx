# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Statistics and debug views of a graph (the graph's stats(), batches(),
print_batches(), print_graphviz() and batch_lower_bound() call these)."""
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from autobatch.runtime.nodes cimport Node, OpDef, F_DONE
from autobatch.engine.optable cimport op_table
from autobatch.runtime.profile cimport Profile, Traffic, P_KERNEL, P_GEMM, P_GATHER, P_MEMORY
from autobatch.runtime.nodes cimport arg_id
from autobatch.engine.fusion cimport may_be_stage

cdef const OpDef* OPS = op_table()

cdef bint _profiling_on = False


def set_profiling(on=True):
    """Turn the profile timers on (or off) for the graphs renewed from now on.

    With profiling on, `cg().stats()["profile"]` splits the time of the graph's
    forward and backward passes into BLAS products (`gemm`), operand copies
    (`gather`: stacking arguments that are not contiguous, stacking output gradients,
    adding stacked gradients back), the other kernels (`kernels`: elementwise,
    softmax, lookups, reductions, conv2d ...), backward's gradient memory (`memory`),
    choosing batches (`schedule`) and the rest of the engine's forward and backward
    (`engine`: batch bookkeeping, the backward's walk); `build` is the time between
    passes (the user's Python code recording nodes: shapes, signatures). The parts add
    up to build + schedule + forward + backward of `stats()["seconds"]`. The timers
    read the clock twice per batch and per copy; off (the default) they cost one
    pointer test per batch. Counts are per graph, so threads do not mix them."""
    global _profiling_on
    _profiling_on = bool(on)


def profiling():
    """Whether graphs renewed now get profile timers (see set_profiling)."""
    return bool(_profiling_on)


cdef bint profiling_enabled() noexcept:
    return _profiling_on


cdef dict profile_stats(const Profile* p, double t_build, double t_schedule,
                        double t_forward, double t_backward):
    """stats()["profile"]: the profile split (set_profiling) in seconds."""
    kernels = p.seconds[P_KERNEL] - p.seconds[P_GEMM] - p.seconds[P_GATHER]
    return {
        "gemm": p.seconds[P_GEMM], "gather": p.seconds[P_GATHER], "kernels": kernels,
        "memory": p.seconds[P_MEMORY],
        "engine": t_forward + t_backward - p.seconds[P_KERNEL] - p.seconds[P_MEMORY],
        "schedule": t_schedule, "build": t_build,
        "kernel_calls": int(p.calls[P_KERNEL]), "gemm_calls": int(p.calls[P_GEMM]),
        "gather_calls": int(p.calls[P_GATHER]),
    }


cdef dict operand_stats(const Traffic* t):
    """stats()["operands"]: the products' stacked operands used in place (already
    contiguous and in order in memory), read from a copy made for an earlier product
    of this forward (reused) or copied; their gradients written in place or scattered."""
    return {"in_place": int(t.in_place), "reused": int(t.reused), "copied": int(t.copied),
            "copied_floats": int(t.copied_floats), "grads_in_place": int(t.grads_in_place),
            "grads_scattered": int(t.grads_scattered)}


cdef inline str op_name(const NodeView* v, int32_t i):
    return OPS[v.nodes[i].op].name.decode()


cdef inline tuple dims_of(const Node* n):
    return tuple(n.d[a] for a in range(n.nd))


cdef dict batch_stats(const NodeView* v, const BatchLog* log, const SigTable* sigs,
                      bint unbatched_strategy):
    """Nodes, batches, the batch-size histogram per op, and the nodes that ran alone
    and why."""
    hist = {}
    unbatched = {}
    cdef int64_t bi, nodes_run = 0, chained = 0
    cdef int32_t first, n, s
    for bi in range(log.n):
        chained += log.chained[bi]
        first = log.ids[log.at[bi]]
        n = log.count[bi]
        nodes_run += n
        name = op_name(v, first)
        h = hist.setdefault(name, {})
        h[n] = h.get(n, 0) + 1
        if n == 1:
            s = v.nodes[first].sig
            if sigs.count[s] == 1:
                why = "no other node has its signature"
            elif unbatched_strategy:
                why = "strategy 'none' runs every node alone"
            else:
                why = "no other node with its signature was ready"
            u = unbatched.setdefault(name, {})
            u[why] = u.get(why, 0) + 1
    return {
        "nodes": int(v.n),
        "nodes_run": int(nodes_run),
        "batches": int(log.n),
        "passes": int(log.n - chained),
        "signatures": int(sigs.n),
        "batch_sizes": hist,
        "unbatched": unbatched,
        "unbatched_nodes": sum(sum(c.values()) for c in unbatched.values()),
    }


cdef dict fusion_stats(const NodeView* v, const BatchLog* log):
    """The fused chains that ran (engine/fusion.pyx): how many, how many of their stages
    (batches) and nodes ran fused, and per pattern ("matmul>add>logistic": the
    producer batch's op, then the stages' ops) the number of chains."""
    patterns = {}
    cdef int64_t bi = 0, k, chains = 0, stages = 0, nodes = 0
    while bi < log.n:
        k = bi + 1
        while k < log.n and log.chained[k]:
            k += 1
        if k > bi + 1:
            chains += 1
            stages += k - bi - 1
            nodes += (k - bi - 1) * log.count[bi]
            name = ">".join(op_name(v, log.ids[log.at[b]]) for b in range(bi, k))
            patterns[name] = patterns.get(name, 0) + 1
        bi = k
    return {"chains": int(chains), "batches": int(stages), "nodes": int(nodes),
            "patterns": patterns}


cdef list batch_list(const NodeView* v, const BatchLog* log):
    """The batches in execution order: (op name, [node ids])."""
    out = []
    cdef int64_t bi, j
    for bi in range(log.n):
        ids = [log.ids[log.at[bi] + j] for j in range(log.count[bi])]
        out.append((op_name(v, ids[0]), ids))
    return out


cdef print_batch_list(const NodeView* v, const BatchLog* log, object file):
    cdef int64_t bi, j
    cdef int32_t first, n
    for bi in range(log.n):
        first = log.ids[log.at[bi]]
        n = log.count[bi]
        ids = [log.ids[log.at[bi] + j] for j in range(min(n, 8))]
        more = "" if n <= 8 else f" ... (+{n - 8})"
        print(f"#{bi:<5d} {op_name(v, first):<22s} x{n:<4d} sig={v.nodes[first].sig:<5d} "
              f"shape={dims_of(&v.nodes[first])}x{v.nodes[first].bs} nodes={ids}{more}", file=file)


cdef tuple lower_bound(const NodeView* v, const SigTable* sigs, bint passes):
    """For each signature, the most nodes of that signature on one dependency path
    (they can never share a batch); their sum bounds any strategy's batch count.
    Only computed nodes count (the part of the graph that ran). With `passes`, nodes that may run as a fused stage (fusion.may_be_stage) count 0:
    the sum bounds the passes (batches that are not a fused stage).
    Returns (total, {signature: bound})."""
    cdef int64_t i
    cdef int32_t s, best, length
    cdef int a
    cdef int32_t* longest = <int32_t*>malloc((v.n + 1) * sizeof(int32_t))
    cdef char* counts = <char*>malloc(v.n + 1)
    if longest == NULL or counts == NULL:
        free(longest)
        free(counts)
        raise MemoryError()
    for i in range(v.n):
        # only what ran: a node no forward needed is not part of any schedule
        counts[i] = v.nodes[i].sig >= 0 and (v.nodes[i].flags & F_DONE) != 0 and \
            not (passes and may_be_stage(v, <int32_t>i))
    bounds = {}
    try:
        for s in range(sigs.n):
            best = 0
            for i in range(v.n):             # ids are a topological order
                length = 0
                for a in range(v.nodes[i].nargs):
                    if longest[arg_id(v, <int32_t>i, a)] > length:
                        length = longest[arg_id(v, <int32_t>i, a)]
                if v.nodes[i].sig == s and counts[i]:
                    length += 1
                longest[i] = length
                if length > best:
                    best = length
            bounds[s] = best
    finally:
        free(longest)
        free(counts)
    return sum(bounds.values()), bounds


cdef print_graphviz(const NodeView* v, object out):
    """The graph in Graphviz's dot language, as DyNet's print_graphviz: a line
    "vI = op(vJ, ...) shape" per node and an edge per argument."""
    out.write("digraph G {\n  rankdir=LR;\n  nodesep=.05;\n")
    cdef int64_t i
    cdef const Node* n
    for i in range(v.n):
        n = &v.nodes[i]
        args = [arg_id(v, <int32_t>i, a) for a in range(n.nargs)]
        shape = str(dims_of(n)) + (f"x{n.bs}" if n.bs > 1 else "")
        out.write(f'  N{i} [label="v{i} = {op_name(v, <int32_t>i)}('
                  f'{", ".join(f"v{a}" for a in args)}) {shape}"];\n')
        for a in args:
            out.write(f"  N{a} -> N{i};\n")
    out.write("}\n")
