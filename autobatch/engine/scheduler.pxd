# The ready frontier: which uncomputed nodes a forward needs, their dependencies, and
# per signature the nodes that are ready. Strategies (engine/strategies.pyx) choose from it.
from libc.stdint cimport int32_t, int64_t, uint64_t
from autobatch.runtime.nodes cimport NodeView

# the learned strategy's frontier by kind (engine/kind_frontier.pyx): kept up to date as
# batches are taken and released, so that a pick does not rescan the ready signatures
ctypedef struct KindFrontier:
    int64_t n_kinds
    int32_t* ready          # per kind: how many of its signatures are active
    int32_t* heap_at        # per kind: a heap of its active signatures by (average
    int32_t* heap_n         #   depth, id) in heap[heap_at : + heap_n]; may hold stale ones
    int64_t cap_kinds
    int32_t* heap
    int64_t cap_heap
    char* in_heap           # per signature: it has an entry in its kind's heap
    int64_t cap_in_heap
    int64_t seen            # the signatures active[0 : seen) are counted
    uint64_t sum            # the sum of mix64(kind hash) over the kinds with one active
    int64_t present         # the kinds with an active signature
    # the fallback's choice: every active signature in one heap by the fallback's order
    # (agenda's or critical's, or none kept), stale entries as in the kinds' heaps
    int order
    int32_t* top
    int64_t cap_top
    int32_t top_n
    char* in_top            # per signature
    int64_t cap_in_top

ctypedef struct Sched:
    # per node (indexed by node id; grown with the graph)
    int32_t* mark           # == stamp: visited by the current walk
    int32_t* depth          # 1 + the deepest uncomputed argument
    int32_t* height         # longest path to a needed node nobody needed consumes
    int32_t* indeg          # arguments not computed yet
    int32_t* loc            # position in `needed`
    int64_t* lkey           # the layout pass's order key (engine/layout.pyx), set by
    bint layout             # sched_prepare when `layout` is on
    int32_t* lbuf           # the layout pass's room to reorder a batch
    int64_t cap_lbuf
    int64_t cap_nodes
    int32_t stamp
    # the needed nodes in id (= topological) order, and their consumers (CSR)
    int32_t* needed
    int64_t cap_needed
    int32_t* cons_at
    int64_t cap_cons
    int32_t* cons
    int64_t cap_edges
    # per signature: its ready nodes rd[rd_at[s] : rd_at[s] + rd_n[s]], and the mean
    # depth and height of its pending nodes (ready or not)
    int32_t* rd_at
    int32_t* rd_n
    double* avg_depth
    double* avg_height
    int64_t cap_sigs
    int32_t* rd
    int64_t cap_rd
    # signatures with ready nodes, and where each is in that list (-1: none)
    int32_t* active
    int32_t* active_pos
    int64_t n_active
    # signatures of this forward's needed nodes (sig_stamp == stamp), listed in `used`
    int32_t* sig_stamp
    int32_t* used
    int64_t n_used
    # the batch being run
    int32_t* picked
    int64_t cap_picked
    # feeder lists (when prepared with feeders): per signature g, the ready nodes of
    # other signatures that have a consumer of signature g, fd[fd_at[g] : + fd_n[g]],
    # pushed when they become ready; entries of nodes already run are stale (dropped
    # by whoever reads the list)
    bint feeders
    int32_t* fd_at
    int32_t* fd_n
    int32_t* fd
    int64_t cap_fd
    int32_t* fuse           # the next stage of a fused chain (engine/fusion.pyx)
    int64_t cap_fuse
    # depth lists (when prepared with them): per signature g its needed nodes by
    # ascending depth, dl[rd_at[g] : rd_at[g] + tot[g]], the first dl_lo[g] of them
    # run already; left[g]: its nodes not run yet. Read by fusion's deferral and by
    # the 'cost' strategy (which pending nodes could still join a batch)
    bint depth_lists
    int32_t* tot
    int32_t* left
    int32_t* dl_lo
    int32_t* dl
    int64_t cap_dl
    int32_t* dcount
    int64_t cap_dcount
    # the learned strategy's state of this graph (engine/learned.pyx): each signature's
    # kind, the model of the current forward, its picks, those in states the policy did
    # not know, and those its fallback chose
    int32_t* kind
    int64_t cap_kind
    int64_t learn_model, learn_picks, learn_misses, learn_fallbacks
    KindFrontier kf

cdef int64_t sched_collect(Sched* s, const NodeView* v, int32_t target, bint all_ancestors) except -1
cdef int64_t sched_collect_many(Sched* s, const NodeView* v, const int32_t* targets,
                                int64_t n_targets, bint all_ancestors) except -1
cdef int sched_prepare(Sched* s, const NodeView* v, int64_t n_sigs, int64_t count,
                       bint heights, bint feeders, bint depth_lists) except -1
cdef void sched_push_initial(Sched* s, const NodeView* v, int64_t count) noexcept nogil
cdef int sched_take(Sched* s, int32_t sig, int32_t max_depth) noexcept nogil
cdef int sched_take_chosen(Sched* s, int32_t sig, const char* chosen) noexcept nogil
cdef void sched_release(Sched* s, const NodeView* v, int n) noexcept nogil
cdef void sched_release_ids(Sched* s, const NodeView* v, const int32_t* ids, int n) noexcept nogil
cdef int32_t sched_feeder(Sched* s, const NodeView* v, int32_t g) noexcept nogil
cdef int32_t sched_pending_upto(Sched* s, const NodeView* v, int32_t g, int32_t max_depth,
                                int32_t limit) noexcept nogil
cdef void sched_free(Sched* s) noexcept nogil
