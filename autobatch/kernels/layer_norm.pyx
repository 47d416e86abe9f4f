# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""layer_norm(x, g, b) = g * (x - mu) / (sigma + 1e-8) + b over all the elements of each
batch element of x, mu their mean and sigma their (population) standard deviation:
DyNet's composite of mean_elems, std_elems, cdiv and cmult as one node. Arguments with
one batch element are shared by all of the output's."""
from libc.math cimport sqrt

from autobatch.runtime.memory cimport arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.kernels.common cimport *

cdef float LN_EPS = 1e-8        # DyNet's: sigma + 1e-8


cdef void layer_norm_fwd(Batch* b) noexcept nogil:
    # aux keeps, per batch element, the mean and sigma + eps for backward
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(n0), j, k, i
    cdef double mu, var
    cdef float s
    cdef float* x
    cdef float* g
    cdef float* bias
    cdef float* y
    cdef float* stats
    for j in range(b.n):
        stats = arena_alloc(b.arena, 2 * <size_t>n0.bs)
        if stats == NULL:
            return
        NODE(b, j).aux = stats
        for k in range(n0.bs):
            x = elem_val(ARG(b, j, 0), k)
            g = elem_val(ARG(b, j, 1), k)
            bias = elem_val(ARG(b, j, 2), k)
            y = NODE(b, j).val + k * m
            mu = 0
            for i in range(m):
                mu += x[i]
            mu /= m
            var = 0
            for i in range(m):
                var += (x[i] - mu) * (x[i] - mu)
            s = <float>sqrt(var / m) + LN_EPS
            stats[2 * k] = <float>mu
            stats[2 * k + 1] = s
            for i in range(m):
                y[i] = g[i] * ((x[i] - <float>mu) / s) + bias[i]


cdef void layer_norm_bwd(Batch* b) noexcept nogil:
    # With u = x - mu, s = sigma + eps and dh = dy * g (the gradient of (x - mu) / s):
    # d/du_i = dh_i / s - u_i (sum_l dh_l u_l) / (m sigma s^2), then dx = d/du minus its
    # mean (mu's share); dg += dy (x - mu) / s; db += dy.
    cdef Node* n0 = NODE(b, 0)
    cdef int m = elems(n0), j, k, i
    cdef bint want_x = batch_arg_needs_grad(b, 0)
    cdef bint want_g = batch_arg_needs_grad(b, 1)
    cdef bint want_b = batch_arg_needs_grad(b, 2)
    cdef double dot, mean_du, c
    cdef float mu, s, sigma, du
    cdef float* x
    cdef float* g
    cdef float* dy
    for j in range(b.n):
        for k in range(n0.bs):
            x = elem_val(ARG(b, j, 0), k)
            g = elem_val(ARG(b, j, 1), k)
            dy = NODE(b, j).grad + k * m
            mu = NODE(b, j).aux[2 * k]
            s = NODE(b, j).aux[2 * k + 1]
            if want_g and ARG(b, j, 1).flags & F_NEEDS_GRAD:
                for i in range(m):
                    elem_grad(ARG(b, j, 1), k)[i] += dy[i] * ((x[i] - mu) / s)
            if want_b and ARG(b, j, 2).flags & F_NEEDS_GRAD:
                for i in range(m):
                    elem_grad(ARG(b, j, 2), k)[i] += dy[i]
            if not (want_x and ARG(b, j, 0).flags & F_NEEDS_GRAD):
                continue
            sigma = s - LN_EPS
            dot = 0
            for i in range(m):
                dot += dy[i] * g[i] * (x[i] - mu)
            # sigma 0: every u_i is 0 and the term vanishes (the composite gives NaN)
            c = dot / (m * sigma * s * s) if sigma > 0 else 0.0
            mean_du = 0
            for i in range(m):
                mean_du += dy[i] * g[i] / s - (x[i] - mu) * c
            mean_du /= m
            for i in range(m):
                du = dy[i] * g[i] / s - <float>((x[i] - mu) * c)
                elem_grad(ARG(b, j, 0), k)[i] += du - <float>mean_du
