# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Sparse relatives of softmax over a vector, per batch element (DyNet's
algorithms): sparsemax (Martins and Astudillo 2016), the Euclidean projection onto
the simplex, and constrained softmax (Martins and Kreutzer 2017), a softmax whose
probabilities are capped by upper bounds u."""
from libc.math cimport expf
from libc.stdlib cimport qsort

from autobatch.runtime.memory cimport arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.kernels.common cimport *


# ------------------------------------------------------------- sparsemax ----
# y = max(x - tau, 0), tau such that y sums to 1: with z = x sorted descending, the
# support is the largest k with 1 + k z_k > z_1 + ... + z_k. Backward on the support
# S (y > 0): dx_i += dy_i - mean_{j in S} dy_j.

cdef void sparsemax_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int n = rows(n0), j, e, k, i
    cdef float total, kept, tau
    cdef float* x
    cdef float* y
    cdef float* z = arena_alloc(b.scratch, n)
    if z == NULL:
        return
    for j in range(b.n):
        for e in range(n0.bs):
            x = ARG(b, j, 0).val + e * n
            y = NODE(b, j).val + e * n
            for i in range(n):
                z[i] = x[i]
            qsort(z, n, sizeof(float), descending)
            total = 0.0
            kept = 0.0
            k = 0
            while k < n:
                total += z[k]
                if 1.0 + (k + 1) * z[k] <= total:
                    break
                kept = total
                k += 1
            tau = (kept - 1.0) / k
            for i in range(n):
                y[i] = x[i] - tau if x[i] > tau else 0.0

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
