# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Filters along the columns (the positions) of a matrix: kmh_ngram (sums of n
consecutive columns) and filter1d_narrow (narrow 1-d correlation with filters of
several columns); circular convolution and correlation of vectors. Per batch
element; an argument with a batch of 1 repeats over the others'. The sizes (n, the
filter's width) follow from the shapes, which are part of the signature."""

from autobatch.runtime.nodes cimport *
from autobatch.runtime.op_ids cimport OP_CIRC_CONV
from autobatch.kernels.common cimport *


# ------------------------------------------------------------ kmh_ngram ----
# Y[:, c] = X[:, c] + ... + X[:, c + n - 1]; X (R, C), Y (R, C - n + 1)

cdef void kmh_ngram_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int R = rows(n0), OC = cols(n0), N = cols(ARG(b, 0, 0)) - OC + 1
    cdef int j, e, c, t, r
    cdef float* x
    cdef float* y
    for j in range(b.n):
        for e in range(n0.bs):
            x = elem_val(ARG(b, j, 0), e)
            y = NODE(b, j).val + e * R * OC
            for c in range(OC):
                for r in range(R):
                    y[c * R + r] = x[c * R + r]
                for t in range(1, N):
                    for r in range(R):
                        y[c * R + r] += x[(c + t) * R + r]

cdef void kmh_ngram_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef Node* n0 = NODE(b, 0)
    cdef int R = rows(n0), OC = cols(n0), N = cols(ARG(b, 0, 0)) - OC + 1
    cdef int j, e, c, t, r
    cdef float* dx
    cdef float* dy
    for j in range(b.n):
        for e in range(n0.bs):
            dx = elem_grad(ARG(b, j, 0), e)
            dy = NODE(b, j).grad + e * R * OC
            for c in range(OC):
                for t in range(N):
                    for r in range(R):
                        dx[(c + t) * R + r] += dy[c * R + r]


# ------------------------------------------------------- filter1d_narrow ----
# X (R, C), filters F (R, W, NF) (or (R, W): NF = 1); Y (NF, C - W + 1):
# Y[f, c] = sum_{r, w} X[r, c + w] F[r, w, f]. Columns c .. c + W - 1 of X are R * W
# consecutive floats, so Y[:, c] = F^T x_c is one gemv with F as an (R W, NF) matrix.

cdef void filter1d_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef Node* f0 = ARG(b, 0, 1)
    cdef int NF = rows(n0), OC = cols(n0), R = rows(f0), RW = R * f0.d[1], j, e, c
    for j in range(b.n):
        for e in range(n0.bs):
            for c in range(OC):
                gemv(b'T', RW, NF, 1.0, elem_val(ARG(b, j, 1), e), elem_val(ARG(b, j, 0), e) + c * R,
                     0.0, NODE(b, j).val + e * NF * OC + c * NF)

cdef void filter1d_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef Node* f0 = ARG(b, 0, 1)
    cdef int NF = rows(n0), OC = cols(n0), R = rows(f0), RW = R * f0.d[1], j, e, c
    cdef bint want_x = batch_arg_needs_grad(b, 0), want_f = batch_arg_needs_grad(b, 1)
    cdef float* dy
    for j in range(b.n):
        for e in range(n0.bs):
            for c in range(OC):
                dy = NODE(b, j).grad + e * NF * OC + c * NF
                if want_x:          # dx_c += F dy_c
                    gemv(b'N', RW, NF, 1.0, elem_val(ARG(b, j, 1), e), dy, 1.0,
                         elem_grad(ARG(b, j, 0), e) + c * R)
                if want_f:          # dF += x_c dy_c^T
                    ger(RW, NF, 1.0, elem_val(ARG(b, j, 0), e) + c * R, dy, elem_grad(ARG(b, j, 1), e))


# ------------------------------------------------- circ_conv, circ_corr ----
# conv: y_k = sum_i u_i v_{(k - i) mod n};   corr: y_k = sum_i u_i v_{(i + k) mod n}
# Both are y_k = sum_i u_i v_p with p = vpos(i, k); backward adds dy_k v_p to du_i
# and dy_k u_i to dv_p.

cdef inline int vpos(bint conv, int i, int k, int n) noexcept nogil:
    return (k - i + n) % n if conv else (i + k) % n

cdef void circ_fwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef bint conv = n0.op == OP_CIRC_CONV
    cdef int n = rows(n0), j, e, i, k
    cdef float* u
    cdef float* v
    cdef float* y
    cdef float s
    for j in range(b.n):
        for e in range(n0.bs):
            u = elem_val(ARG(b, j, 0), e)
            v = elem_val(ARG(b, j, 1), e)
            y = NODE(b, j).val + e * n
            for k in range(n):
                s = 0.0
                for i in range(n):
                    s += u[i] * v[vpos(conv, i, k, n)]
                y[k] = s

cdef void circ_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef bint conv = n0.op == OP_CIRC_CONV
    cdef int n = rows(n0), j, e, i, k, p
    cdef bint want_u = batch_arg_needs_grad(b, 0), want_v = batch_arg_needs_grad(b, 1)
    cdef float* u
    cdef float* v
    cdef float* du
    cdef float* dv
    cdef float* dy
    for j in range(b.n):
        for e in range(n0.bs):
            u = elem_val(ARG(b, j, 0), e)
            v = elem_val(ARG(b, j, 1), e)
            du = elem_grad(ARG(b, j, 0), e)
            dv = elem_grad(ARG(b, j, 1), e)
            dy = NODE(b, j).grad + e * n
            for k in range(n):
                for i in range(n):
                    p = vpos(conv, i, k, n)
                    if want_u:
                        du[i] += dy[k] * v[p]
                    if want_v:
                        dv[p] += dy[k] * u[i]
