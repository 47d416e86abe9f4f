# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Weight gradients dW += dY X^T of a backward: computed at once, or postponed to its
end (postpone_weight_grad) so that all the terms of one weight (every time step of an
RNN) are summed by one product, and weights whose terms read the same X's (the gates
of a cell) share one product (flush_weight_grads). The list lives as long as one
backward (weight_grads_start / weight_grads_free, engine/backward.pyx)."""
from libc.stdlib cimport calloc, free, malloc, qsort
from libc.string cimport memcpy

from autobatch.kernels.gemm cimport tgemm
from autobatch.kernels.packed cimport packed_weight_grad
from autobatch.runtime.memory cimport Arena, arena_alloc
from autobatch.runtime.nodes cimport WeightGrad, WeightGrads
from autobatch.runtime.profile cimport P_GATHER, Profile, prof_start, prof_stop


cdef int weight_grads_start(WeightGrads* d, int cap, bint share) noexcept nogil:
    """Room for `cap` postponed terms; -1 if memory is short."""
    d.n, d.cap, d.share, d.shared = 0, cap, share, 0
    d.items = <WeightGrad*>malloc(cap * sizeof(WeightGrad))
    return 0 if d.items != NULL else -1


cdef void weight_grads_free(WeightGrads* d) noexcept nogil:
    free(d.items)
    d.items = NULL


cdef void weight_grad_gemm(Arena* scratch, Profile* prof, int r, int k, int M,
                                  float* dY, float* X, float beta, float* dW) noexcept nogil:
    """dW (r x k) = dY (r x M) X^T (X: k x M) + beta dW: the packed kernel where it
    runs (it outruns sgemm, which packs both operands), else sgemm."""
    if not packed_weight_grad(scratch, prof, r, k, M, dY, X, beta, dW):
        tgemm(prof, b'N', b'T', r, k, M, 1.0, dY, r, X, k, beta, dW, r)


# Postponing pays when a term would stream a dW that does not stay in cache (every
# call reads and writes all of it), or when a term has so few columns that packing
# dominates; a small dW updated by wide terms stays in L2, and stacking only copies.
cdef int DEFER_MIN_WEIGHT = 131072      # elements of dW (512 KB)
cdef int DEFER_MAX_COLUMNS = 16


cdef bint postpone_weight_grad(WeightGrads* d, float* dW, float* dY, float* X, int r, int k,
                               int m) noexcept nogil:
    """Postpone dW += dY X^T (dW: r x k, dY: r x m, X: k x m) to the end of backward if
    it pays and there is room (d NULL: backward does not postpone). False: do it now."""
    if d == NULL or d.n >= d.cap or not (r * k >= DEFER_MIN_WEIGHT or m <= DEFER_MAX_COLUMNS):
        return False
    d.items[d.n] = WeightGrad(dW, dY, X, r, k, m, d.n)
    d.n += 1
    return True


cdef int cmp_weight_grad(const void* a, const void* b) noexcept nogil:
    # by weight, then in the order postponed: a weight's sum does not depend on where
    # memory happens to lie, and weights whose products ran side by side (the gates
    # of a cell) list their shared X's in one order
    cdef const WeightGrad* x = <const WeightGrad*>a
    cdef const WeightGrad* y = <const WeightGrad*>b
    if x.dW != y.dW:
        return -1 if x.dW < y.dW else 1
    return x.seq - y.seq

cdef bint same_operands(const WeightGrads* d, int i0, int i1, int j0, int j1) noexcept nogil:
    """Whether the terms [i0, i1) and [j0, j1) of two weights read the same X's."""
    cdef int e
    if i1 - i0 != j1 - j0 or d.items[i0].k != d.items[j0].k:
        return False
    for e in range(i1 - i0):
        if d.items[i0 + e].X != d.items[j0 + e].X or d.items[i0 + e].m != d.items[j0 + e].m:
            return False
    return True

cdef bint flush_shared(WeightGrads* d, const int* at, const int* group, int ng,
                       Arena* scratch, Profile* prof) noexcept nogil:
    """The weights group[0..ng) read the same X's (the gates of a cell, each W_g x with
    the same x): their dY's stacked row-wise make one product [dY_1; ..; dY_ng] X^T,
    which reads and packs X once instead of once per weight; each weight then adds its
    rows. False (nothing done) if scratch memory is short."""
    cdef int i0 = at[group[0]], i1 = at[group[0] + 1], nt = i1 - i0
    cdef int k = d.items[i0].k, R = 0, total = 0, g, e, c, row, col
    cdef WeightGrad* t
    for g in range(ng):
        R += d.items[at[group[g]]].r
    for e in range(i0, i1):
        total += d.items[e].m
    cdef float* X = d.items[i0].X if nt == 1 else arena_alloc(scratch, <size_t>k * total)
    cdef float* dY = arena_alloc(scratch, <size_t>R * total)
    cdef float* C = arena_alloc(scratch, <size_t>R * k)
    if X == NULL or dY == NULL or C == NULL:
        scratch.failed = False
        return False
    cdef double t0 = prof_start(prof)
    if nt > 1:
        stack_terms(X, &d.items[i0], nt, k, False)
    col = 0
    for e in range(nt):                 # term e: columns col .. col + m of dY, row-wise
        row = 0
        for g in range(ng):
            t = &d.items[at[group[g]] + e]
            for c in range(t.m):
                memcpy(dY + (<size_t>(col + c) * R + row), t.dY + <size_t>c * t.r,
                       t.r * sizeof(float))
            row += t.r
        col += d.items[i0 + e].m
    prof_stop(prof, P_GATHER, t0)
    weight_grad_gemm(scratch, prof, R, k, total, dY, X, 0.0, C)
    row = 0
    for g in range(ng):
        t = &d.items[at[group[g]]]
        for c in range(k):
            add_column(t.dW + <size_t>c * t.r, C + (<size_t>c * R + row), t.r)
        row += t.r
    return True

cdef void stack_terms(float* out, const WeightGrad* terms, int n, int rows,
                      bint grads) noexcept nogil:
    """The n terms' dY's (grads) or X's, of `rows` rows each, side by side in out:
    column-major blocks simply follow each other."""
    cdef int e
    cdef size_t at = 0
    for e in range(n):
        memcpy(out + at * rows, terms[e].dY if grads else terms[e].X,
               <size_t>terms[e].m * rows * sizeof(float))
        at += terms[e].m

cdef inline void add_column(float* y, const float* x, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        y[i] += x[i]

cdef void flush_weight(WeightGrads* d, int i, int j, Arena* scratch, Profile* prof) noexcept nogil:
    """The terms [i, j) of one weight: their columns stacked (column-major blocks
    simply follow each other) and summed by one gemm."""
    cdef WeightGrad* w = &d.items[i]
    cdef int e, total = 0
    cdef float* dY = NULL
    cdef float* X = NULL
    cdef double t0
    for e in range(i, j):
        total += d.items[e].m
    if j > i + 1:
        dY = arena_alloc(scratch, <size_t>w.r * total)
        X = arena_alloc(scratch, <size_t>w.k * total)
    if X == NULL or dY == NULL:     # one term, or no memory to stack them: a gemm each
        scratch.failed = False
        for e in range(i, j):
            weight_grad_gemm(scratch, prof, w.r, w.k, d.items[e].m, d.items[e].dY,
                             d.items[e].X, 1.0, w.dW)
        return
    t0 = prof_start(prof)
    stack_terms(dY, w, j - i, w.r, True)
    stack_terms(X, w, j - i, w.k, False)
    prof_stop(prof, P_GATHER, t0)
    weight_grad_gemm(scratch, prof, w.r, w.k, total, dY, X, 1.0, w.dW)

cdef void flush_weight_grads(WeightGrads* d, Arena* scratch, Profile* prof) noexcept nogil:
    """Apply the postponed dW += dY X^T: per weight, its terms summed by one gemm;
    weights whose terms read the same X's share one gemm (flush_shared)."""
    qsort(d.items, d.n, sizeof(WeightGrad), cmp_weight_grad)
    # at[0..nw]: where each weight's terms start; group: weights still to do
    cdef int* at = <int*>malloc((d.n + 1) * sizeof(int))
    cdef int* group = <int*>malloc((d.n + 1) * sizeof(int))
    cdef char* done = <char*>calloc(d.n + 1, 1)
    cdef int nw = 0, i, j, ng
    if at == NULL or group == NULL or done == NULL:
        free(at); free(group); free(done)
        scratch.failed = True
        return
    for i in range(d.n):
        if i == 0 or d.items[i].dW != d.items[i - 1].dW:
            at[nw] = i
            nw += 1
    at[nw] = d.n
    for i in range(nw):
        if done[i]:
            continue
        ng = 0
        for j in range(i, nw):
            if not done[j] and same_operands(d, at[i], at[i + 1], at[j], at[j + 1]):
                group[ng] = j
                ng += 1
                done[j] = True
        if ng > 1 and d.share and flush_shared(d, at, group, ng, scratch, prof):
            d.shared += ng
            continue
        for j in range(ng):
            flush_weight(d, at[group[j]], at[group[j] + 1], scratch, prof)
    free(at); free(group); free(done)
    d.n = 0
