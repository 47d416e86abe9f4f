# DyNet's statistics along dimensions and the normalisations built on them: moments,
# standard deviations, mean_batches, cumsum, logsumexp_dim, layer_norm, weight_norm.
# Included by api/core.pyx; uses api/expression.pxi, api/shapes.pxi and api/ops_math.pxi. The
# moments are composites of the engine's elementwise powers and mean_dim/mean_elems;
# the standard deviations and layer_norm are one node each.

def cumsum(x, d=0):
    """Cumulative sum along dimension d: y_i = x_0 + ... + x_i (DyNet's cumsum); the
    shape (batch included) is kept. Any of 1 to 4 dimensions (DyNet: 3)."""
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    cdef Attrs at = _axis_attr(_dim_index("cumsum", n, d))
    return _wrap(_here().add_node(OP_CUMSUM, 1, &e.idx, _like(n, n.bs), 0, &at))


def logsumexp_dim(x, d=0):
    """log(sum_i exp(x_i)) along dimension d, which is removed (DyNet's logsumexp_dim);
    computed stably (shifted by the maximum). The batch is kept. Any of 1 to 4
    dimensions (DyNet: 2). Its gradient is the softmax along d."""
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    cdef int k = _dim_index("logsumexp_dim", n, d)
    cdef Attrs at = _axis_attr(k)
    return _wrap(_here().add_node(OP_LOGSUMEXP_DIM, 1, &e.idx,
                                  _without_dims("logsumexp_dim", n, 1 << k, n.bs), 0, &at))


cdef object _order(object r, str name):
    r = _as_function_index(r, name)
    if r < 1:
        raise ValueError(f"{name}: the order r of a moment must be >= 1, got {r}")
    return r


cdef Expression _power(Expression x, object r):
    """x ** r elementwise for an integer r >= 1 (square and cube exactly)."""
    if r == 1:
        return x
    if r == 2:
        return ELEMENTWISE_FUNCTIONS["square"](x)
    if r == 3:
        return ELEMENTWISE_FUNCTIONS["cube"](x)
    return pow(x, float(r))


cdef list _reduced_dims(str name, Expression x, object d, object b):
    """The list d of dimensions a composite reduces, checked with its own name (the
    mean_dim inside it would name itself)."""
    cdef Node* node = _check(x)
    if isinstance(d, (int, np.integer)):
        d = [d]
    d = [_dim_index(name, node, v) for v in d]
    if len(set(d)) != len(d):
        raise DimensionError(f"{name}: a dimension is listed twice in d={d}")
    if not d and not b:
        raise DimensionError(f"{name}: nothing to reduce: give dimensions in d or b=True")
    return d


def moment_elems(x, r):
    """The r-th moment (1/n) sum_i x_i^r of all elements of each batch element, shape
    (1,) (DyNet's moment_elems). A composite: mean_elems of x^r."""
    cdef Expression e = _as_expr(x)
    _check(e)
    return mean_elems(_power(e, _order(r, "moment_elems")))


def moment_dim(x, d, r, b=False, n=0):
    """The r-th moment (1/n) sum x^r over the dimensions in the list d, and the batch if
    b (DyNet's moment_dim); those dimensions are removed. n > 0 replaces the divisor
    (masking). A composite: mean_dim of x^r."""
    cdef Expression e = _as_expr(x)
    d = _reduced_dims("moment_dim", e, d, b)
    return mean_dim(_power(e, _order(r, "moment_dim")), d, b, n)


def moment_batches(x, r):
    """The r-th moment over the batch: (1/B) sum_b x_b^r, batch size 1 (DyNet's
    moment_batches). A composite: mean_dim(x^r, [], b=True)."""
    cdef Expression e = _as_expr(x)
    _check(e)
    return mean_dim(_power(e, _order(r, "moment_batches")), [], True)


def mean_batches(x):
    """The mean over the batch, batch size 1, the shape kept (DyNet's mean_batches);
    mean_dim(x, [], b=True)."""
    return mean_dim(_as_expr(x), [], True)


cdef Expression _std(Expression x, object d, bint b, object n, str name):
    """One std_dim node: sqrt(mean((x - mean)^2)) over the dimensions d (and the batch
    if b), both means dividing by n if n > 0, else by the number of elements."""
    d = _reduced_dims(name, x, d, b)
    n = _as_size(n, name + ": n")
    cdef Node* node = _check(x)
    cdef int mask = 1 << MAX_DIMS if b else 0, a
    cdef int64_t count = node.bs if b else 1
    for a in d:
        mask |= 1 << a
        count *= node.d[a]
    if count == 0 and n == 0:
        _no_mean(name, node)
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.reduce.mask = mask
    at.reduce.scale = 1.0 / (n if n > 0 else count)
    return _wrap(_here().add_node(OP_STD_DIM, 1, &x.idx, _without_dims(name, node, mask, 1 if b else node.bs),
                                  0, &at))


def std_dim(x, d, b=False, n=0):
    """Standard deviation sqrt((1/n) sum (x - mu)^2) over the dimensions in the list d,
    and the batch if b (DyNet's std_dim): the population one; those dimensions are
    removed (the batch becomes 1 if b). n > 0 replaces the divisor of both means (as
    documented by DyNet; dynet38's Python binding ignores it). One node; nodes of one
    shape, d, b and n batch together. Where the deviation is 0 its gradient is taken
    as 0 (DyNet's is NaN).

        sd = dy.std_dim(X, [1])      # X (features, time): each feature's std over time
    """
    return _std(_as_expr(x), d, b, n, "std_dim")


def std_elems(x):
    """Standard deviation of all elements of each batch element, shape (1,) per batch
    element (DyNet's std_elems); std_dim over every dimension."""
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    return _std(e, list(range(n.nd)), False, 0, "std_elems")


def std_batches(x):
    """Standard deviation over the batch, batch size 1, the shape kept (DyNet's
    std_batches); std_dim(x, [], b=True)."""
    return _std(_as_expr(x), [], True, 0, "std_batches")


def layer_norm(x, g, b):
    """Layer normalisation (Ba et al., 2016): g * (x - mu) / (sigma + 1e-8) + b, with mu
    and sigma the mean and the (population) standard deviation of all the elements of
    each batch element of x (DyNet's layer_norm, which composes mean_elems, std_elems,
    cdiv and cmult; here one node). g and b have x's shape; a batch of 1 (a parameter)
    is shared by every batch element. Nodes batch whatever their g and b (they are
    stacked arguments), e.g. every time step's layer_norm of an RNN in one kernel.

        h = dy.layer_norm(W * x, gain, bias)     # gain, bias: Parameters of W * x's shape
    """
    cdef Expression ex = _as_expr(x), eg = _as_expr(g), eb = _as_expr(b)
    cdef ComputationGraph cg = _here()
    _check_args3(cg, ex, eg, eb)   # before any Node*: see _check_args
    cdef Node* nx = _node(cg, ex)
    cdef Node* ng = _node(cg, eg)
    cdef Node* nb = _node(cg, eb)
    if not (_same_dims(nx, ng) and _same_dims(nx, nb)):
        raise DimensionError(f"layer_norm: g {_dimstr(ng)} and b {_dimstr(nb)} must have the "
                             f"shape of x {_dimstr(nx)}")
    cdef int bs = _merge_bs("layer_norm", _bs2("layer_norm", nx, ng), nb.bs)
    cdef int32_t argv[3]
    argv[0] = ex.idx
    argv[1] = eg.idx
    argv[2] = eb.idx
    return _wrap(_here().add_node(OP_LAYER_NORM, 3, argv, _like(nx, bs)))


def weight_norm(w, g):
    """Weight normalisation (Salimans and Kingma, 2016): g * w / ||w||, ||w|| the L2
    norm of all of w's elements (per batch element) and g one number (DyNet's
    weight_norm). A composite: cmult(cdiv(w, l2_norm(w)), g)."""
    cdef Expression ew = _as_expr(w), eg = _as_expr(g)
    _check(ew)
    cdef Node* ng = _check(eg)
    if elems(ng) != 1:
        raise DimensionError(f"weight_norm: the gain g must have one element, got shape "
                             f"{_dimstr(ng)}")
    return _binary(OP_CMULT, _binary(OP_CDIV, ew, l2_norm(ew)), eg)
