# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The ready frontier by kind, for the learned strategy (engine/learned.pyx).

Its state is the set of kinds with a ready signature and its action a kind, run as
that kind's ready signature of lowest average depth (then lowest id); in a state it
does not know, its fallback chooses among all ready signatures. All three are kept up
to date instead of found by a pass over the ready signatures at every pick: the
scheduler's list of active signatures only grows at its end as batches are released
(make_ready appends) and loses at most the signature a take emptied (it moves the last
one into its place), so after kf_taken the signatures active[seen:] are the ones that
became ready since, and kf_state counts them. Heaps of active signatures, per kind by
average depth and one of all of them in the fallback's order (agenda's: average
depth; lookahead's: critical's average height first), give the choices: their keys
are fixed for a forward; an entry of a signature that is no longer active is dropped
when it comes to the top, and one that became active again is valid again. A pick
costs the signatures that became ready since the last one, times a logarithm, where a
pass over the frontier costs all of them."""
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memset

from autobatch.runtime.memory cimport grow, resize
from autobatch.engine.kinds cimport mix64


cdef int kf_begin(Sched* s, int64_t n_kinds, int order) except -1:
    """An empty frontier for this forward (s.kind set for the signatures in s.used; none
    active yet or all of them to count): per kind, room for a heap of its signatures;
    a heap of all of them in `order` (ORDER_NONE: none kept)."""
    cdef KindFrontier* f = &s.kf
    cdef int64_t p, cap = f.cap_kinds
    cdef int32_t acc = 0, c, g
    if n_kinds + 1 > cap:
        f.ready = <int32_t*>grow(f.ready, &cap, n_kinds + 1, sizeof(int32_t))
        f.heap_at = <int32_t*>resize(f.heap_at, cap, sizeof(int32_t))
        f.heap_n = <int32_t*>resize(f.heap_n, cap, sizeof(int32_t))
        f.cap_kinds = cap
    f.heap = <int32_t*>grow(f.heap, &f.cap_heap, s.n_used + 1, sizeof(int32_t))
    f.in_heap = <char*>grow(f.in_heap, &f.cap_in_heap, s.cap_sigs, sizeof(char))
    f.top = <int32_t*>grow(f.top, &f.cap_top, s.n_used + 1, sizeof(int32_t))
    f.in_top = <char*>grow(f.in_top, &f.cap_in_top, s.cap_sigs, sizeof(char))
    f.n_kinds = n_kinds
    f.order = order
    memset(f.ready, 0, n_kinds * sizeof(int32_t))
    memset(f.heap_n, 0, n_kinds * sizeof(int32_t))
    for p in range(s.n_used):               # heap_n counts the kind's signatures first
        g = s.used[p]
        f.heap_n[s.kind[g]] += 1
        f.in_heap[g] = 0
        f.in_top[g] = 0
    for c in range(n_kinds):
        f.heap_at[c] = acc
        acc += f.heap_n[c]
        f.heap_n[c] = 0
    f.top_n = 0
    f.seen = 0
    f.sum = 0
    f.present = 0
    return 0


cdef inline bint before(const Sched* s, int order, int32_t a, int32_t b) noexcept nogil:
    """Whether signature a comes before b: ORDER_DEPTH, by average depth (agenda's
    order; within a kind, the action's); ORDER_HEIGHT, by average height, the highest
    first, then by depth (critical_sig's order, which lookahead starts from); then by id."""
    if order == ORDER_HEIGHT and s.avg_height[a] != s.avg_height[b]:
        return s.avg_height[a] > s.avg_height[b]
    return s.avg_depth[a] < s.avg_depth[b] or (s.avg_depth[a] == s.avg_depth[b] and a < b)


cdef void heap_push(const Sched* s, int order, int32_t* h, int32_t* n, int32_t g) noexcept nogil:
    cdef int32_t k = n[0], up
    n[0] = k + 1
    while k > 0:
        up = (k - 1) >> 1
        if not before(s, order, g, h[up]):
            break
        h[k] = h[up]
        k = up
    h[k] = g


cdef void heap_pop(const Sched* s, int order, int32_t* h, int32_t* n) noexcept nogil:
    cdef int32_t size = n[0] - 1, k = 0, child
    cdef int32_t last = h[size]
    n[0] = size
    while True:
        child = 2 * k + 1
        if child >= size:
            break
        if child + 1 < size and before(s, order, h[child + 1], h[child]):
            child += 1
        if not before(s, order, h[child], last):
            break
        h[k] = h[child]
        k = child
    if size > 0:
        h[k] = last


cdef inline int32_t first_active(const Sched* s, int order, int32_t* h, int32_t* n,
                                 char* in_heap) noexcept nogil:
    """The heap's first signature that is active (one is), stale entries dropped."""
    while s.active_pos[h[0]] < 0:           # run since it was pushed
        in_heap[h[0]] = 0
        heap_pop(s, order, h, n)
    return h[0]


cdef uint64_t kf_state(Sched* s, const uint64_t* kind_hash) noexcept nogil:
    """Counts the signatures that became active since the last call, and returns the
    hash of the set of kinds with an active signature."""
    cdef KindFrontier* f = &s.kf
    cdef int64_t p
    cdef int32_t g, c
    for p in range(f.seen, s.n_active):
        g = s.active[p]
        c = s.kind[g]
        if f.ready[c] == 0:
            f.sum += mix64(kind_hash[c])
            f.present += 1
        f.ready[c] += 1
        if not f.in_heap[g]:
            f.in_heap[g] = 1
            heap_push(s, ORDER_DEPTH, f.heap + f.heap_at[c], f.heap_n + c, g)
        if f.order != ORDER_NONE and not f.in_top[g]:
            f.in_top[g] = 1
            heap_push(s, f.order, f.top, &f.top_n, g)
    f.seen = s.n_active
    return mix64(f.sum ^ <uint64_t>f.present)


cdef int32_t kf_best(Sched* s, int32_t kind) noexcept nogil:
    """The active signature of `kind` of lowest average depth, then lowest id (the kind
    has one: s.kf.ready[kind] > 0, counted by kf_state)."""
    return first_active(s, ORDER_DEPTH, s.kf.heap + s.kf.heap_at[kind], s.kf.heap_n + kind,
                        s.kf.in_heap)


cdef int32_t kf_first(Sched* s) noexcept nogil:
    """The first active signature in the order kf_begin was given (not ORDER_NONE; after
    kf_state, with one active): agenda's choice, or critical_sig's."""
    return first_active(s, s.kf.order, s.kf.top, &s.kf.top_n, s.kf.in_top)


cdef void kf_taken(Sched* s, int32_t sig, const uint64_t* kind_hash) noexcept nogil:
    """After a take of signature sig (nothing released since kf_state): if the take
    emptied it, its kind has one active signature fewer."""
    cdef KindFrontier* f = &s.kf
    cdef int32_t c
    if s.active_pos[sig] < 0:
        c = s.kind[sig]
        f.ready[c] -= 1
        if f.ready[c] == 0:
            f.sum -= mix64(kind_hash[c])
            f.present -= 1
    f.seen = s.n_active


# ------------------------------------------------------------- test checks ----

# Checks (off by default, for tests): at every pick, the kept state is compared with
# one found by a pass over the active signatures.
cdef bint CHECKS = False
cdef int64_t CHECKED = 0


def set_checks(on):
    """Compare the kept frontier with a pass over the ready signatures at every pick of
    the learned strategy, raising AssertionError where they differ (for tests). Returns
    the previous setting."""
    global CHECKS
    old = CHECKS
    CHECKS = bool(on)
    return old


def checks_done():
    """How many picks were checked since the module was loaded."""
    return CHECKED


cdef bint kf_checks() noexcept nogil:
    return CHECKS


cdef int kf_verify(Sched* s, const uint64_t* kind_hash) except -1:
    """The kept counts, hash and choices against a pass over s.active (right after
    kf_state)."""
    cdef KindFrontier* f = &s.kf
    cdef int32_t* count = <int32_t*>resize(NULL, f.n_kinds + 1, sizeof(int32_t))
    cdef int32_t* best = <int32_t*>resize(NULL, f.n_kinds + 1, sizeof(int32_t))
    cdef int64_t k, present = 0
    cdef int32_t g, c, first = -1
    cdef uint64_t total = 0
    global CHECKED
    CHECKED += 1
    try:
        memset(count, 0, f.n_kinds * sizeof(int32_t))
        for k in range(s.n_active):
            g = s.active[k]
            c = s.kind[g]
            if count[c] == 0 or before(s, ORDER_DEPTH, g, best[c]):
                best[c] = g
            if count[c] == 0:
                present += 1
                total += mix64(kind_hash[c])
            count[c] += 1
            if f.order != ORDER_NONE and (first < 0 or before(s, f.order, g, first)):
                first = g
        if f.seen != s.n_active or present != f.present or total != f.sum:
            raise AssertionError(f"kept frontier: {f.present} kinds, {f.seen} signatures "
                                 f"counted; a pass: {present}, {s.n_active}")
        for c in range(f.n_kinds):
            if count[c] != f.ready[c] or (count[c] and kf_best(s, c) != best[c]):
                raise AssertionError(f"kind {c}: kept {f.ready[c]} active signatures, "
                                     f"a pass {count[c]} (its first: {best[c]})")
        if first >= 0 and kf_first(s) != first:
            raise AssertionError(f"the fallback's first: kept {kf_first(s)}, a pass {first}")
    finally:
        free(count)
        free(best)
    return 0
