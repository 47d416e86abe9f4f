# DyNet's losses and distances that api/ops_math.pxi and api/ops_structure.pxi do not have:
# pairwise_rank_loss, poisson_loss, l1_distance, huber_distance, hinge_dim, and the
# restricted log softmax of log_softmax(x, restrict=...). Included by api/core.pyx.

def pairwise_rank_loss(x, y, m=1.0):
    """max(0, m - x_i + y_i) elementwise (DyNet's pairwise_rank_loss, where x and y are
    scores of shape (1,) or (1, n)); here any two values of the same shape, a batch of 1
    broadcasting. A composite: rectify((y - x) + m)."""
    cdef float margin = _finite("pairwise_rank_loss", "m", m)
    cdef Expression ex = _as_expr(x), ey = _as_expr(y)
    cdef ComputationGraph cg = _here()
    _check_args(cg, ex, ey)   # before any Node*: see _check_args
    cdef Node* a = _node(cg, ex)
    cdef Node* b = _node(cg, ey)
    if a.nd != b.nd or not _same_dims(a, b):
        raise DimensionError(f"pairwise_rank_loss: shapes {_dimstr(a)} and {_dimstr(b)} "
                             f"do not match")
    _bs2("pairwise_rank_loss", a, b)
    return ELEMENTWISE_FUNCTIONS["rectify"](_binary(OP_SUB, ey, ex) + margin)


def poisson_loss(log_lambda, x):
    """-log P(x; lambda) of the count x under a Poisson distribution of rate
    lambda = exp(log_lambda): exp(log_lambda) - x log_lambda + lgamma(x + 1) (DyNet's
    poisson_loss). log_lambda has one element (per batch element); x is an int >= 0.
    (DyNet's gradient ignores the incoming one; this one is the exact gradient.)"""
    cdef Expression e = _as_expr(log_lambda)
    cdef Node* n = _check(e)
    if elems(n) != 1:
        raise DimensionError(f"poisson_loss: log_lambda must have one element, got shape "
                             f"{_dimstr(n)}")
    k = _as_function_index(x, "poisson_loss")
    if not 0 <= k < 16777216:
        raise ValueError(f"poisson_loss: x must be a count in [0, 2^24), got {k}")
    return _unary(OP_POISSON_LOSS, e, <float>k)


cdef Expression _distance(int op, object x, object y, float c):
    cdef Expression ex = _as_expr(x), ey = _as_expr(y)
    cdef ComputationGraph cg = _here()
    _check_args(cg, ex, ey)   # before any Node*: see _check_args
    cdef Node* a = _node(cg, ex)
    cdef Node* b = _node(cg, ey)
    name = OP_NAMES[op]
    if a.nd != b.nd or not _same_dims(a, b):
        raise DimensionError(f"{name}: shapes {_dimstr(a)} and {_dimstr(b)} do not match")
    cdef int bs = _bs2(name, a, b)
    cdef int32_t argv[2]
    argv[0] = ex.idx
    argv[1] = ey.idx
    cdef Attrs at = _scalar_attr(c)
    return _wrap(_here().add_node(op, 2, argv, _matrix_shape(name, 1, 1, bs), 0, &at))


def l1_distance(x, y):
    """``sum_i |x_i - y_i|`` over all elements, shape (1,) per batch element (DyNet's
    l1_distance); x and y have the same shape, a batch of 1 broadcasts. The gradient of
    ``|0|`` is 0. Nodes of equal shapes batch into one kernel."""
    return _distance(OP_L1_DISTANCE, x, y, 0.0)


def huber_distance(x, y, c=1.345):
    """``sum_i L_c(x_i - y_i)`` with Huber's ``L_c(r) = r^2 / 2`` for ``|r| <= c``, else
    ``c (|r| - c / 2)`` (DyNet's huber_distance): shape (1,) per batch element; shapes and
    batching as l1_distance."""
    cdef float cc = _finite("huber_distance", "c", c)
    if cc <= 0:
        raise ValueError(f"huber_distance: c must be > 0, got {c}")
    return _distance(OP_HUBER_DISTANCE, x, y, cc)


def hinge_dim(x, v, d=0, m=1.0):
    """Hinge losses of a matrix x along dimension d (DyNet's hinge_dim): for d=0, column
    i's loss is sum over rows r != v[i] of max(0, x[r, i] + m - x[v[i], i]) (d=1: the
    same for rows), a vector of x.d[1 - d] losses per batch element. v is a list of
    indices (one per column for d=0), shared by the batch, or a list of such lists, one
    per batch element. A composite: the columns are spread over the batch (reshape)
    and go through one hinge node."""
    cdef float margin = _finite("hinge_dim", "m", m)
    if margin < 0:
        raise ValueError(f"hinge_dim: the margin m must be >= 0 (as DyNet's), got {m}")
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    k = _as_function_index(d, "hinge_dim")
    if n.nd != 2 or k not in (0, 1):
        raise DimensionError(f"hinge_dim: needs a matrix and d = 0 or 1, got shape "
                             f"{_dimstr(n)} and d={k}")
    cdef int lines = n.d[1 - k], length = n.d[k], bs = n.bs
    per_batch = list(v)
    if per_batch and isinstance(per_batch[0], (list, tuple, np.ndarray)):
        if len(per_batch) != bs:
            raise ValueError(f"hinge_dim: {len(per_batch)} index lists for a batch of {bs}")
    else:
        per_batch = [per_batch] * bs
    idx = []
    for ids in per_batch:
        ids = [_as_function_index(i, "hinge_dim") for i in ids]
        if len(ids) != lines:
            raise ValueError(f"hinge_dim: {len(ids)} indices for {lines} "
                             f"{'columns' if k == 0 else 'rows'} of {_dimstr(n)}")
        idx += ids
    cdef Expression lines_first = transpose(e) if k == 1 else e
    flat = reshape(lines_first, (length,), batch_size=lines * bs)
    return reshape(hinge(flat, idx, margin), (lines,), batch_size=bs)


cdef Expression _restricted_log_softmax(Expression x, object restrict):
    cdef Node* n = _check(x)
    if n.nd > 2:
        raise DimensionError(f"log_softmax(restrict=...): needs a vector or a matrix, got "
                             f"{_dimstr(n)}")
    rows_ = [_as_function_index(i, "log_softmax") for i in restrict]
    if not rows_:
        raise ValueError("log_softmax: restrict must list at least one row")
    if len(set(rows_)) != len(rows_):
        raise ValueError(f"log_softmax: restrict lists a row twice: {rows_}")
    for i in rows_:
        if not 0 <= i < n.d[0]:
            raise IndexError(f"log_softmax: restricted row {i} out of range [0, {n.d[0]})")
    cdef int32_t at = _here().add_ints([len(rows_)] + rows_, len(rows_) + 1)
    n = &_here().nodes[x.idx]
    return _wrap(_here().add_node(OP_RESTRICTED_LOG_SOFTMAX, 1, &x.idx, _like(n, n.bs), at))
