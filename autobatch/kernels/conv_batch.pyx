# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""conv2d / conv2d_bias / maxpooling2d over the nodes of a batch.

Every batch element of every node is one image (H, W, C); the filter (and bias) is
shared by identity (it is in the signature), so the whole batch is one im2col and one
sgemm, in chunks that keep the patch matrix small enough to stay fast."""
from libc.stdint cimport int32_t, int64_t

from autobatch.runtime.nodes cimport (Batch, Node, NODE, ARG, elems, batch_arg_needs_grad,
                                 F_NEEDS_GRAD)
from autobatch.kernels.conv cimport (ConvGeom, conv_geom, pool_geom, conv2d_fwd,
                                      conv2d_bwd, conv2d_fwd_scratch, conv2d_bwd_scratch,
                                      maxpool2d_fwd, maxpool2d_bwd, maxpool2d_argmax_size)
from autobatch.runtime.memory cimport Arena, arena_alloc

# images per kernel call: a larger stacked patch matrix stops paying (measured: the
# batched call wins for small images, breaks even at 12x12..28x28 with 8-32 channels)
cdef int64_t PATCH_FLOATS_PER_CALL = 1 << 20


cdef inline void geometry(Batch* b, ConvGeom* g) noexcept nogil:
    """The geometry of the batch's nodes (one signature: one geometry). Sizes were
    checked when the nodes were created."""
    cdef Node* n0 = NODE(b, 0)
    cdef Node* x = ARG(b, 0, 0)
    cdef Node* f
    if n0.nargs >= 2:
        f = ARG(b, 0, 1)
        conv_geom(g, x.d[0], x.d[1], x.d[2], f.d[0], f.d[1], f.d[3],
                  n0.attr.conv.stride[0], n0.attr.conv.stride[1], n0.attr.conv.is_valid)
    else:
        pool_geom(g, x.d[0], x.d[1], x.d[2], n0.attr.pool.ksize[0], n0.attr.pool.ksize[1],
                  n0.attr.pool.stride[0], n0.attr.pool.stride[1], n0.attr.pool.is_valid)


cdef float** image_pointers(Batch* b, Arena* mem, int which) noexcept nogil:
    """One pointer per image of the batch: which = 0 the argument's values, 1 its
    gradients (NULL where no gradient is wanted), 2 the outputs, 3 their gradients."""
    cdef Node* n0 = NODE(b, 0)
    cdef int64_t bs = n0.bs, j, e, k = 0
    cdef float** p = <float**>arena_alloc(mem, 2 * b.n * bs)
    cdef Node* x
    cdef Node* y
    if p == NULL:
        return NULL
    for j in range(b.n):
        x = ARG(b, j, 0)
        y = NODE(b, j)
        for e in range(bs):
            if which == 0:
                p[k] = x.val + e * elems(x)
            elif which == 1:
                p[k] = x.grad + e * elems(x) if x.flags & F_NEEDS_GRAD else NULL
            elif which == 2:
                p[k] = y.val + e * elems(y)
            else:
                p[k] = y.grad + e * elems(y)
            k += 1
    return p


cdef inline int64_t images_per_call(const ConvGeom* g, int64_t total) noexcept nogil:
    cdef int64_t patch = g.OH * g.OW * g.KH * g.KW * g.C
    cdef int64_t n = PATCH_FLOATS_PER_CALL // patch if patch > 0 else total
    if n < 1:
        n = 1
    return n if n < total else total


cdef void conv2d_batch_fwd(Batch* b) noexcept nogil:
    cdef ConvGeom g
    geometry(b, &g)
    cdef int64_t total = b.n * NODE(b, 0).bs, chunk = images_per_call(&g, total), i
    cdef float** xs = image_pointers(b, b.scratch, 0)
    cdef float** ys = image_pointers(b, b.scratch, 2)
    cdef int64_t need = conv2d_fwd_scratch(&g, chunk)
    cdef float* scratch = arena_alloc(b.scratch, need if need > 0 else 1)
    if xs == NULL or ys == NULL or scratch == NULL or need < 0:
        b.scratch.failed = True
        return
    cdef const float* bias = ARG(b, 0, 2).val if NODE(b, 0).nargs == 3 else NULL
    i = 0
    while i < total:
        conv2d_fwd(&g, min(chunk, total - i), xs + i, ARG(b, 0, 1).val, bias, ys + i, scratch)
        i += chunk


cdef void conv2d_batch_bwd(Batch* b) noexcept nogil:
    cdef ConvGeom g
    geometry(b, &g)
    cdef Node* f = ARG(b, 0, 1)
    cdef bint need_dx = batch_arg_needs_grad(b, 0)
    cdef float* df = f.grad if f.flags & F_NEEDS_GRAD else NULL
    cdef float* db = NULL
    if NODE(b, 0).nargs == 3 and ARG(b, 0, 2).flags & F_NEEDS_GRAD:
        db = ARG(b, 0, 2).grad
    if not need_dx and df == NULL and db == NULL:
        return
    cdef int64_t total = b.n * NODE(b, 0).bs, chunk = images_per_call(&g, total), i
    cdef float** xs = image_pointers(b, b.scratch, 0)
    cdef float** dxs = image_pointers(b, b.scratch, 1) if need_dx else NULL
    cdef float** dys = image_pointers(b, b.scratch, 3)
    cdef int64_t need = conv2d_bwd_scratch(&g, chunk, need_dx, df != NULL)
    cdef float* scratch = arena_alloc(b.scratch, need if need > 0 else 1)
    if xs == NULL or dys == NULL or (need_dx and dxs == NULL) or scratch == NULL or need < 0:
        b.scratch.failed = True
        return
    i = 0
    while i < total:
        conv2d_bwd(&g, min(chunk, total - i), xs + i, f.val, dys + i,
                   dxs + i if dxs != NULL else NULL, df, db, scratch)
        i += chunk


cdef void maxpool2d_batch_fwd(Batch* b) noexcept nogil:
    # each node keeps its slice of the argmax record (aux), so that backward can run
    # any subset of the batch
    cdef ConvGeom g
    geometry(b, &g)
    cdef int64_t bs = NODE(b, 0).bs, j
    cdef float** xs = image_pointers(b, b.scratch, 0)
    cdef float** ys = image_pointers(b, b.scratch, 2)
    cdef int64_t per_node = maxpool2d_argmax_size(&g, bs)
    cdef int32_t* argmax = <int32_t*>arena_alloc(b.arena, per_node * b.n)
    if xs == NULL or ys == NULL or argmax == NULL:
        b.scratch.failed = True
        return
    maxpool2d_fwd(&g, b.n * bs, xs, ys, argmax)
    for j in range(b.n):
        NODE(b, j).aux = <float*>(argmax + j * per_node)


cdef void maxpool2d_batch_bwd(Batch* b) noexcept nogil:
    if not batch_arg_needs_grad(b, 0):
        return
    cdef ConvGeom g
    geometry(b, &g)
    cdef int64_t bs = NODE(b, 0).bs, j
    cdef float** dxs = image_pointers(b, b.scratch, 1)
    cdef float** dys = image_pointers(b, b.scratch, 3)
    if dxs == NULL or dys == NULL:
        b.scratch.failed = True
        return
    for j in range(b.n):
        maxpool2d_bwd(&g, bs, dys + j * bs, <int32_t*>NODE(b, j).aux, dxs + j * bs)
