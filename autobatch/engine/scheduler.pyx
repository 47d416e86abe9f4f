# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The ready frontier of a forward pass.

sched_collect lists the nodes a value needs; sched_prepare computes depths, in-degrees,
consumer lists and per-signature ready lists; then a strategy repeatedly picks a
signature, sched_take moves its ready nodes to `picked` (one batch), and after the
batch ran sched_release makes their consumers ready."""
from libc.stdint cimport int32_t
from libc.stdlib cimport free, qsort
from libc.string cimport memset

from autobatch.runtime.nodes cimport Node, OpDef, F_DONE, arg_is_stacked_operand
from autobatch.engine.optable cimport op_table
from autobatch.runtime.memory cimport grow, next_capacity, resize
from autobatch.runtime.nodes cimport arg_id


cdef const OpDef* OPS = op_table()


cdef int cmp_int32(const void* a, const void* b) noexcept nogil:
    return (<int32_t*>a)[0] - (<int32_t*>b)[0]


cdef int ensure_nodes(Sched* s, int64_t n) except -1:
    """Per-node arrays for n nodes; new marks are zero (never the current stamp)."""
    if s.cap_nodes >= n:
        return 0
    cdef int64_t cap = next_capacity(s.cap_nodes, n)
    s.mark = <int32_t*>resize(s.mark, cap, sizeof(int32_t))
    memset(s.mark + s.cap_nodes, 0, (cap - s.cap_nodes) * sizeof(int32_t))
    s.depth = <int32_t*>resize(s.depth, cap, sizeof(int32_t))
    s.height = <int32_t*>resize(s.height, cap, sizeof(int32_t))
    s.indeg = <int32_t*>resize(s.indeg, cap, sizeof(int32_t))
    s.loc = <int32_t*>resize(s.loc, cap, sizeof(int32_t))
    s.lkey = <int64_t*>resize(s.lkey, cap, sizeof(int64_t))
    s.cap_nodes = cap
    return 0


cdef int64_t sched_collect(Sched* s, const NodeView* v, int32_t target, bint all_ancestors) except -1:
    """List in `needed` the ancestors of target (target included) that are not
    computed yet, or all of them; in id (= topological) order unless all_ancestors.
    Cost is the size of that part only, so a parser calling value() at every step
    stays linear."""
    return sched_collect_many(s, v, &target, 1, all_ancestors)


cdef int64_t sched_collect_many(Sched* s, const NodeView* v, const int32_t* targets,
                                int64_t n_targets, bint all_ancestors) except -1:
    """sched_collect for the ancestors of several targets at once (dy.forward of a
    list: one forward, so their nodes batch together)."""
    ensure_nodes(s, v.n)
    s.needed = <int32_t*>grow(s.needed, &s.cap_needed, v.n, sizeof(int32_t))
    s.stamp += 1
    cdef int64_t count = collect_by_scan(s, v, targets, n_targets, all_ancestors)
    if count >= 0:
        return count
    s.stamp += 1                            # the scan gave up: start again, breadth-first
    return collect_by_search(s, v, targets, n_targets, all_ancestors)


cdef inline bint wanted(const NodeView* v, int32_t x, bint all_ancestors) noexcept nogil:
    return all_ancestors or not (v.nodes[x].flags & F_DONE)


cdef int64_t collect_by_scan(Sched* s, const NodeView* v, const int32_t* targets,
                             int64_t n_targets, bint all_ancestors) noexcept nogil:
    """The needed nodes by one pass down the ids from the last target: an argument's id
    is below its node's, so a marked node is final when the pass reaches it. Reads
    memory in order (a whole-graph forward: nearly every id is needed); gives up (-1)
    when the marked ids turn sparse (a parser's step below the graph's untouched
    rest), which the search handles in the size of the part needed."""
    cdef int32_t st = s.stamp, top = targets[0], i, y
    cdef int64_t p, count = 0, pending = 0, seen = 0
    cdef int a
    for p in range(n_targets):
        if targets[p] > top:
            top = targets[p]
        if s.mark[targets[p]] != st:
            s.mark[targets[p]] = st
            pending += 1
    i = top
    while pending > 0:
        if s.mark[i] == st:
            pending -= 1
            seen += 1
            if wanted(v, i, all_ancestors):
                s.needed[count] = i
                count += 1
                for a in range(v.nodes[i].nargs):
                    y = arg_id(v, i, a)
                    if s.mark[y] != st:
                        s.mark[y] = st
                        pending += 1
            else:
                s.mark[i] = 0               # computed: not needed, and not followed
        elif top - i > 8 * seen + 256:
            return -1
        i -= 1
    for p in range(count // 2):             # descending -> ascending ids
        i = s.needed[p]
        s.needed[p] = s.needed[count - 1 - p]
        s.needed[count - 1 - p] = i
    return count


cdef int64_t collect_by_search(Sched* s, const NodeView* v, const int32_t* targets,
                               int64_t n_targets, bint all_ancestors) noexcept nogil:
    """The needed nodes breadth-first (`needed` is the queue), in id order unless
    all_ancestors: cost in the size of the part needed."""
    cdef int32_t st = s.stamp
    cdef int64_t head = 0, count = 0
    cdef int a
    cdef int32_t x, y
    for head in range(n_targets):
        x = targets[head]
        if s.mark[x] != st and wanted(v, x, all_ancestors):
            s.mark[x] = st
            s.needed[count] = x
            count += 1
    head = 0
    while head < count:
        x = s.needed[head]
        head += 1
        for a in range(v.nodes[x].nargs):
            y = arg_id(v, x, a)
            if s.mark[y] != st and wanted(v, y, all_ancestors):
                s.mark[y] = st
                s.needed[count] = y
                count += 1
    if not all_ancestors:
        qsort(s.needed, count, sizeof(int32_t), cmp_int32)
    return count


cdef int sched_prepare(Sched* s, const NodeView* v, int64_t n_sigs, int64_t count,
                       bint heights, bint feeders, bint depth_lists) except -1:
    """Depths, in-degrees, consumer lists and per-signature ready lists of the
    `count` needed nodes; heights, feeder lists and depth lists too when a strategy
    (or fusion's deferral) reads them; with s.layout, every node's first reader that
    stacks it (the key of engine/layout.pyx; a node has a smaller id than its readers,
    so the smallest reader writes first)."""
    cdef int64_t p, q, edges = 0, g
    cdef int a
    cdef int32_t i, y, d, acc, c
    cdef const Node* n
    s.cons_at = <int32_t*>grow(s.cons_at, &s.cap_cons, count + 1, sizeof(int32_t))
    for p in range(count):
        s.loc[s.needed[p]] = <int32_t>p
        s.cons_at[p] = 0
    s.cons_at[count] = 0
    for p in range(count):                  # depth, in-degree, consumer counts
        i = s.needed[p]
        n = &v.nodes[i]
        d = 0
        s.indeg[i] = 0
        if s.layout:
            s.lkey[i] = i
        for a in range(n.nargs):
            y = arg_id(v, i, a)
            if not (v.nodes[y].flags & F_DONE):
                s.indeg[i] += 1
                s.cons_at[s.loc[y]] += 1
                edges += 1
                if s.depth[y] > d:
                    d = s.depth[y]
                if s.layout and s.lkey[y] >> 32 == 0 and arg_is_stacked_operand(&OPS[n.op], a):
                    s.lkey[y] = (<int64_t>(n.sig + 1) << 32) | i   # its first reader
        s.depth[i] = d + 1
    acc = 0                                 # counts -> start offsets (fill cursors)
    for p in range(count):
        c = s.cons_at[p]
        s.cons_at[p] = acc
        acc += c
    s.cons_at[count] = acc
    s.cons = <int32_t*>grow(s.cons, &s.cap_edges, edges + 1, sizeof(int32_t))
    for p in range(count):
        i = s.needed[p]
        n = &v.nodes[i]
        for a in range(n.nargs):
            y = arg_id(v, i, a)
            if not (v.nodes[y].flags & F_DONE):
                q = s.loc[y]
                s.cons[s.cons_at[q]] = i
                s.cons_at[q] += 1
    for p in range(count, 0, -1):           # cursors end at the next start: shift back
        s.cons_at[p] = s.cons_at[p - 1]
    s.cons_at[0] = 0
    ensure_sigs(s, n_sigs, count)
    if heights:                             # reverse topological order
        for p in range(count - 1, -1, -1):
            d = 0
            for q in range(s.cons_at[p], s.cons_at[p + 1]):
                if s.height[s.cons[q]] + 1 > d:
                    d = s.height[s.cons[q]] + 1
            s.height[s.needed[p]] = d
    s.feeders = feeders
    if feeders:
        s.fd = <int32_t*>grow(s.fd, &s.cap_fd, edges + 1, sizeof(int32_t))
    prepare_signatures(s, v, count, heights)
    s.depth_lists = depth_lists
    if depth_lists:
        prepare_depth_lists(s, v, count)
    return 0


cdef int prepare_depth_lists(Sched* s, const NodeView* v, int64_t count) except -1:
    """Per signature, its needed nodes by ascending depth (a counting sort by depth,
    then a stable scatter into the signatures' segments, which are those of the ready
    lists): O(count + deepest)."""
    cdef int64_t p, g, deepest = 0
    cdef int32_t i, d, acc, c
    for p in range(count):
        if s.depth[s.needed[p]] > deepest:
            deepest = s.depth[s.needed[p]]
    s.dcount = <int32_t*>grow(s.dcount, &s.cap_dcount, deepest + 2, sizeof(int32_t))
    s.dl = <int32_t*>grow(s.dl, &s.cap_dl, 2 * count + 1, sizeof(int32_t))
    cdef int32_t* by_depth = s.dl + count          # scratch: the nodes in depth order
    memset(s.dcount, 0, (deepest + 2) * sizeof(int32_t))
    for p in range(count):
        s.dcount[s.depth[s.needed[p]]] += 1
    acc = 0
    for d in range(deepest + 1):
        c = s.dcount[d]
        s.dcount[d] = acc
        acc += c
    for p in range(count):
        i = s.needed[p]
        by_depth[s.dcount[s.depth[i]]] = i
        s.dcount[s.depth[i]] += 1
    for p in range(s.n_used):
        g = s.used[p]
        s.tot[g] = 0
        s.dl_lo[g] = 0
    for p in range(count):
        i = by_depth[p]
        g = v.nodes[i].sig
        s.dl[s.rd_at[g] + s.tot[g]] = i
        s.tot[g] += 1
    for p in range(s.n_used):
        g = s.used[p]
        s.left[g] = s.tot[g]
    return 0


cdef int32_t sched_feeder(Sched* s, const NodeView* v, int32_t g) noexcept nogil:
    """The signature of the latest ready node that feeds a node of signature g (feeder
    lists only), or -1: running it first lets g's batch grow. Stale entries (nodes run
    already) are dropped on the way."""
    cdef int32_t* lst = s.fd + s.fd_at[g]
    cdef int32_t top
    while s.fd_n[g] > 0:
        top = lst[s.fd_n[g] - 1]
        if not (v.nodes[top].flags & F_DONE):
            return v.nodes[top].sig
        s.fd_n[g] -= 1
    return -1


cdef int32_t sched_pending_upto(Sched* s, const NodeView* v, int32_t g, int32_t max_depth,
                                int32_t limit) noexcept nogil:
    """How many nodes of signature g not run yet have depth <= max_depth, counted up
    to `limit` (depth lists only). Nodes of one depth never depend on each other, so
    these are the nodes that may still share a batch with g's ready ones. Amortised:
    the run prefix of the list is skipped once."""
    cdef int32_t* lst = s.dl + s.rd_at[g]
    cdef int32_t p = s.dl_lo[g], end = s.tot[g], n = 0
    while p < end and v.nodes[lst[p]].flags & F_DONE:
        p += 1
    s.dl_lo[g] = p
    while p < end and n < limit and s.depth[lst[p]] <= max_depth:
        if not (v.nodes[lst[p]].flags & F_DONE):
            n += 1
        p += 1
    return n


cdef void prepare_signatures(Sched* s, const NodeView* v, int64_t count, bint heights) noexcept nogil:
    """Per signature of the needed nodes (not per signature of the graph: a parser that
    reads a value at every step stays linear): where its ready list starts, and the
    mean depth and height of its nodes; no signature is active yet. With feeder lists:
    where each signature's list starts in fd, with room for every edge into its nodes
    (the in-degrees: the lists of all signatures fill at most `edges` slots)."""
    cdef int64_t p, g
    cdef int32_t acc
    for p in range(s.n_active):             # a forward stopped by an error leaves some
        s.active_pos[s.active[p]] = -1
    s.n_active = 0
    s.n_used = 0
    for p in range(count):
        g = v.nodes[s.needed[p]].sig
        if s.sig_stamp[g] != s.stamp:
            s.sig_stamp[g] = s.stamp
            s.used[s.n_used] = <int32_t>g
            s.n_used += 1
            s.rd_n[g] = 0
            s.avg_depth[g] = 0
            s.avg_height[g] = 0
            s.fd_n[g] = 0
        s.rd_n[g] += 1
        s.fd_n[g] += s.indeg[s.needed[p]]
        s.avg_depth[g] += s.depth[s.needed[p]]
        if heights:
            s.avg_height[g] += s.height[s.needed[p]]
    acc = 0
    cdef int32_t facc = 0
    for p in range(s.n_used):
        g = s.used[p]
        s.rd_at[g] = acc
        acc += s.rd_n[g]
        s.avg_depth[g] /= s.rd_n[g]
        s.avg_height[g] /= s.rd_n[g]
        s.rd_n[g] = 0
        s.fd_at[g] = facc
        facc += s.fd_n[g]
        s.fd_n[g] = 0


cdef int ensure_sigs(Sched* s, int64_t n_sigs, int64_t count) except -1:
    cdef int64_t cap, g
    if n_sigs + 1 > s.cap_sigs:
        cap = next_capacity(s.cap_sigs, n_sigs + 1)
        s.rd_at = <int32_t*>resize(s.rd_at, cap, sizeof(int32_t))
        s.rd_n = <int32_t*>resize(s.rd_n, cap, sizeof(int32_t))
        s.avg_depth = <double*>resize(s.avg_depth, cap, sizeof(double))
        s.avg_height = <double*>resize(s.avg_height, cap, sizeof(double))
        s.fd_at = <int32_t*>resize(s.fd_at, cap, sizeof(int32_t))
        s.fd_n = <int32_t*>resize(s.fd_n, cap, sizeof(int32_t))
        s.tot = <int32_t*>resize(s.tot, cap, sizeof(int32_t))
        s.left = <int32_t*>resize(s.left, cap, sizeof(int32_t))
        s.dl_lo = <int32_t*>resize(s.dl_lo, cap, sizeof(int32_t))
        s.active = <int32_t*>resize(s.active, cap, sizeof(int32_t))
        s.active_pos = <int32_t*>resize(s.active_pos, cap, sizeof(int32_t))
        s.sig_stamp = <int32_t*>resize(s.sig_stamp, cap, sizeof(int32_t))
        s.used = <int32_t*>resize(s.used, cap, sizeof(int32_t))
        for g in range(s.cap_sigs, cap):    # new signatures: not active, not used yet
            s.active_pos[g] = -1
            s.sig_stamp[g] = 0
        s.cap_sigs = cap
    s.rd = <int32_t*>grow(s.rd, &s.cap_rd, count + 1, sizeof(int32_t))
    s.picked = <int32_t*>grow(s.picked, &s.cap_picked, count + 1, sizeof(int32_t))
    s.fuse = <int32_t*>grow(s.fuse, &s.cap_fuse, count + 1, sizeof(int32_t))
    return 0


cdef inline void make_ready(Sched* s, const NodeView* v, int32_t i) noexcept nogil:
    if v.nodes[i].flags & F_DONE:           # already run, fused into its argument's batch
        return
    cdef int32_t g = v.nodes[i].sig
    s.rd[s.rd_at[g] + s.rd_n[g]] = i
    s.rd_n[g] += 1
    if s.active_pos[g] < 0:
        s.active_pos[g] = <int32_t>s.n_active
        s.active[s.n_active] = g
        s.n_active += 1
    if s.feeders:
        push_feeder(s, v, i, g)


cdef void push_feeder(Sched* s, const NodeView* v, int32_t i, int32_t g) noexcept nogil:
    """The ready node i (signature g) feeds the signatures of its consumers."""
    cdef int32_t p = s.loc[i], q, c
    for q in range(s.cons_at[p], s.cons_at[p + 1]):
        c = v.nodes[s.cons[q]].sig
        if c != g:
            s.fd[s.fd_at[c] + s.fd_n[c]] = i
            s.fd_n[c] += 1


cdef inline void deactivate(Sched* s, int32_t g) noexcept nogil:
    cdef int32_t p = s.active_pos[g]
    cdef int32_t last = s.active[s.n_active - 1]
    s.active[p] = last
    s.active_pos[last] = p
    s.active_pos[g] = -1
    s.n_active -= 1


cdef void sched_push_initial(Sched* s, const NodeView* v, int64_t count) noexcept nogil:
    cdef int64_t p
    for p in range(count):
        if s.indeg[s.needed[p]] == 0:
            make_ready(s, v, s.needed[p])


cdef int sched_take(Sched* s, int32_t sig, int32_t max_depth) noexcept nogil:
    """Move the ready nodes of signature sig with depth <= max_depth to `picked`, in
    id order; returns how many."""
    cdef int32_t* lst = s.rd + s.rd_at[sig]
    cdef int k, n = 0, keep = 0
    for k in range(s.rd_n[sig]):
        if s.depth[lst[k]] <= max_depth:
            s.picked[n] = lst[k]
            n += 1
        else:
            lst[keep] = lst[k]
            keep += 1
    return finish_take(s, sig, keep, n)


cdef int sched_take_chosen(Sched* s, int32_t sig, const char* chosen) noexcept nogil:
    """Move the ready nodes of signature sig whose flag in `chosen` (indexed by
    position in the ready list) is set to `picked`."""
    cdef int32_t* lst = s.rd + s.rd_at[sig]
    cdef int k, n = 0, keep = 0
    for k in range(s.rd_n[sig]):
        if chosen[k]:
            s.picked[n] = lst[k]
            n += 1
        else:
            lst[keep] = lst[k]
            keep += 1
    return finish_take(s, sig, keep, n)


cdef inline int finish_take(Sched* s, int32_t sig, int keep, int n) noexcept nogil:
    s.rd_n[sig] = keep
    if keep == 0:
        deactivate(s, sig)
    qsort(s.picked, n, sizeof(int32_t), cmp_int32)
    return n


cdef void sched_release(Sched* s, const NodeView* v, int n) noexcept nogil:
    """The picked nodes are computed: their consumers may become ready."""
    sched_release_ids(s, v, s.picked, n)


cdef void sched_release_ids(Sched* s, const NodeView* v, const int32_t* ids, int n) noexcept nogil:
    """Nodes ids[0..n) are computed: their consumers may become ready."""
    cdef int j
    cdef int32_t p, c, k
    for j in range(n):
        p = s.loc[ids[j]]
        for k in range(s.cons_at[p], s.cons_at[p + 1]):
            c = s.cons[k]
            s.indeg[c] -= 1
            if s.indeg[c] == 0:
                make_ready(s, v, c)
        if s.depth_lists:
            s.left[v.nodes[ids[j]].sig] -= 1


cdef void sched_free(Sched* s) noexcept nogil:
    free(s.mark); free(s.depth); free(s.height); free(s.indeg); free(s.loc); free(s.lkey); free(s.lbuf)
    free(s.needed); free(s.cons_at); free(s.cons)
    free(s.rd_at); free(s.rd_n); free(s.avg_depth); free(s.avg_height); free(s.rd)
    free(s.active); free(s.active_pos); free(s.picked); free(s.fuse); free(s.sig_stamp); free(s.used)
    free(s.fd_at); free(s.fd_n); free(s.fd); free(s.kind)
    free(s.kf.ready); free(s.kf.heap_at); free(s.kf.heap_n); free(s.kf.heap); free(s.kf.in_heap)
    free(s.kf.top); free(s.kf.in_top)
    free(s.tot); free(s.left); free(s.dl_lo); free(s.dl); free(s.dcount)
    memset(s, 0, sizeof(Sched))
