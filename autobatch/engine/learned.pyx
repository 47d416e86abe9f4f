# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The learned strategy: a batching policy learned per model, as ED-Batch does.

A *kind* is a signature's op and attributes with its shared arguments named by what
they are (a trained parameter by its gradient's memory, any other node by its op)
instead of by node id, and without shapes, so that the kinds of one model are the
same in every graph. A *state* is the set of
kinds on the ready frontier; an *action* is the kind that runs next (its ready
signature of lowest average depth).

Learning (learned_begin, before a forward runs): the frontier of the graph is
replayed without running kernels (the scheduler's own take and release, and the
fusion rule's own stage test), and tabular Q-learning (reward -1 per batch, no
discount, epsilon-greedy) runs `episodes` episodes over it; every few episodes the
greedy policy is evaluated on the same graph and kept when it needs fewer batches
than the kept one. A model (the hash of the set of kinds a forward needs) learns on
its first graph, and again on a later one (up to `graphs` in all) when the replay of
the previous one met states it did not know in more than 2% of its batches.

Replay (learned_pick, once per batch): the state's hash, one probe, the kept kind; a
state never learned falls back to a built-in strategy (lookahead by default). The
state, each kind's signature and agenda's or lookahead's choice as a fallback are kept
up to date as batches are taken and released (engine/kind_frontier.pyx), not found by
a pass over the frontier."""
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy, memset

from autobatch.runtime.nodes cimport F_DONE
from autobatch.runtime.memory cimport grow, resize
from autobatch.runtime.profile cimport prof_now
from autobatch.engine.fusion cimport consumer_stage, fusion_defers
from autobatch.engine.kinds cimport mix64, find_slot, rehashed, kind_key
from autobatch.engine.kind_frontier cimport (ORDER_NONE, ORDER_DEPTH, ORDER_HEIGHT, kf_begin,
                                             kf_best, kf_first, kf_state, kf_taken,
                                             kf_checks, kf_verify)
from autobatch.engine.scheduler cimport (sched_feeder, sched_prepare, sched_push_initial,
                                         sched_release, sched_release_ids, sched_take)
from autobatch.engine.strategies cimport (S_LEARNED, S_AGENDA, S_CRITICAL, S_DEPTH,
                                          S_LOOKAHEAD, pick_batch)
from autobatch.engine.strategies import register_strategy

cdef int32_t ALL_DEPTHS = 2147483647
cdef int MAX_STAGES = 64            # as engine/fusion.pyx: stages of one fused chain
cdef int EVAL_EVERY = 5             # episodes between evaluations of the greedy policy
cdef double ALPHA = 0.4             # ED-Batch's learning rate and exploration schedule
cdef double EPS_START = 0.5
cdef double EPS_DECAY = 0.9
cdef double EPS_MIN = 0.05
cdef double RELEARN_MISSES = 0.02   # a replay that misses more states: learn again

# the heuristics whose schedules Q learns from first
cdef int N_DEMOS = 3
cdef int[3] DEMOS = [S_AGENDA, S_LOOKAHEAD, S_CRITICAL]

FALLBACKS = {"agenda": S_AGENDA, "critical": S_CRITICAL, "lookahead": S_LOOKAHEAD,
             "depth": S_DEPTH}
# what each fallback reads of the frontier besides depths: (heights, feeder lists)
FALLBACK_READS = {"agenda": (False, False), "critical": (True, False),
                  "lookahead": (True, True), "depth": (False, False)}


# ------------------------------------------------------------------ kinds ----

cdef int32_t kind_intern(LearnedStrategy st, uint64_t key) except -1:
    if 2 * (st.n_kinds + 1) > st.kind_table_size:
        st.kind_table = rehashed(st.kind_table, &st.kind_table_size, st.kind_hash, st.n_kinds)
    cdef int64_t slot = find_slot(st.kind_table, st.kind_table_size, st.kind_hash, key)
    if st.kind_table[slot] >= 0:
        return st.kind_table[slot]
    cdef int64_t k = st.n_kinds, cap = st.cap_kinds
    if k >= cap:
        st.kind_hash = <uint64_t*>grow(st.kind_hash, &cap, k + 1, sizeof(uint64_t))
        st.kind_seen = <uint64_t*>resize(st.kind_seen, cap, sizeof(uint64_t))
        st.present = <int32_t*>resize(st.present, cap, sizeof(int32_t))
        memset(st.kind_seen + st.cap_kinds, 0, (cap - st.cap_kinds) * sizeof(uint64_t))
        st.cap_kinds = cap
    st.kind_hash[k] = key
    st.n_kinds = k + 1
    st.kind_table[slot] = <int32_t>k
    return <int32_t>k


cdef uint64_t classify(LearnedStrategy st, Sched* s, const NodeView* v,
                       const SigTable* sigs) except? 0:
    """The kind of every signature of this forward into s.kind; returns the model's key:
    the hash of the set of parameters its kinds read by identity (its weights), or of
    the set of its kinds if none does."""
    s.kind = <int32_t*>grow(s.kind, &s.cap_kind, sigs.n + 1, sizeof(int32_t))
    cdef int64_t p
    cdef int32_t g, c
    cdef uint64_t all_kinds = 0, weighted_kinds = 0, weights
    st.tick += 1
    for p in range(s.n_used):
        g = s.used[p]
        weights = 0
        c = kind_intern(st, kind_key(sigs, v, g, &weights))
        s.kind[g] = c
        if st.kind_seen[c] != st.tick:
            st.kind_seen[c] = st.tick
            all_kinds += mix64(st.kind_hash[c])
            weighted_kinds += mix64(weights)
    return mix64(weighted_kinds if weighted_kinds else all_kinds) | 1


# --------------------------------------------------------- states, actions ----

cdef inline int32_t state_find(LearnedStrategy st, uint64_t key) noexcept nogil:
    return st.st_table[find_slot(st.st_table, st.st_table_size, st.st_key, key)]


cdef int32_t state_intern(LearnedStrategy st, uint64_t key) except -1:
    if 2 * (st.n_states + 1) > st.st_table_size:
        st.st_table = rehashed(st.st_table, &st.st_table_size, st.st_key, st.n_states)
    cdef int64_t slot = find_slot(st.st_table, st.st_table_size, st.st_key, key)
    if st.st_table[slot] >= 0:
        return st.st_table[slot]
    cdef int64_t i = st.n_states, cap = st.cap_states
    if i >= cap:
        st.st_key = <uint64_t*>grow(st.st_key, &cap, i + 1, sizeof(uint64_t))
        st.st_head = <int32_t*>resize(st.st_head, cap, sizeof(int32_t))
        st.st_best = <int32_t*>resize(st.st_best, cap, sizeof(int32_t))
        st.st_best_q = <double*>resize(st.st_best_q, cap, sizeof(double))
        st.st_pol = <int32_t*>resize(st.st_pol, cap, sizeof(int32_t))
        st.cap_states = cap
    st.st_key[i] = key
    st.st_head[i] = st.st_best[i] = st.st_pol[i] = -1
    st.st_best_q[i] = 0
    st.n_states = i + 1
    st.st_table[slot] = <int32_t>i
    return <int32_t>i


cdef int update_q(LearnedStrategy st, int32_t si, int32_t kind, double target) except -1:
    """Q(si, kind) moves towards target (a new entry starts there); the state's greedy
    kind and value are recomputed (ties: the lower kind id)."""
    cdef int32_t e = st.st_head[si], best = -1
    while e >= 0 and st.ac_kind[e] != kind:
        e = st.ac_next[e]
    cdef int64_t cap
    if e < 0:
        e = <int32_t>st.n_actions
        cap = st.cap_actions
        if e >= cap:
            st.ac_kind = <int32_t*>grow(st.ac_kind, &cap, e + 1, sizeof(int32_t))
            st.ac_next = <int32_t*>resize(st.ac_next, cap, sizeof(int32_t))
            st.ac_q = <double*>resize(st.ac_q, cap, sizeof(double))
            st.cap_actions = cap
        st.ac_kind[e] = kind
        st.ac_q[e] = target
        st.ac_next[e] = st.st_head[si]
        st.st_head[si] = e
        st.n_actions += 1
    else:
        st.ac_q[e] += ALPHA * (target - st.ac_q[e])
    e = st.st_head[si]
    while e >= 0:
        if best < 0 or st.ac_q[e] > st.st_best_q[si] or \
                (st.ac_q[e] == st.st_best_q[si] and st.ac_kind[e] < best):
            best = st.ac_kind[e]
            st.st_best_q[si] = st.ac_q[e]
        e = st.ac_next[e]
    st.st_best[si] = best
    return 0


# ---------------------------------------------------------------- episodes ----

cdef inline double uniform(LearnedStrategy st) noexcept nogil:
    st.rng += <uint64_t>0x9E3779B97F4A7C15
    return (mix64(st.rng) >> 11) * (1.0 / 9007199254740992.0)


cdef int32_t explore(LearnedStrategy st, Sched* s) noexcept nogil:
    """A kind on the frontier drawn at random (the kinds listed in the order of their
    first ready signature in s.active)."""
    cdef int64_t k, n = 0
    cdef int32_t c
    st.tick += 1
    for k in range(s.n_active):
        c = s.kind[s.active[k]]
        if st.kind_seen[c] != st.tick:
            st.kind_seen[c] = st.tick
            st.present[n] = c
            n += 1
    return st.present[<int64_t>(uniform(st) * n)]


cdef int take(LearnedStrategy st, Sched* s, const NodeView* v, const SigTable* sigs,
              int32_t chosen, int32_t* kind) except -1:
    """Run kind `chosen` if it is on the frontier (kf_state counted it), else the
    fallback's choice; its kind in kind[0]; returns the batch's size."""
    cdef int n
    cdef int32_t g
    if kf_checks():
        kf_verify(s, st.kind_hash)
    if chosen >= 0 and s.kf.ready[chosen] > 0:
        g = kf_best(s, chosen)
        n = sched_take(s, g, ALL_DEPTHS)
    else:
        n = fallback_take(st, s, v, sigs)
        g = v.nodes[s.picked[0]].sig
    kf_taken(s, g, st.kind_hash)
    kind[0] = s.kind[g]
    return n


cdef int fallback_take(LearnedStrategy st, Sched* s, const NodeView* v,
                       const SigTable* sigs) except -1:
    """The fallback's batch. agenda's and lookahead's choices come from the frontier's
    kept heap in their order (the same signature as their pass over the frontier finds)
    when it is kept in that order, others' from their pass."""
    cdef int32_t g, feeder
    if st.fallback_sid == S_AGENDA and s.kf.order == ORDER_DEPTH:
        return sched_take(s, kf_first(s), ALL_DEPTHS)
    if st.fallback_sid == S_LOOKAHEAD and s.kf.order == ORDER_HEIGHT:
        g = kf_first(s)                     # critical_sig's choice, then its feeder first
        feeder = sched_feeder(s, v, g)
        return sched_take(s, g if feeder < 0 else feeder, ALL_DEPTHS)
    return pick_batch(st.fallback_sid, None, s, v, sigs)


cdef int64_t simulate_fusion(LearnedStrategy st, Sched* s, const NodeView* v, int n) except -1:
    """The stages that engine/fusion.pyx would run after the batch s.picked[0..n), by its
    own test, into st.stage, marked done as running them would. Returns how many."""
    cdef int64_t nst = 0
    cdef const int32_t* prev = s.picked
    cdef int32_t* out
    cdef int j
    st.stage = <int32_t*>grow(st.stage, &st.cap_stage, <int64_t>n * MAX_STAGES, sizeof(int32_t))
    while nst < MAX_STAGES:
        out = st.stage + nst * n
        if consumer_stage(s, v, prev, n, out) < 0:
            break
        for j in range(n):
            v.nodes[out[j]].flags |= F_DONE
        prev = out
        nst += 1
    return nst


cdef inline int fallback_order(LearnedStrategy st) noexcept:
    """The order in which the frontier keeps its signatures for the fallback."""
    if st.fallback_sid == S_AGENDA:
        return ORDER_DEPTH
    return ORDER_HEIGHT if st.fallback_sid == S_LOOKAHEAD else ORDER_NONE


cdef int restart(LearnedStrategy st, Sched* s, const NodeView* v, const SigTable* sigs,
                 int64_t count) except -1:
    """The frontier of the forward's start again. A new stamp: sched_prepare takes a
    signature already stamped for a signature it has already prepared. Heights and
    feeders for the heuristics that demonstrate; depth lists when fusion defers, so
    that the simulated stages are the forward's."""
    s.stamp += 1
    sched_prepare(s, v, sigs.n, count, True, True, fusion_defers())
    sched_push_initial(s, v, count)
    kf_begin(s, st.n_kinds, fallback_order(st))
    return 0


cdef int64_t episode(LearnedStrategy st, Sched* s, const NodeView* v, const SigTable* sigs,
                     int64_t count, bint fusion, double eps, bint greedy_q, bint learn,
                     bint heuristic=False) except -1:
    """One pass over the frontier without running kernels; returns its steps (picks; its
    batches, fused stages included, in st.ep_batches). eps:
    exploration; greedy_q: follow the Q table's greedy kinds (else the kept policy);
    heuristic: follow the fallback strategy only;
    learn: update Q along the trajectory afterwards (backwards, so each step's target
    uses the next state's updated value). Nodes are marked done as they would run (the
    strategies and the fusion test read it) and unmarked at the end: every node a
    forward needs is not done when it starts."""
    cdef int64_t t, k
    restart(st, s, v, sigs, count)
    try:
        t = walk(st, s, v, sigs, count, fusion, eps, greedy_q, heuristic)
    finally:
        for k in range(count):
            v.nodes[s.needed[k]].flags &= ~F_DONE
    cdef double next_value = 0
    st.ep_batches = 0
    for k in range(t):
        st.ep_batches += st.tr_cost[k]
    if learn:
        for k in range(t - 1, -1, -1):
            update_q(st, st.tr_state[k], st.tr_kind[k], next_value - st.tr_cost[k])
            next_value = st.st_best_q[st.tr_state[k]]
    st.episodes_run += 1
    return t


cdef int64_t walk(LearnedStrategy st, Sched* s, const NodeView* v, const SigTable* sigs,
                  int64_t count, bint fusion, double eps, bint greedy_q,
                  bint heuristic) except -1:
    """The batches of one episode, their states and kinds in st.tr_state, st.tr_kind."""
    cdef int64_t remaining = count, t = 0, nst, k
    cdef int32_t si, chosen, kind
    cdef int n, j
    while remaining > 0:
        si = state_intern(st, kf_state(s, st.kind_hash))
        if eps > 0 and uniform(st) < eps:
            chosen = explore(st, s)
        elif heuristic:
            chosen = -1
        else:
            chosen = st.st_best[si] if greedy_q else st.st_pol[si]
        n = take(st, s, v, sigs, chosen, &kind)
        st.tr_state[t] = si
        st.tr_kind[t] = kind
        t += 1
        for j in range(n):
            v.nodes[s.picked[j]].flags |= F_DONE
        nst = simulate_fusion(st, s, v, n) if fusion else 0
        st.tr_cost[t - 1] = <int32_t>(1 + nst)
        sched_release(s, v, n)
        for k in range(nst):
            sched_release_ids(s, v, st.stage + k * n, n)
        remaining -= n * (1 + nst)
    return t


# policy entries besides kinds: not known; known, the fallback chooses
cdef int32_t UNKNOWN = -1, FALL_BACK = -2


cdef int64_t replay(LearnedStrategy st, Sched* s, const NodeView* v, const SigTable* sigs,
                    int64_t count, bint fusion) except -1:
    """The replay policy's schedule of this graph, as a forward would run it; the states
    it met without an entry are marked known (their choice: the fallback's), so that the
    forward runs exactly this schedule. Returns its batches."""
    cdef int64_t t = episode(st, s, v, sigs, count, fusion, 0, False, False), k
    for k in range(t):
        if st.st_pol[st.tr_state[k]] == UNKNOWN:
            st.st_pol[st.tr_state[k]] = FALL_BACK
    return st.ep_batches


cdef int64_t consider(LearnedStrategy st, Sched* s, const NodeView* v, const SigTable* sigs,
                      int64_t count, bint fusion, int64_t t, int64_t best) except -1:
    """The episode just run (t steps) as the replay policy: kept if the replay needs
    fewer batches than `best` (a state, a set of kinds, may come twice in an episode
    with two actions; the replay keeps the last, so it may not reproduce the episode).
    Returns the kept replay's batches."""
    cdef int64_t n = st.n_states, k, found
    cdef int32_t* saved = <int32_t*>resize(NULL, n + 1, sizeof(int32_t))
    memcpy(saved, st.st_pol, n * sizeof(int32_t))
    try:
        for k in range(t):
            st.st_pol[st.tr_state[k]] = st.tr_kind[k]
        found = replay(st, s, v, sigs, count, fusion)
        if found < best:
            return found
        memcpy(st.st_pol, saved, n * sizeof(int32_t))
        for k in range(n, st.n_states):
            st.st_pol[k] = -1
        return best
    finally:
        free(saved)


cdef int learn_graph(LearnedStrategy st, Sched* s, const NodeView* v, const SigTable* sigs,
                     int64_t count, bint fusion) except -1:
    """Q-learning on this graph's frontier. Q first learns from the schedules of the
    kept policy and of the built-in heuristics (demonstrations), then from
    epsilon-greedy episodes; each of these heuristics' schedules and every few episodes
    the greedy policy is tried as the replay policy, kept when its replay needs fewer
    batches on this graph."""
    cdef int64_t best, found
    cdef int e, k, own = st.fallback_sid
    cdef double eps = EPS_START
    st.tr_state = <int32_t*>grow(st.tr_state, &st.cap_tr, count + 1, sizeof(int32_t))
    st.tr_kind = <int32_t*>resize(st.tr_kind, st.cap_tr, sizeof(int32_t))
    st.tr_cost = <int32_t*>resize(st.tr_cost, st.cap_tr, sizeof(int32_t))
    best = replay(st, s, v, sigs, count, fusion)
    for k in range(N_DEMOS):
        st.fallback_sid = DEMOS[k]
        try:
            found = episode(st, s, v, sigs, count, fusion, 0, True, True, True)
        finally:
            st.fallback_sid = own
        best = consider(st, s, v, sigs, count, fusion, found, best)
    for e in range(st.episodes):
        episode(st, s, v, sigs, count, fusion, eps, True, True)
        eps = max(EPS_MIN, eps * EPS_DECAY)
        if (e + 1) % EVAL_EVERY == 0 or e + 1 == st.episodes:
            found = episode(st, s, v, sigs, count, fusion, 0, True, False)
            best = consider(st, s, v, sigs, count, fusion, found, best)
    st.last_planned = best
    restart(st, s, v, sigs, count)              # the real run starts afresh
    return 0


# ------------------------------------------------------------ forward hooks ----

cdef int32_t model_intern(LearnedStrategy st, uint64_t key) except -1:
    if 2 * (st.n_models + 1) > st.md_table_size:
        st.md_table = rehashed(st.md_table, &st.md_table_size, st.md_key, st.n_models)
    cdef int64_t slot = find_slot(st.md_table, st.md_table_size, st.md_key, key)
    if st.md_table[slot] >= 0:
        return st.md_table[slot]
    cdef int64_t i = st.n_models, cap = st.cap_models
    if i >= cap:
        st.md_key = <uint64_t*>grow(st.md_key, &cap, i + 1, sizeof(uint64_t))
        st.md_graphs = <int32_t*>resize(st.md_graphs, cap, sizeof(int32_t))
        st.md_miss = <double*>resize(st.md_miss, cap, sizeof(double))
        st.md_fallback = <double*>resize(st.md_fallback, cap, sizeof(double))
        st.cap_models = cap
    st.md_key[i] = key
    st.md_graphs[i] = 0
    st.md_miss[i] = 0
    st.md_fallback[i] = 0
    st.n_models = i + 1
    st.md_table[slot] = <int32_t>i
    return <int32_t>i


cdef int learned_begin(LearnedStrategy st, Sched* s, const NodeView* v, const SigTable* sigs,
                       int64_t count, bint fusion) except -1:
    """At the start of a forward (the frontier prepared with what the fallback reads):
    the kinds of its signatures, and learning when its model asks for it."""
    cdef double t0 = prof_now()
    cdef int32_t m = model_intern(st, classify(st, s, v, sigs))
    kf_begin(s, st.n_kinds, fallback_order(st))
    s.learn_model = m
    s.learn_picks = s.learn_misses = s.learn_fallbacks = 0
    if st.md_graphs[m] == 0 or (st.md_graphs[m] < st.graphs and st.md_miss[m] > RELEARN_MISSES):
        learn_graph(st, s, v, sigs, count, fusion)
        st.md_graphs[m] += 1
        st.graphs_learned += 1
        st.seconds_learning += prof_now() - t0
    return 0


cdef int learned_pick(LearnedStrategy st, Sched* s, const NodeView* v,
                      const SigTable* sigs) except -1:
    """The next batch: the kept policy's kind for the frontier's state, or the
    fallback's choice for a state it does not know."""
    cdef int32_t si = state_find(st, kf_state(s, st.kind_hash)), kind
    cdef int32_t chosen = st.st_pol[si] if si >= 0 else UNKNOWN
    s.learn_picks += 1
    if chosen < 0 or s.kf.ready[chosen] == 0:
        s.learn_fallbacks += 1
        if chosen != FALL_BACK:             # unknown state, or its kind not ready
            s.learn_misses += 1
    return take(st, s, v, sigs, chosen, &kind)


cdef void learned_end(LearnedStrategy st, Sched* s) noexcept:
    """After a forward: how often its model's policy did not know the state, and how
    often the fallback chose."""
    if s.learn_picks > 0 and s.learn_model < st.n_models:
        st.md_miss[s.learn_model] = <double>s.learn_misses / s.learn_picks
        st.md_fallback[s.learn_model] = <double>s.learn_fallbacks / s.learn_picks


include "learned_api.pxi"
