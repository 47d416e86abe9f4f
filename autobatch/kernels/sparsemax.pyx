# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Sparse relatives of softmax over a vector, per batch element (DyNet's
algorithms): sparsemax (Martins and Astudillo 2016), the Euclidean projection onto
the simplex, and constrained softmax (Martins and Kreutzer 2017), a softmax whose
probabilities are capped by upper bounds u."""
from libc.math cimport NAN, expf, isfinite, isnan
from libc.stdlib cimport qsort

from autobatch.runtime.memory cimport arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.kernels.common cimport *


# ------------------------------------------------------------- sparsemax ----
# y = max(x - tau, 0), tau such that y sums to 1: with z = x sorted descending, the
# support is the largest k with 1 + k z_k > z_1 + ... + z_k. Computed on x - max(x),
# which moves tau with x and changes nothing else: on x as it is, entries above about
# 2^24 absorb the 1 of that test and every output came out 0 ([1e10, 0, 0] gave
# [0, 0, 0]; DyNet's gives inf). Shifted, z_1 = 0 is always in the support, so the
# largest entry gets at least 1/k and the mass stays 1. Sums in double.
# No projection exists for an input with NaN or +inf (or only -inf): the whole output
# is NaN, as DyNet's forward gives for NaN, and so is the gradient backward gives its
# input (DyNet's is 0, which hides the NaN). -inf entries get 0, as in the limit.
# Backward on the support S (y > 0): dx_i += dy_i - mean_{j in S} dy_j.

cdef double simplex_threshold(float* z, int n) noexcept nogil:
    """tau for z of maximum 0 (sorted in place): at least one entry is above it."""
    qsort(z, n, sizeof(float), descending)
    cdef double total = 0.0, kept = 0.0
    cdef int k = 0
    while k < n:
        total += z[k]
        if 1.0 + (k + 1) * <double>z[k] <= total:
            break
        kept = total
        k += 1
    return (kept - 1.0) / k

cdef void sparsemax_column(const float* x, float* y, float* z, int n) noexcept nogil:
    cdef int i
    cdef float top = x[0]
    cdef bint nan = False
    cdef double tau, d
    for i in range(n):
        if isnan(x[i]):
            nan = True
        elif x[i] > top:
            top = x[i]
    if nan or not isfinite(top):
        for i in range(n):
            y[i] = NAN
        return
    for i in range(n):
        z[i] = x[i] - top
    tau = simplex_threshold(z, n)
    for i in range(n):
        d = <double>(x[i] - top) - tau
        y[i] = <float>d if d > 0.0 else 0.0

cdef void sparsemax_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int n = rows(n0), j, e
    cdef float* z = arena_alloc(b.scratch, n)
    if z == NULL:
        return
    for j in range(b.n):
        for e in range(n0.bs):
            sparsemax_column(ARG(b, j, 0).val + e * n, NODE(b, j).val + e * n, z, n)

cdef void sparsemax_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int n = rows(n0), j, e, i, size
    cdef float mean
    cdef float* y
    cdef float* dy
    cdef float* dx
    for j in range(b.n):
        for e in range(n0.bs):
            y = NODE(b, j).val + e * n
            dy = NODE(b, j).grad + e * n
            dx = ARG(b, j, 0).grad + e * n
            if isnan(y[0]):                   # forward had no projection: all of y is NaN
                for i in range(n):
                    dx[i] += NAN
                continue
            mean = 0.0
            size = 0
            for i in range(n):
                if y[i] > 0.0:
                    mean += dy[i]
                    size += 1
            mean /= size
            for i in range(n):
                if y[i] > 0.0:
                    dx[i] += dy[i] - mean


# --------------------------------------------------- constrained_softmax ----
# p = softmax(x) rescaled to the mass the capped entries leave, entries above their
# bound u capped, repeated until none is above: p_i = u_i on the capped set C, else
# p_i = exp(x_i) (1 - sum_C u) / sum_{not C} exp(x). aux keeps, per batch element,
# the flags of the free (not capped) entries as 0/1 and the capped mass.

cdef void csoftmax_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int n = rows(n0), j, e, i
    cdef float top, mass, total
    cdef bint found
    cdef float* x
    cdef float* u
    cdef float* p
    cdef float* free_
    cdef float* q = arena_alloc(b.scratch, n)
    if q == NULL:
        return
    for j in range(b.n):
        NODE(b, j).aux = arena_alloc(b.arena, <size_t>(n + 1) * n0.bs)
        if NODE(b, j).aux == NULL:
            return
        for e in range(n0.bs):
            x = ARG(b, j, 0).val + (0 if ARG(b, j, 0).bs == 1 else e * n)
            u = ARG(b, j, 1).val + (0 if ARG(b, j, 1).bs == 1 else e * n)
            p = NODE(b, j).val + e * n
            free_ = NODE(b, j).aux + e * (n + 1)
            top = fmax_of(x, n)
            for i in range(n):
                q[i] = expf(x[i] - top)
                free_[i] = 1.0
            mass = 0.0
            found = True
            while found:
                total = 0.0
                for i in range(n):
                    if free_[i] != 0.0:
                        total += q[i]
                found = False
                for i in range(n):
                    if free_[i] != 0.0:
                        p[i] = q[i] * (1.0 - mass) / total
                # the capping pass reads the new p of every free entry, as DyNet's
                for i in range(n):
                    if free_[i] != 0.0 and p[i] > u[i]:
                        p[i] = u[i]
                        mass += u[i]
                        free_[i] = 0.0
                        found = True
            free_[n] = mass

cdef void csoftmax_bwd(Batch* b) noexcept nogil:
    # free i: dx_i += p_i (dy_i - dhat); capped i: du_i += dy_i - dhat, with
    # dhat = sum_{free} p_j dy_j / (1 - capped mass)
    cdef Node* n0 = NODE(b, 0)
    cdef int n = rows(n0), j, e, i
    cdef bint want_x = batch_arg_needs_grad(b, 0), want_u = batch_arg_needs_grad(b, 1)
    cdef float dhat
    cdef float* p
    cdef float* dy
    cdef float* free_
    cdef float* dx
    cdef float* du
    for j in range(b.n):
        for e in range(n0.bs):
            p = NODE(b, j).val + e * n
            dy = NODE(b, j).grad + e * n
            free_ = NODE(b, j).aux + e * (n + 1)
            dx = ARG(b, j, 0).grad + (0 if ARG(b, j, 0).bs == 1 else e * n)
            du = ARG(b, j, 1).grad + (0 if ARG(b, j, 1).bs == 1 else e * n)
            dhat = 0.0
            for i in range(n):
                if free_[i] != 0.0:
                    dhat += p[i] * dy[i]
            dhat /= 1.0 - free_[n]
            for i in range(n):
                if free_[i] != 0.0:
                    if want_x:
                        dx[i] += p[i] * (dy[i] - dhat)
                elif want_u:
                    du[i] += dy[i] - dhat
