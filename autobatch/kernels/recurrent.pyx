# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Fused LSTM cells: gate activations, cell update, hidden output."""
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memset

from autobatch.runtime.memory cimport Arena, arena_alloc
from autobatch.runtime.nodes cimport *
from autobatch.runtime.op_ids cimport *
from autobatch.kernels.common cimport *
from autobatch.kernels.elementwise cimport ab_find_binary, ab_find_unary

cdef extern from "recurrent.h" nogil:
    void mul_acc "ab_mul_acc" (float* y, const float* a, const float* b, int n, int set)

# Gates are laid out in blocks of h: [i, f_1 .. f_k, o, g]. One node each for the gate
# activations, the cell update and the hidden output replaces about a dozen
# elementwise nodes per step (LSTM: k = 1; binary Tree-LSTM: k = 2; its leaves: k = 0).

# loops of kernels/elementwise.h used by the fused kernels (bound in the op table below)
cdef ab_unary_fwd gate_fwd
cdef ab_unary_bwd gate_bwd
cdef ab_unary_fwd tanh_loop_fwd
cdef ab_unary_bwd tanh_loop_bwd
cdef ab_binary_fwd mul_tanh_fwd
cdef ab_binary_bwd mul_tanh_bwd_o, mul_tanh_bwd_c

cdef void lstm_gates_fwd(Batch* b) noexcept nogil:
    # logistic on every block but the last (forget blocks get + forget_bias), tanh on the last
    cdef Node* n0 = NODE(b, 0)
    cdef int h = n0.attr.gates.hidden, total = elems(n0), j, k
    cdef int nb = total // h
    cdef float* x
    cdef float* y
    for j in range(b.n):
        for k in range(n0.bs):
            x = ARG(b, j, 0).val + k * total
            y = NODE(b, j).val + k * total
            gate_fwd(y, x, h, 0.0)
            gate_fwd(y + h, x + h, (nb - 3) * h, n0.attr.gates.forget_bias)
            gate_fwd(y + (nb - 2) * h, x + (nb - 2) * h, h, 0.0)
            tanh_loop_fwd(y + (nb - 1) * h, x + (nb - 1) * h, h, 0.0)

cdef void lstm_gates_bwd(Batch* b) noexcept nogil:
    # first_write: the loops cover all of the argument's gradient, so one not written
    # yet is assigned
    cdef Node* n0 = NODE(b, 0)
    cdef int h = n0.attr.gates.hidden, total = elems(n0), j, k
    cdef Node* x
    cdef bint fresh
    cdef float* dx
    cdef float* xv
    cdef float* y
    cdef float* dy
    for j in range(b.n):
        x = ARG(b, j, 0)
        if not x.flags & F_NEEDS_GRAD:
            continue
        fresh = grad_fresh(x)
        grad_mark(x)
        for k in range(n0.bs):
            dx = x.grad + k * total
            xv = x.val + k * total
            y = NODE(b, j).val + k * total
            dy = NODE(b, j).grad + k * total
            gate_bwd(dx, xv, y, dy, total - h, 0.0, fresh)
            tanh_loop_bwd(dx + total - h, xv + total - h, y + total - h, dy + total - h, h, 0.0,
                          fresh)

cdef void lstm_cell_fwd(Batch* b) noexcept nogil:
    # c = i * g + sum_m f_m * c_m; arguments: gates, c_1 .. c_k
    cdef Node* n0 = NODE(b, 0)
    cdef int h = rows(n0), nk = n0.nargs - 1, G = (nk + 3) * h, j, k, m
    cdef float* g
    cdef float* y
    for j in range(b.n):
        for k in range(n0.bs):
            g = ARG(b, j, 0).val + k * G
            y = NODE(b, j).val + k * h
            mul_acc(y, g, g + (nk + 2) * h, h, True)
            for m in range(nk):
                mul_acc(y, g + (1 + m) * h, ARG(b, j, 1 + m).val + k * h, h, False)

cdef void lstm_cell_bwd(Batch* b) noexcept nogil:
    # first_write for the cells c_m (a block of h each, all of it written); the gates'
    # gradient is shared with lstm_hidden, which wrote its o block before
    cdef Node* n0 = NODE(b, 0)
    cdef int h = rows(n0), nk = n0.nargs - 1, G = (nk + 3) * h, j, k, m
    cdef Node* gn
    cdef Node* cm
    cdef float* g
    cdef float* dg
    cdef float* dy
    cdef bint fresh
    for j in range(b.n):
        gn = ARG(b, j, 0)
        if gn.flags & F_NEEDS_GRAD:
            grad_ready(gn)
            for k in range(n0.bs):
                g = gn.val + k * G
                dg = gn.grad + k * G
                dy = NODE(b, j).grad + k * h
                mul_acc(dg, g + (nk + 2) * h, dy, h, False)
                mul_acc(dg + (nk + 2) * h, g, dy, h, False)
                for m in range(nk):
                    mul_acc(dg + (1 + m) * h, ARG(b, j, 1 + m).val + k * h, dy, h, False)
        for m in range(nk):
            cm = ARG(b, j, 1 + m)
            if not cm.flags & F_NEEDS_GRAD:
                continue
            fresh = grad_fresh(cm)
            grad_mark(cm)
            for k in range(n0.bs):
                mul_acc(cm.grad + k * h, gn.val + k * G + (1 + m) * h, NODE(b, j).grad + k * h, h,
                        fresh)

cdef void lstm_hidden_fwd(Batch* b) noexcept nogil:
    # h = o * tanh(c); arguments: c, gates (o is the second-to-last block)
    cdef Node* n0 = NODE(b, 0)
    cdef int h = rows(n0), G = elems(ARG(b, 0, 1)), j, k
    for j in range(b.n):
        for k in range(n0.bs):
            mul_tanh_fwd(NODE(b, j).val + k * h, ARG(b, j, 1).val + k * G + G - 2 * h, 1,
                         ARG(b, j, 0).val + k * h, 1, h)

cdef void lstm_hidden_bwd(Batch* b) noexcept nogil:
    cdef Node* n0 = NODE(b, 0)
    cdef int h = rows(n0), G = elems(ARG(b, 0, 1)), j, k
    cdef Node* c
    cdef Node* g
    cdef bint want_c = batch_arg_needs_grad(b, 0)
    cdef bint want_g = batch_arg_needs_grad(b, 1)
    for j in range(b.n):
        c = ARG(b, j, 0)
        g = ARG(b, j, 1)
        for k in range(n0.bs):
            if want_g:
                mul_tanh_bwd_o(g.grad + k * G + G - 2 * h, 1, g.val + k * G + G - 2 * h, 1,
                               c.val + k * h, 1, NODE(b, j).val + k * h, NODE(b, j).grad + k * h, h, 0)
            if want_c:
                mul_tanh_bwd_c(c.grad + k * h, 1, g.val + k * G + G - 2 * h, 1,
                               c.val + k * h, 1, NODE(b, j).val + k * h, NODE(b, j).grad + k * h, h, 0)


if not (ab_find_unary(b"gate_logistic", &gate_fwd, &gate_bwd)
        and ab_find_unary(b"tanh", &tanh_loop_fwd, &tanh_loop_bwd)
        and ab_find_binary(b"mul_tanh", &mul_tanh_fwd, &mul_tanh_bwd_o, &mul_tanh_bwd_c)):
    raise RuntimeError("kernels/elementwise.h lacks the loops of the fused LSTM kernels")
