# Helpers of the batched kernels, inline: gathering the arguments of a batch, fast
# math (the products' BLAS calls are in kernels/gemm.pxd). Declarations only (no module).
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport sgemv, sger

from autobatch.runtime.memory cimport Arena, arena_alloc
from autobatch.runtime.nodes cimport (Batch, Node, ARG, AHEAD, MAX_DIMS, grad_fresh, grad_mark,
                               prefetch_batch_arg)
from autobatch.runtime.profile cimport P_GATHER, prof_start, prof_stop
from autobatch.runtime.stacks cimport stack_find, stack_keep, stack_probe

cdef extern from "fastmath.h" nogil:
    float exp_nonpos "ab_exp_nonpos" (float x)
    float fmax_of "ab_max" (const float* x, int n)

cdef inline float* consecutive(Batch* b, int a, bint grads) noexcept nogil:
    """The values (or gradients) of argument a of all nodes, if they follow each
    other in memory: then a batched kernel can use them in place. Else NULL."""
    cdef int j, per = ARG(b, 0, a).size
    cdef float* first = ARG(b, 0, a).grad if grads else ARG(b, 0, a).val
    for j in range(1, b.n):
        if j + AHEAD < b.n:
            prefetch_batch_arg(b, b.ids[j + AHEAD], a)
        if (ARG(b, j, a).grad if grads else ARG(b, j, a).val) != first + j * per:
            return NULL
    return first

cdef inline float* gather_arg(Batch* b, int a, Arena* mem) noexcept nogil:
    """Pointer to the values of argument `a` of all nodes, stacked; in place if
    they already are consecutive in memory, the copy made earlier in this forward if
    one holds the same values in the same order (b.stacks, copies in b.arena only),
    otherwise copied."""
    cdef float* first = consecutive(b, a, False)
    if first != NULL:
        b.traffic.in_place += 1
        return first
    cdef int j, per = ARG(b, 0, a).size
    cdef const float** src = NULL
    cdef float* out
    if b.stacks != NULL and mem == b.arena:
        src = stack_probe(b.stacks, b.n)
        if src != NULL:
            for j in range(b.n):
                src[j] = ARG(b, j, a).val
            out = stack_find(b.stacks, b.n, per)
            if out != NULL:
                b.traffic.reused += 1
                return out
    out = arena_alloc(mem, <size_t>per * b.n)
    if out == NULL:
        return NULL
    cdef double t0 = prof_start(b.prof)
    for j in range(b.n):
        if j + AHEAD < b.n:
            prefetch_batch_arg(b, b.ids[j + AHEAD], a)
        memcpy(out + j * per, ARG(b, j, a).val, per * sizeof(float))
    prof_stop(b.prof, P_GATHER, t0)
    b.traffic.copied += 1
    b.traffic.copied_floats += <int64_t>per * b.n
    if src != NULL:
        stack_keep(b.stacks, b.n, per, out)
    return out

cdef inline void add_grad_from_stack(Batch* b, int a, float* stacked) noexcept nogil:
    """Argument a's gradient of every node += its part of `stacked` (= on the first
    write of that gradient)."""
    cdef int j, i
    cdef int per = ARG(b, 0, a).size
    cdef Node* x
    cdef float* g
    cdef float* s
    cdef double t0 = prof_start(b.prof)
    for j in range(b.n):
        if j + AHEAD < b.n:
            prefetch_batch_arg(b, b.ids[j + AHEAD], a)
        x = ARG(b, j, a)
        g = x.grad
        s = stacked + j * per
        if grad_fresh(x):
            memcpy(g, s, per * sizeof(float))
            grad_mark(x)
        else:
            for i in range(per):
                g[i] += s[i]
    prof_stop(b.prof, P_GATHER, t0)

cdef inline void along_dim(const Node* x, int d, int* inner, int* outer) noexcept nogil:
    """x seen as (inner, x.d[d], outer) per batch element."""
    cdef int a
    inner[0] = 1
    outer[0] = 1
    for a in range(MAX_DIMS):
        if a < d:
            inner[0] *= x.d[a]
        elif a > d:
            outer[0] *= x.d[a]

cdef inline int32_t* int_aux(Node* n) noexcept nogil:
    """A node's aux memory holding ints (positions), not floats."""
    return <int32_t*>n.aux

cdef inline int dim_or_batch(const Node* n, int a) noexcept nogil:
    """Size of dimension a of n, the batch being dimension MAX_DIMS."""
    return n.d[a] if a < MAX_DIMS else n.bs

cdef inline void contiguous_strides(const Node* n, int* st) noexcept nogil:
    """Strides of n's dimensions and batch (dimension MAX_DIMS) in its own memory."""
    cdef int a, t = 1
    for a in range(MAX_DIMS + 1):
        st[a] = t
        t *= dim_or_batch(n, a)

cdef inline void strided_walk(float* dst, const int* dst_st, const float* src,
                              const int* src_st, const int* size, float scale,
                              bint add) noexcept nogil:
    """For every index c of the box `size` (the dimensions, then the batch):
    dst[c . dst_st] = (or +=) scale * src[c . src_st]. Transposing, gathering and
    summing over dimensions are this walk with other strides (a stride 0 repeats)."""
    cdef int c4, c3, c2, c1, c0, d, s
    for c4 in range(size[4]):
        for c3 in range(size[3]):
            for c2 in range(size[2]):
                for c1 in range(size[1]):
                    d = c4 * dst_st[4] + c3 * dst_st[3] + c2 * dst_st[2] + c1 * dst_st[1]
                    s = c4 * src_st[4] + c3 * src_st[3] + c2 * src_st[2] + c1 * src_st[1]
                    if add:
                        for c0 in range(size[0]):
                            dst[d + c0 * dst_st[0]] += scale * src[s + c0 * src_st[0]]
                    else:
                        for c0 in range(size[0]):
                            dst[d + c0 * dst_st[0]] = scale * src[s + c0 * src_st[0]]

cdef inline float* elem_val(Node* x, int e) noexcept nogil:
    """Batch element e of x's values; element 0 when x is not batched (it repeats)."""
    return x.val + (0 if x.bs == 1 else e * (x.d[0] * x.d[1] * x.d[2] * x.d[3]))

cdef inline float* elem_grad(Node* x, int e) noexcept nogil:
    """Batch element e of x's gradient; element 0 when x is not batched (it sums)."""
    return x.grad + (0 if x.bs == 1 else e * (x.d[0] * x.d[1] * x.d[2] * x.d[3]))

cdef inline void gemv(char tr, int m, int n, float alpha, const float* A, const float* x,
                      float beta, float* y) noexcept nogil:
    """y = alpha op(A) x + beta y for the column-major m x n matrix A (lda = m)."""
    cdef int one = 1, i, inner = n if tr == b'N' else m, out = m if tr == b'N' else n
    if inner == 0:      # an empty sum: y = beta y (BLAS returns at once, y unscaled)
        for i in range(out):
            y[i] = 0.0 if beta == 0.0 else beta * y[i]
        return
    if out == 0:
        return
    sgemv(&tr, &m, &n, &alpha, <float*>A, &m, <float*>x, &one, &beta, y, &one)

cdef inline void ger(int m, int n, float alpha, const float* x, const float* y, float* A) noexcept nogil:
    """A += alpha x y^T for the column-major m x n matrix A (lda = m)."""
    cdef int one = 1
    if m == 0 or n == 0:    # nothing to add to (and BLAS refuses lda = 0)
        return
    sger(&m, &n, &alpha, <float*>x, &one, <float*>y, &one, A, &m)

cdef inline int descending(const void* a, const void* b) noexcept nogil:
    """qsort's order of floats, largest first."""
    cdef float x = (<const float*>a)[0], y = (<const float*>b)[0]
    return (x < y) - (x > y)
