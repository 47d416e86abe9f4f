# DyNet's selections: select_rows, select_cols, strided_select, kmax_pooling,
# pickrange, fold_rows, one_hot. Included by api/core.pyx; uses api/expression.pxi,
# api/shapes.pxi and api/ops_structure.pxi.

cdef list _index_values(object indices, int limit, str op, str what):
    """A non-empty list of ints in [0, limit)."""
    if isinstance(indices, (int, np.integer)) or not hasattr(indices, "__iter__"):
        raise TypeError(f"{op}: {what} must be a list of ints, got {type(indices).__name__}")
    idx = [_as_function_index(i, op) for i in indices]
    if not idx:
        raise ValueError(f"{op}: {what} is empty (a value has no dimension of size 0)")
    for i in idx:
        if not 0 <= i < limit:
            raise IndexError(f"{op}: index {i} out of range [0, {limit})")
    return idx


cdef Expression _select(int op, object x, object indices, int dim, str what):
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    name = OP_NAMES[op]
    if dim == 1 and n.nd != 2:
        raise DimensionError(f"{name}: needs a matrix, got {_dimstr(n)}")
    idx = _index_values(indices, n.d[dim], name, what)
    cdef int64_t dims[4]
    cdef int a
    for a in range(MAX_DIMS):
        dims[a] = len(idx) if a == dim else n.d[a]
    cdef Shape shape = _checked_shape(name, n.nd, dims, n.bs)
    cdef int32_t at = _here().add_ints(idx, len(idx))
    cdef Attrs attr = _axis_attr(dim)
    return _wrap(_here().add_node(op, 1, &e.idx, shape, at, &attr))


def select_rows(x, rs):
    """The rows rs of x, in that order (repeats allowed): x of shape (R, ...) gives
    (len(rs), ...), every other dimension and the batch kept. Nodes that select other
    rows of same-shaped values batch together (the rows are per node, not in the
    signature); rows used twice get both gradients.

        select_rows(M, [2, 0])      # rows 2 and 0 of M
    """
    return _select(OP_SELECT_ROWS, x, rs, 0, "rs")


def select_cols(x, cs):
    """The columns cs of the matrix x (R, C), in that order: (R, len(cs)), the batch
    kept. Batches as select_rows."""
    return _select(OP_SELECT_COLS, x, cs, 1, "cs")


def pickrange(x, s, e, d=0):
    """DyNet's other name of pick_range: elements [s, e) along dimension d, which keeps
    its place with size e - s (batches as pick_range: the start is per node)."""
    return pick_range(_as_expr(x), s, e, d)


cdef list _int_list(object v, str op, str what, int most):
    if isinstance(v, (int, np.integer)) or not hasattr(v, "__iter__"):
        raise TypeError(f"{op}: {what} must be a list of ints, got {type(v).__name__}")
    out = [_as_function_index(i, op) for i in v]
    if len(out) > most:
        raise DimensionError(f"{op}: {what} has {len(out)} entries; a value of this shape has "
                             f"{most - 1} dimensions and the batch")
    return out


def strided_select(x, strides, range_from, range_to):
    """x[range_from[0]:range_to[0]:strides[0], ...] in numpy's terms, per dimension of x;
    an entry after x's last dimension is the batch's. Missing entries take the whole
    dimension with step 1. The result keeps x's rank; a dimension of size
    ceil((to - from) / stride). Nodes with other ranges of same-shaped values batch
    together (the ranges are per node).

        strided_select(M, [2, 1], [0, 1], [])     # every other row of M, from column 1
    """
    cdef Expression ex = _as_expr(x)
    cdef Node* n = _check(ex)
    name = "strided_select"
    cdef int nd = n.nd, a, k
    steps = _int_list(strides, name, "strides", nd + 1)
    starts = _int_list(range_from, name, "range_from", nd + 1)
    ends = _int_list(range_to, name, "range_to", nd + 1)
    cdef int64_t dims[4]
    cdef int64_t bs = n.bs
    first, step = [0] * (MAX_DIMS + 1), [1] * (MAX_DIMS + 1)
    for k in range(nd + 1):
        a = k if k < nd else MAX_DIMS               # the entry after the dimensions: the batch
        size = n.bs if a == MAX_DIMS else n.d[a]
        s = starts[k] if k < len(starts) else 0
        t = ends[k] if k < len(ends) else size
        st = steps[k] if k < len(steps) else 1
        if st < 1:
            raise ValueError(f"{name}: strides must be >= 1, got {st}")
        if not 0 <= s < t <= size:
            raise IndexError(f"{name}: range [{s}, {t}) of {'the batch' if a == MAX_DIMS else f'dimension {k}'} "
                             f"is not a non-empty part of [0, {size})")
        st = min(st, size)      # a longer step takes one element all the same
        first[a], step[a] = s, st
        if a == MAX_DIMS:
            bs = (t - s + st - 1) // st
        else:
            dims[a] = (t - s + st - 1) // st
    cdef Shape shape = _checked_shape(name, nd, dims, bs)
    cdef int32_t at = _here().add_ints(first + step, 2 * (MAX_DIMS + 1))
    return _wrap(_here().add_node(OP_STRIDED_SELECT, 1, &ex.idx, shape, at))


def kmax_pooling(x, k, d=1):
    """The k largest values along dimension d, in the order they appear there (DyNet's
    rule: the values >= the k-th largest, the first k of them): dimension d becomes k,
    the others and the batch are kept. The gradient goes to the chosen elements.
    Nodes of one shape and d run as one batch.

        kmax_pooling(M, 2)          # the 2 largest of each row of M, in order
    """
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    cdef int dim = _dim_index("kmax_pooling", n, d)
    k = _as_size(k, "kmax_pooling")
    if not 1 <= k <= n.d[dim]:
        raise ValueError(f"kmax_pooling: k={k} must be in [1, {n.d[dim]}] (dimension {dim} of "
                         f"{_dimstr(n)})")
    cdef int64_t dims[4]
    cdef int a
    for a in range(MAX_DIMS):
        dims[a] = k if a == dim else n.d[a]
    cdef Attrs attr = _axis_attr(dim)
    return _wrap(_here().add_node(OP_KMAX_POOLING, 1, &e.idx,
                                  _checked_shape("kmax_pooling", n.nd, dims, n.bs), 0, &attr))


def fold_rows(x, nrows=2):
    """Sums of each nrows consecutive rows of a vector or matrix x (R, C): (R / nrows, C),
    row i the sum of rows i*nrows .. i*nrows + nrows - 1 (a vector gives (R / nrows, 1),
    as DyNet); per batch element. A composite: reshape to (nrows, R / nrows, C) and
    sum_dim over dimension 0 (a copy-free reshape and one reduction, as fast as a
    dedicated kernel)."""
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    k = _as_size(nrows, "fold_rows")
    if n.nd > 2 or k < 1 or rows(n) % k != 0:
        raise DimensionError(f"fold_rows: {_dimstr(n)} is not a vector or matrix whose rows "
                             f"split into groups of nrows={k}")
    return sum_dim(reshape(e, (k, rows(n) // k, cols(n))), [0])


def one_hot(d, idx, device=""):
    """A constant vector (d,) with 1 at idx and 0 elsewhere; a list idx makes a batch,
    element b one-hot at idx[b]. An index outside [0, d) is an IndexError (DyNet
    returns zeros). An input, as in DyNet (no gradient)."""
    _cpu_only(device, "one_hot")
    size = _as_size(d, "one_hot", 1)           # (no index fits in a size of 0)
    batched = not isinstance(idx, (int, np.integer))
    _shape_from("one_hot", size, 1)             # within a node's limits, before allocating
    idx = _index_values(idx if batched else [idx], size, "one_hot", "idx")
    _shape_from("one_hot", size, len(idx))
    a = np.zeros((size, len(idx)), dtype=np.float32)
    a[idx, np.arange(len(idx))] = 1.0
    return inputTensor(a if batched else a[:, 0], batched=batched)
