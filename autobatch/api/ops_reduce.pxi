# The DyNet functions that reduce: sums, means and norms of elements, products that
# give one number, reductions along dimensions and over the batch, softmax and
# log_softmax. Included by api/core.pyx; uses api/expression.pxi and api/shapes.pxi (and
# api/ops_losses.pxi for log_softmax(restrict=...)).

cdef Expression _reduce(int op, Expression x):
    cdef Node* n = _check(x)
    if op == OP_MEAN_ELEMS and n.size == 0:
        _no_mean(OP_NAMES[op], n)
    return _wrap(_here().add_node(op, 1, &x.idx, _matrix_shape(OP_NAMES[op], 1, 1, n.bs)))


def sum_elems(Expression x):
    """The sum of all elements of x (DyNet's ``dy.sum_elems(x)``).

    Shape: (1,) per batch element: the batch is kept (``sum_batches`` sums over it).

    Batching: the sum_elems nodes of one input shape ready together run as one loop.

    Example::

        total = dy.sum_elems(dy.cmult(mask, losses))
    """
    return _reduce(OP_SUM_ELEMS, x)


def mean_elems(Expression x):
    """The mean of all elements of x (DyNet's ``dy.mean_elems(x)``).

    Shape: (1,) per batch element (the batch is kept).

    Batching: the mean_elems nodes of one input shape ready together run as one loop.

    Example::

        m = dy.mean_elems(x)
    """
    return _reduce(OP_MEAN_ELEMS, x)


def squared_norm(Expression x):
    """The sum of the squares of x's elements (DyNet's ``dy.squared_norm(x)``).

    Shape: (1,) per batch element (the batch is kept).

    Batching: the squared_norm nodes of one input shape ready together run as one loop.

    Example::

        l2 = dy.squared_norm(W_expr) * 1e-4     # weight decay as a loss term
    """
    return _reduce(OP_SQUARED_NORM, x)


def l2_norm(Expression x):
    """The Euclidean norm sqrt(sum x**2) of x's elements (DyNet's ``dy.l2_norm(x)``).

    Shape: (1,) per batch element (the batch is kept).

    Batching: the l2_norm nodes of one input shape ready together run as one loop.

    Example::

        n = dy.l2_norm(h)
    """
    return _reduce(OP_L2_NORM, x)


cdef Expression _pair_reduce(int op, Expression x, Expression y):
    cdef ComputationGraph cg = _here()
    _check_args(cg, x, y)   # before any Node*: see _check_args
    cdef Node* a = _node(cg, x)
    cdef Node* b = _node(cg, y)
    name = OP_NAMES[op]
    if a.nd != b.nd or not _same_dims(a, b):     # DyNet: trailing 1s count here
        raise DimensionError(f"{name}: shapes {_dimstr(a)} and {_dimstr(b)} do not match")
    cdef int bs = _bs2(name, a, b)
    cdef int32_t argv[2]
    argv[0] = x.idx
    argv[1] = y.idx
    return _wrap(_here().add_node(op, 2, argv, _matrix_shape(name, 1, 1, bs)))


def dot_product(Expression x, Expression y):
    """The dot product sum_i x[i] * y[i] of two expressions of the same shape (DyNet's ``dy.dot_product(x, y)``).

    Shape: (1,) per batch element; batch sizes equal or 1 (broadcast).

    Batching: the dot_product nodes of one shape ready together run as one loop.

    Example::

        score = dy.dot_product(query, key)
    """
    return _pair_reduce(OP_DOT, x, y)


def squared_distance(Expression x, Expression y):
    """sum_i (x[i] - y[i])**2 over two expressions of the same shape (DyNet's ``dy.squared_distance(x, y)``).

    Shape: (1,) per batch element; batch sizes equal or 1 (broadcast).

    Batching: the squared_distance nodes of one shape ready together run as one loop.

    Example::

        loss = dy.squared_distance(prediction, dy.inputVector(target))
    """
    return _pair_reduce(OP_SQUARED_DISTANCE, x, y)


def binary_log_loss(Expression x, Expression y):
    """The binary cross-entropy -sum_i (y[i] log x[i] + (1 - y[i]) log(1 - x[i])) of
    probabilities x against targets y of the same shape (DyNet's ``dy.binary_log_loss(x, y)``).

    Shape: (1,) per batch element; batch sizes equal or 1 (broadcast).

    Batching: the binary_log_loss nodes of one shape ready together run as one loop.

    Example::

        loss = dy.binary_log_loss(dy.logistic(score), dy.scalarInput(1.0))
    """
    return _pair_reduce(OP_BINARY_LOG_LOSS, x, y)


def sum_batches(Expression x):
    """The sum over the batch dimension (DyNet's ``dy.sum_batches(x)``): shape x's shape,
    batch size 1. How a hand-batched loss becomes one number; an unbatched x stays as it is.

    Batching: the sum_batches nodes of one shape and batch size ready together run as one
    loop.

    Example::

        loss = dy.sum_batches(dy.pickneglogsoftmax_batch(scores, labels))
    """
    cdef Node* n = _check(x)
    return _wrap(_here().add_node(OP_SUM_BATCHES, 1, &x.idx, _like(n, 1)))


cdef int _no_mean(str name, Node* n) except -1:
    # DyNet gives NaN (0 / 0); a clear error instead, as numpy warns
    raise DimensionError(f"{name}: the mean of no elements (a value of shape {_dimstr(n)}) "
                         f"is not defined")


cdef Expression _extreme_dim(int op, Expression x, object d):
    cdef Node* n = _check(x)
    name = OP_NAMES[op]
    cdef int k = _dim_index(name, n, d)
    if n.d[k] == 0:
        # no element to take (DyNet returns -inf or +inf; numpy refuses)
        raise DimensionError(f"{name}: dimension {k} of {_dimstr(n)} is empty: it has no "
                             f"{'largest' if op == OP_MAX_DIM else 'smallest'} element")
    cdef Attrs at = _axis_attr(k)
    return _wrap(_here().add_node(op, 1, &x.idx, _without_dims(name, n, 1 << k, n.bs), 0, &at))


def max_dim(Expression x, d=0):
    """The largest element along dimension ``d`` (DyNet's ``dy.max_dim(x, d=0)``), which is
    removed from the shape: (rows, cols) with d=0 gives (cols,). Per batch element (the
    batch is kept). The gradient goes to the first largest element.

    Batching: the max_dim nodes of one shape and ``d`` ready together run as one loop.

    Example::

        pooled = dy.max_dim(dy.concatenate_cols(hs), d=1)    # max pooling over time
    """
    return _extreme_dim(OP_MAX_DIM, x, d)


def min_dim(Expression x, d=0):
    """The smallest element along dimension ``d`` (DyNet's ``dy.min_dim(x, d=0)``), which is
    removed from the shape; per batch element. The gradient goes to the first smallest.

    Batching: the min_dim nodes of one shape and ``d`` ready together run as one loop.

    Example::

        worst = dy.min_dim(scores)
    """
    return _extreme_dim(OP_MIN_DIM, x, d)


cdef Expression _sum_dims(int op, Expression x, object d, object b, object n):
    """sum_dim / mean_dim: over the dimensions in the list d, and the batch if b."""
    cdef Node* node = _check(x)
    name = OP_NAMES[op]
    if isinstance(d, (int, np.integer)):
        d = [d]
    cdef int mask = 0, k, a
    for v in d:
        k = _dim_index(name, node, v)
        if mask & (1 << k):
            raise DimensionError(f"{name}: dimension {k} is listed twice in d={list(d)}")
        mask |= 1 << k
    if b:
        mask |= 1 << MAX_DIMS
    if mask == 0:
        raise DimensionError(f"{name}: nothing to reduce: give dimensions in d or b=True")
    n = _as_size(n, name + ": n")
    cdef int64_t count = node.bs if b else 1
    for a in range(node.nd):
        if mask & (1 << a):
            count *= node.d[a]
    if op == OP_MEAN_DIM and count == 0 and n == 0:
        _no_mean(name, node)
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.reduce.mask = mask
    at.reduce.scale = 1.0 if op == OP_SUM_DIM else 1.0 / (n if n > 0 else count)
    return _wrap(_here().add_node(op, 1, &x.idx, _without_dims(name, node, mask, 1 if b else node.bs),
                              0, &at))


def sum_dim(Expression x, d, b=False, n=0):
    """The sum over the dimensions listed in ``d`` (removed from the shape), and over the batch
    when ``b`` is true (DyNet's ``dy.sum_dim(x, d, b=False, n=0)``; ``n`` is unused, as in
    DyNet). Without ``b`` the batch is kept.

    Batching: the sum_dim nodes of one shape, ``d`` and ``b`` ready together run as one loop.

    Example::

        row_sums = dy.sum_dim(M, [1])          # (rows, cols) -> (rows,)
    """
    return _sum_dims(OP_SUM_DIM, x, d, b, n)


def mean_dim(Expression x, d, b=False, n=0):
    """The mean over the dimensions listed in ``d`` (removed from the shape), and over the batch
    when ``b`` is true (DyNet's ``dy.mean_dim(x, d, b, n=0)``); ``n > 0`` divides the sum by
    ``n`` instead of the number of elements (for masked averages). Without ``b`` the batch
    is kept.

    Batching: the mean_dim nodes of one shape, ``d``, ``b`` and ``n`` ready together run as
    one loop.

    Example::

        mean_over_time = dy.mean_dim(dy.concatenate_cols(hs), [1])
    """
    return _sum_dims(OP_MEAN_DIM, x, d, b, n)


def softmax(Expression x, d=0):
    """Softmax along dimension ``d`` (DyNet's ``dy.softmax(x, d=0)``): ``d=0`` normalises each
    column, ``d=1`` each row; any dimension of an N-d value (DyNet stops at matrices).

    Shape: x's shape and batch size; each batch element is normalised on its own.
    Batching: the softmax nodes of one shape and ``d`` ready together run as one kernel.

    Example::

        attention = dy.softmax(dy.transpose(H) * q)
    """
    cdef Node* n = _check(x)
    cdef Attrs at = _axis_attr(_dim_index("softmax", n, d))
    return _wrap(_here().add_node(OP_SOFTMAX, 1, &x.idx, _like(n, n.bs), 0, &at))


def log_softmax(x, restrict=None):
    """Log of the softmax of each column (dimension 0), as DyNet. restrict: a list of
    rows; the softmax is then over those rows only and the others are -inf (their
    gradient 0), DyNet's restricted log softmax (one row alone gives 0). DyNet takes
    a vector there; here every column of every batch element is restricted alike."""
    cdef Expression e = _as_expr(x)
    if restrict is not None:
        return _restricted_log_softmax(e, restrict)
    cdef Node* n = _check(e)
    cdef Attrs at = _axis_attr(0)
    return _wrap(_here().add_node(OP_LOG_SOFTMAX, 1, &e.idx, _like(n, n.bs), 0, &at))
