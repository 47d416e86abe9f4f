# The DyNet functions of structure: concatenation, losses that pick an element,
# picking and slicing, transposition and reshaping (the fused LSTM cells are in
# api/ops_lstm.pxi). Included by api/core.pyx; uses api/expression.pxi and api/shapes.pxi.

def concatenate_to_batch(xs):
    """The arguments, of one shape, as one expression whose batch is theirs one after
    another (DyNet's ``dy.concatenate_to_batch(xs)``): shape the arguments' shape, batch
    size the sum of theirs. Backward hands each argument its part of the gradient.

    Batching: this makes the batch dimension by hand; the engine also batches such nodes of
    one shape and argument count that are ready together, as one copy kernel.

    Example::

        X = dy.concatenate_to_batch([x1, x2, x3])     # (d,) x 3
    """
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "concatenate_to_batch", &ids)
    cdef Node* a
    cdef Node* first = &_here().nodes[ids[0]]
    cdef int k, bs = 0
    try:
        for k in range(n):
            a = &_here().nodes[ids[k]]
            if not _same_dims(a, first):
                raise DimensionError(f"concatenate_to_batch: argument {k} has shape {_dimstr(a)}, "
                                     f"argument 0 has {_dimstr(first)}")
            bs += a.bs
        return _wrap(_here().add_node(OP_CONCAT_TO_BATCH, n, ids, _like(first, bs)))
    finally:
        free(ids)


def concatenate(xs, d=0):
    """Concatenate along dimension d. The arguments (padded with 1s) agree on every other
    dimension; the result has the first one's rank, or d + 1 if larger (DyNet's rule);
    a batch of 1 repeats over the others'."""
    d = _as_function_index(d, "concatenate")
    if not 0 <= d < MAX_DIMS:
        raise DimensionError(f"concatenate: d={d} is not a dimension (0 to {MAX_DIMS - 1})")
    cdef int dd = d
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "concatenate", &ids)
    cdef Node* a
    cdef Node* first = &_here().nodes[ids[0]]
    cdef int k, i, bs = first.bs
    cdef int64_t total = 0
    cdef int64_t dims[4]
    cdef Shape shape
    cdef Attrs at
    try:
        for k in range(n):
            a = &_here().nodes[ids[k]]
            for i in range(MAX_DIMS):
                if i != dd and a.d[i] != first.d[i]:
                    raise DimensionError(f"concatenate(d={dd}): argument {k} has shape {_dimstr(a)}, "
                                         f"argument 0 has {_dimstr(first)}")
            bs = _merge_bs("concatenate", bs, a.bs)
            total += a.d[dd]
        for i in range(MAX_DIMS):
            dims[i] = total if i == dd else first.d[i]
        shape = _checked_shape("concatenate", max(first.nd, dd + 1), dims, bs)
        at = _axis_attr(dd)
        return _wrap(_here().add_node(OP_CONCAT, n, ids, shape, 0, &at))
    finally:
        free(ids)


def concatenate_cols(xs):
    """Concatenate along dimension 1 (DyNet's ``dy.concatenate_cols(xs)``): column vectors
    (d,) become a (d, len(xs)) matrix. Batch sizes equal or 1 (a batch of 1 repeats over
    the others').

    Batching: the nodes of one signature (argument shapes and count) ready together run as
    one copy kernel.

    Example::

        H = dy.concatenate_cols(hs)        # one column per word: attention over H
    """
    return concatenate(xs, 1)


cdef int32_t _index_list(object index, int* bs, int limit, str name) except -1:
    """Store one index per batch element of the result; check the range. *bs is the
    argument's batch size on entry, the result's on return: a list of indices for an
    unbatched argument makes a batch of that many, a single int is repeated."""
    if isinstance(index, (list, tuple, np.ndarray)):
        idx = [_as_function_index(i, name) for i in index]
        if bs[0] == 1:
            bs[0] = len(idx)
        if len(idx) != bs[0]:
            raise ValueError(f"{name}: {len(idx)} indices for a batch of {bs[0]}")
    else:
        idx = [_as_function_index(index, name)] * bs[0]
    for i in idx:
        if not 0 <= i < limit:
            raise IndexError(f"{name}: index {i} out of range [0, {limit})")
    return _here().add_ints(idx, bs[0])


cdef inline bint _is_vector(Node* n) noexcept:
    """A vector (n,) or a column (n, 1): DyNet's losses over classes take both (a
    product W * h with h of shape (k, 1) gives an (n, 1) column), and both hold n
    contiguous values per batch element, which is all the kernels read."""
    return n.nd == 1 or (n.nd == 2 and n.d[1] == 1)


def pickneglogsoftmax(Expression x, v):
    """The negative log-likelihood -log softmax(x)[v] of class ``v`` under scores ``x``
    (DyNet's ``dy.pickneglogsoftmax(x, v)``): ``x`` a vector (n,) or a column (n, 1), as in DyNet; ``v`` an int, or a list
    of one int per batch element of x (then as ``pickneglogsoftmax_batch``).

    Shape: (1,) per batch element. Batching: the pickneglogsoftmax nodes of one shape ready
    together run as one kernel, the softmax and the pick fused.

    Example::

        loss = dy.pickneglogsoftmax(W * h + b, gold_tag)
    """
    cdef Node* n = _check(x)
    if not _is_vector(n):
        raise DimensionError(f"pickneglogsoftmax: needs a vector, got {_dimstr(n)}")
    cdef int bs = n.bs
    cdef int32_t at = _index_list(v, &bs, rows(n), "pickneglogsoftmax")
    return _wrap(_here().add_node(OP_PICKNLS, 1, &x.idx, _matrix_shape("pickneglogsoftmax", 1, 1, bs), at))


def pickneglogsoftmax_batch(Expression x, vs):
    """``pickneglogsoftmax`` with one class per batch element (DyNet's
    ``dy.pickneglogsoftmax_batch(x, vs)``): ``x`` (n,) x B and ``vs`` a list of B ints (an
    unbatched x is repeated over the batch). Shape: (1,) x B; ``dy.sum_batches`` sums it.

    Batching: one kernel for the nodes of one shape ready together, as pickneglogsoftmax.

    Example::

        loss = dy.sum_batches(dy.pickneglogsoftmax_batch(scores, labels))
    """
    return pickneglogsoftmax(x, list(vs))


def hinge(Expression x, v, float m=1.0):
    """The multi-class hinge loss sum over i != v of max(0, m - x[v] + x[i]) of scores ``x``
    (a vector (n,) or a column (n, 1), as in DyNet) against the gold class ``v`` (DyNet's ``dy.hinge(x, index, m=1.0)``; the
    index is ``v`` here); ``v`` may be a list of one int per batch element.

    Shape: (1,) per batch element. Batching: the hinge nodes of one shape and margin ready
    together run as one kernel.

    Example::

        loss = dy.hinge(scores, gold, m=1.0)
    """
    _finite("hinge", "m", m)
    cdef Node* n = _check(x)
    if not _is_vector(n):
        raise DimensionError(f"hinge: needs a vector, got {_dimstr(n)}")
    cdef int bs = n.bs
    cdef int32_t at = _index_list(v, &bs, rows(n), "hinge")
    cdef Attrs attr
    memset(&attr, 0, sizeof(Attrs))
    attr.hinge.margin = m
    return _wrap(_here().add_node(OP_HINGE, 1, &x.idx, _matrix_shape("hinge", 1, 1, bs), at, &attr))


def hinge_batch(Expression x, vs, float m=1.0):
    """``hinge`` with one gold class per batch element (DyNet's ``dy.hinge_batch(x, vs,
    m=1.0)``): ``x`` (n,) x B and ``vs`` a list of B ints; shape (1,) x B.

    Batching: as ``hinge``, one kernel for the nodes of one shape and margin.

    Example::

        loss = dy.sum_batches(dy.hinge_batch(scores, golds))
    """
    return hinge(x, list(vs), m)


def pick(Expression e, index=0, dim=0, *, d=None):
    """The slice at ``index`` along dimension ``dim``, which is removed from the shape (DyNet's
    ``dy.pick(e, index=0, dim=0)``; ``d=`` is this library's older name for ``dim``): a
    vector gives (1,), a (rows, cols) matrix with dim=0 gives row ``index`` as (cols,). A
    list of indices picks one per batch element (as ``pick_batch``). ``x[i]`` is the same.

    Shape: x's shape without ``dim``; the batch is kept (or made by a list of indices).
    Batching: the pick nodes of one shape and ``dim`` ready together run as one gather.

    Example::

        gold_score = dy.pick(scores, gold)
    """
    if d is not None:
        dim = d
    cdef Node* n = _check(e)
    cdef int k = _dim_index("pick", n, dim, "dim")
    cdef int bs = n.bs
    cdef int32_t at = _index_list(index, &bs, n.d[k], "pick")
    n = &_here().nodes[e.idx]
    cdef Attrs attr = _axis_attr(k)
    return _wrap(_here().add_node(OP_PICK, 1, &e.idx, _without_dims("pick", n, 1 << k, bs), at, &attr))


def pick_batch(Expression e, indices, dim=0, *, d=None):
    """``pick`` with one index per batch element (DyNet's ``dy.pick_batch(e, indices, dim=0)``):
    an unbatched ``e`` makes a batch of len(indices) slices. Batching: as ``pick``, one
    gather for the nodes of one shape and ``dim``.

    Example::

        scores_of_gold = dy.pick_batch(scores, golds)      # (1,) x len(golds)
    """
    return pick(e, list(indices), dim if d is None else d)


def pick_range(Expression x, s, e, d=0):
    """Elements [s, e) along dimension ``d``, which keeps its place with size e - s (DyNet's
    ``dy.pick_range(x, s, e, d=0)``); ``x[s:e]`` is the same along dimension 0. Needs
    0 <= s < e <= size.

    Shape: x's shape with dimension d of size e - s; the batch is kept. Batching: the
    pick_range nodes of one shape, range and ``d`` ready together run as one copy.

    Example::

        i_gate = dy.pick_range(gates, 0, hidden)
    """
    return _pick_range(x, s, e, d, 1)


cdef Expression _pick_range(Expression x, object s, object e, object d, int step):
    """Every step-th element of [s, e) along dimension d (x[s:e:step] along d)."""
    s, e = _as_function_index(s, "pick_range"), _as_function_index(e, "pick_range")
    cdef Node* n = _check(x)
    cdef int k = _dim_index("pick_range", n, d)
    if not 0 <= s < e <= n.d[k]:
        raise IndexError(f"pick_range: range [{s}, {e}) is not inside [0, {n.d[k]}) "
                         f"(dimension {k} of {_dimstr(n)})")
    cdef Attrs attr
    memset(&attr, 0, sizeof(Attrs))
    attr.range.dim = k
    attr.range.step = step
    cdef int64_t dims[4]
    cdef int a
    for a in range(MAX_DIMS):
        dims[a] = (e - s + step - 1) // step if a == k else n.d[a]
    return _wrap(_here().add_node(OP_PICK_RANGE, 1, &x.idx, _checked_shape("pick_range", n.nd, dims, n.bs),
                              s, &attr))


def pick_batch_elems(Expression x, vs):
    """Batch elements ``vs`` of x (repeats allowed) as a new batch (DyNet's
    ``dy.pick_batch_elems(x, vs)``): shape x's shape, batch size len(vs); an index
    outside [0, batch size) raises IndexError.

    Batching: the nodes of one shape and index count ready together run as one copy.

    Example::

        first_two = dy.pick_batch_elems(x, [0, 1])
    """
    cdef Node* n = _check(x)
    idx = [_as_function_index(i, "pick_batch_elems") for i in vs]
    if not idx:
        raise ValueError("pick_batch_elems: needs at least one index")
    for i in idx:
        if not 0 <= i < n.bs:
            raise IndexError(f"pick_batch_elems: batch element {i} out of range [0, {n.bs})")
    cdef int32_t at = _here().add_ints(idx, len(idx))
    n = &_here().nodes[x.idx]
    return _wrap(_here().add_node(OP_PICK_BATCH_ELEMS, 1, &x.idx, _like(n, len(idx)), at))


def pick_batch_elem(Expression x, v):
    """Batch element ``v`` of x as an unbatched expression (DyNet's
    ``dy.pick_batch_elem(x, v)``): shape x's shape, batch size 1.

    Batching: as ``pick_batch_elems``, one copy for the nodes of one shape.

    Example::

        loss_of_first = dy.pick_batch_elem(losses, 0)
    """
    return pick_batch_elems(x, [v])


def transpose(Expression x, dims=[1, 0]):
    """Permute the dimensions (DyNet's ``dy.transpose(x, dims=[1, 0])``): output dimension k is
    x's dimension dims[k]. x is seen as having len(dims) dimensions (padded with 1s, or
    its trailing 1s dropped): the default [1, 0] transposes a matrix, and turns a vector
    (d,) into a row (1, d).

    Shape: the permuted shape; the batch is kept (each batch element is transposed).
    Batching: the transpose nodes of one shape and permutation ready together run as one
    kernel.

    Example::

        scores = dy.transpose(H) * q       # H (d, n), q (d,) -> (n,)
    """
    cdef Node* n = _check(x)
    perm = [_as_function_index(v, "transpose") for v in dims]
    cdef int k, nd = len(perm)
    if not 1 <= nd <= MAX_DIMS or sorted(perm) != list(range(nd)):
        raise DimensionError(f"transpose: dims={list(dims)} is not a permutation of 0 .. "
                             f"{max(nd, 1) - 1} (1 to {MAX_DIMS} dimensions)")
    for k in range(nd, MAX_DIMS):
        if n.d[k] != 1:
            raise DimensionError(f"transpose: dims={list(dims)} has {nd} dimensions, a value of "
                                 f"shape {_dimstr(n)} has {n.nd}")
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    cdef int64_t d[4]
    for k in range(MAX_DIMS):
        at.transpose.perm[k] = perm[k] if k < nd else k
        d[k] = n.d[at.transpose.perm[k]]
    return _wrap(_here().add_node(OP_TRANSPOSE, 1, &x.idx, _checked_shape("transpose", nd, d, n.bs), 0, &at))


def reshape(Expression x, d, batch_size=1):
    """The same elements (column-major, the batch slowest) in shape d with batch_size
    batch elements, as DyNet: if that does not hold all of x's elements and batch_size
    is 1, every batch element is reshaped to d and the batch kept. So reshape(x, (6,))
    of a (2,) x batch 3 merges the batch, reshape(x, (2,)) keeps it, and the masking
    idiom reshape(mask, (1,), batch_size=n) spreads a vector over a batch."""
    cdef Node* n = _check(x)
    cdef int64_t bs = _as_size(batch_size, "reshape", 1)
    cdef Shape shape = _shape_from("reshape", d, 1)
    cdef int64_t per = elems_of(shape)
    if per * bs == n.size:
        shape.bs = <int32_t>bs
    elif bs == 1 and per == elems(n):
        shape.bs = n.bs
    else:
        raise DimensionError(f"reshape: cannot reshape {_dimstr(n)} to {tuple(d)}"
                             + ("" if bs == 1 else f" x batch {bs}"))
    return _wrap(_here().add_node(OP_RESHAPE, 1, &x.idx, shape))
