# The DyNet functions of arithmetic: elementwise ops (the API's unary ops are made
# from _elementwise.h here), sums, products, reductions, softmax. Included by
# _core.pyx; uses _expression.pxi and _shapes.pxi.

def nobackprop(x): return _unary(OP_NOBACKPROP, _as_expr(x), 0.0)


# ------------------------------------------- the API's unary elementwise ops ----
# One function per line of AB_UNARY_OPS in _elementwise.h (tanh, exp, elu, ...), made
# here when the module loads: a line there is the whole op.

cdef float _constant_argument(str name, str attr, float default, tuple args, dict kwargs) except? -1:
    """The op's constant A from f(x, A) or f(x, attr=A)."""
    if len(args) + len(kwargs) > 1 or any(k != attr for k in kwargs):
        raise TypeError(f"{name}() takes x and an optional {attr}")
    value = args[0] if args else kwargs.get(attr, default)
    if not _is_number(value):
        raise TypeError(f"{name}: {attr} must be a number, got {type(value).__name__}")
    return _finite(name, attr, value)


cdef object _api_unary(int op, str name, str attr, float default):
    if not attr:
        def function(x):
            return _unary(op, _as_expr(x), 0.0)
        function.__doc__ = f"{name}(x): elementwise {name} (DyNet's dy.{name})."
    else:
        def function(x, *args, **kwargs):
            return _unary(op, _as_expr(x), _constant_argument(name, attr, default, args, kwargs))
        function.__doc__ = f"{name}(x, {attr}={default:g}): elementwise {name} (DyNet's dy.{name})."
    function.__name__ = function.__qualname__ = name
    function.__module__ = "autobatch"
    return function


cdef int _k_api
ELEMENTWISE_FUNCTIONS = {}
for _k_api in range(AB_UNARY_API_COUNT):
    _name = ab_unary_api[_k_api].name.decode()
    _attr = ab_unary_api[_k_api].attr.decode()
    ELEMENTWISE_FUNCTIONS[_name] = _api_unary(N_FIXED_OPS + _k_api, _name,
                                              "" if _attr == "_" else _attr,
                                              ab_unary_api[_k_api].attr_default)
globals().update(ELEMENTWISE_FUNCTIONS)


def dropout(Expression x, float p):
    """Zero each element with probability p, scale the rest by 1/(1-p); p = 1 zeroes
    everything (DyNet computes 0 * 1/0 = NaN there)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    return _unary(OP_DROPOUT, x, p)


def noise(Expression x, float stddev):
    """x plus Gaussian noise of standard deviation stddev."""
    if not _finite("noise", "stddev", stddev) >= 0:
        raise ValueError(f"noise: stddev must be >= 0, got {stddev}")
    return _unary(OP_NOISE, x, stddev)


def cmult(x, y): return _binary(OP_CMULT, _as_expr(x), _as_expr(y))
def cdiv(x, y): return _binary(OP_CDIV, _as_expr(x), _as_expr(y))


def bmax(x, y):
    """Elementwise max(x_i, y_i) (DyNet's bmax); the gradient goes to x where x > y,
    else to y (ties: y). x and y broadcast as in cmult, batch included (DyNet needs
    equal shapes); the output has the broadcast shape. Nodes of equal shapes batch into
    one elementwise loop."""
    return _binary(OP_BMAX, _as_expr(x), _as_expr(y))


def bmin(x, y):
    """Elementwise min(x_i, y_i) (DyNet's bmin); the gradient goes to x where x < y,
    else to y (ties: y). Shapes and batching as bmax."""
    return _binary(OP_BMIN, _as_expr(x), _as_expr(y))


def emax(xs):
    """Elementwise max over the list xs (DyNet's emax): a chain of bmax, so on ties the
    gradient goes to the earliest expression, as in DyNet. Shapes as bmax; its bmax
    nodes batch with any others."""
    xs = list(xs)
    if not xs:
        raise ValueError("emax: needs at least one expression")
    cdef Expression c = _as_expr(xs[0])
    _check(c)
    for x in xs[1:]:
        c = _binary(OP_BMAX, _as_expr(x), c)
    return c


def flip_gradient(x):
    """The identity forward; backward passes the negated gradient (DyNet's
    flip_gradient, for adversarial training). It is scale_gradient(x, -1): any shape
    and batch, batched as that elementwise op."""
    return ELEMENTWISE_FUNCTIONS["scale_gradient"](x, -1.0)


# DyNet's gradient modes of round, ceil, floor and argmax: no gradient, or the identity's
cdef dict _GRADIENT_MODES = {"zero_gradient": 0.0, "straight_through_gradient": 1.0}


cdef float _gradient_mode(int op, object gradient_mode) except -1:
    """The op's straight_through attribute: 0 (zero_gradient) or 1."""
    mode = _GRADIENT_MODES.get(gradient_mode) if isinstance(gradient_mode, str) else None
    if mode is None:
        raise ValueError(f"Unknown gradient mode for {OP_NAMES[op]}: {gradient_mode!r} "
                         f"(zero_gradient or straight_through_gradient)")
    return mode


cdef Expression _rounding(int op, object x, object gradient_mode):
    return _unary(op, _as_expr(x), _gradient_mode(op, gradient_mode))


def round(x, gradient_mode):
    """Elementwise rounding to the nearest integer, halves away from zero (DyNet's
    round). gradient_mode: "zero_gradient" (none flows back) or
    "straight_through_gradient" (the gradient passes unchanged). Any shape and batch,
    kept; nodes of one shape and mode batch into one elementwise loop.

        y = dy.round(x, "straight_through_gradient")   # quantise, train through it
    """
    return _rounding(OP_ROUND, x, gradient_mode)


def ceil(x, gradient_mode):
    """Elementwise ceiling (DyNet's ceil); gradient_mode, shapes and batching as round."""
    return _rounding(OP_CEIL, x, gradient_mode)


def floor(x, gradient_mode):
    """Elementwise floor (DyNet's floor); gradient_mode, shapes and batching as round."""
    return _rounding(OP_FLOOR, x, gradient_mode)


def argmax(x, gradient_mode):
    """The one-hot vector of the position of the largest element of the vector x
    (DyNet's argmax): y[i] = 1 where x[i] is largest, the first such i on ties, 0
    elsewhere. x: shape (n,), any batch; y: (n,), the same batch, one one-hot per batch
    element. As in DyNet, only vectors: a matrix or tensor raises DimensionError (use
    reshape first to take the argmax of all elements).
    gradient_mode: "zero_gradient" (the gradient stops here: none reaches x) or
    "straight_through_gradient" (the straight-through estimator: the gradient passes
    to x unchanged, as the identity's). Nodes of one length and mode batch into one
    kernel call.

        y = dy.argmax(scores, "straight_through_gradient")   # hard choice, trainable
    """
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    cdef Attrs at = _scalar_attr(_gradient_mode(OP_ARGMAX, gradient_mode))
    if n.nd != 1:
        raise DimensionError(f"argmax: only vectors are supported (as in DyNet), got shape "
                             f"{_dimstr(n)}")
    return _wrap(_here().add_node(OP_ARGMAX, 1, &e.idx, _like(n, n.bs), 0, &at))


def colwise_add(x, y):
    """x + y with the column vector y ((m,) or (m, 1)) added to every column of the
    matrix x (m, n)."""
    cdef Expression ex = _as_expr(x), eb = _as_expr(y)
    cdef Node* a = _check(ex)
    cdef Node* b = _check(eb)
    if a.nd != 2 or b.nd > 2 or b.d[0] != a.d[0] or b.d[1] != 1:
        raise DimensionError(f"colwise_add: x of shape {_dimstr(a)} must be a matrix and bias "
                             f"of shape {_dimstr(b)} a column of as many rows")
    return _binary(OP_ADD, ex, eb)


def pow(x, y):
    """Elementwise x ** y; y may be a one-element expression (or a number), and
    broadcasts as in cmult; x may be a number (2 ** e)."""
    if _is_number(y):
        y = constant((1,), y)
    if _is_number(x):
        x = constant((1,), x)
    return _binary(OP_POW, _as_expr(x), _as_expr(y))


def esum(xs): return _nary_same(OP_ESUM, xs, True)
def average(xs): return _nary_same(OP_AVERAGE, xs, True)
def logsumexp(xs): return _nary_same(OP_LOGSUMEXP, xs, False)


def affine_transform(exprs):
    """exprs = [b, W1, x1, W2, x2, ...]: b + W1 x1 + W2 x2 + ..."""
    xs = list(exprs)
    if len(xs) % 2 != 1:
        raise ValueError("affine_transform: expects [b, W1, x1, W2, x2, ...] (an odd number)")
    if len(xs) == 1:
        return _as_expr(xs[0])
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "affine_transform", &ids)
    cdef Node* b = &_here().nodes[ids[0]]
    cdef Node* w
    cdef Node* x
    cdef int k, nrows = -1, ncols = -1, bs = b.bs, x_nd = _here().nodes[ids[2]].nd
    try:
        for k in range(1, n, 2):
            w = &_here().nodes[ids[k]]
            x = &_here().nodes[ids[k + 1]]
            if w.nd > 2 or x.nd > 2 or cols(w) != rows(x) or \
                    (nrows >= 0 and (rows(w) != nrows or cols(x) != ncols)):
                raise DimensionError(f"affine_transform: term {k // 2} multiplies {_dimstr(w)} by "
                                     f"{_dimstr(x)}")
            nrows, ncols = rows(w), cols(x)
            bs = _merge_bs("affine_transform", _merge_bs("affine_transform", bs, w.bs), x.bs)
        if b.nd > 2 or rows(b) != nrows or not (cols(b) == 1 or cols(b) == ncols):
            raise DimensionError(f"affine_transform: bias of shape {_dimstr(b)} does not fit a "
                                 f"({nrows}, {ncols}) result")
        return _wrap(_here().add_node(OP_AFFINE, n, ids,
                                  _product_shape("affine_transform", nrows, ncols, x_nd, bs)))
    finally:
        free(ids)


cdef Expression _reduce(int op, Expression x):
    cdef Node* n = _check(x)
    return _wrap(_here().add_node(op, 1, &x.idx, _matrix_shape(OP_NAMES[op], 1, 1, n.bs)))


def sum_elems(Expression x): return _reduce(OP_SUM_ELEMS, x)
def mean_elems(Expression x): return _reduce(OP_MEAN_ELEMS, x)
def squared_norm(Expression x): return _reduce(OP_SQUARED_NORM, x)
def l2_norm(Expression x): return _reduce(OP_L2_NORM, x)


cdef Expression _pair_reduce(int op, Expression x, Expression y):
    cdef Node* a = _check(x)
    cdef Node* b = _check(y)
    name = OP_NAMES[op]
    if a.nd != b.nd or not _same_dims(a, b):     # DyNet: trailing 1s count here
        raise DimensionError(f"{name}: shapes {_dimstr(a)} and {_dimstr(b)} do not match")
    cdef int bs = _bs2(name, a, b)
    cdef int32_t argv[2]
    argv[0] = x.idx
    argv[1] = y.idx
    return _wrap(_here().add_node(op, 2, argv, _matrix_shape(name, 1, 1, bs)))


def dot_product(Expression x, Expression y): return _pair_reduce(OP_DOT, x, y)
def squared_distance(Expression x, Expression y): return _pair_reduce(OP_SQUARED_DISTANCE, x, y)
def binary_log_loss(Expression x, Expression y): return _pair_reduce(OP_BINARY_LOG_LOSS, x, y)


def sum_batches(Expression x):
    cdef Node* n = _check(x)
    return _wrap(_here().add_node(OP_SUM_BATCHES, 1, &x.idx, _like(n, 1)))


cdef Expression _extreme_dim(int op, Expression x, object d):
    cdef Node* n = _check(x)
    name = OP_NAMES[op]
    cdef int k = _dim_index(name, n, d)
    cdef Attrs at = _axis_attr(k)
    return _wrap(_here().add_node(op, 1, &x.idx, _without_dims(name, n, 1 << k, n.bs), 0, &at))


def max_dim(Expression x, d=0):
    """The largest element along dimension d, which is removed (DyNet's max_dim); the
    gradient goes to the first largest."""
    return _extreme_dim(OP_MAX_DIM, x, d)


def min_dim(Expression x, d=0):
    """The smallest element along dimension d, which is removed."""
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
    n = _as_index(n, name)
    if n < 0:
        raise ValueError(f"{name}: n must be >= 0, got {n}")
    cdef int64_t count = node.bs if b else 1
    for a in range(node.nd):
        if mask & (1 << a):
            count *= node.d[a]
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.reduce.mask = mask
    at.reduce.scale = 1.0 if op == OP_SUM_DIM else 1.0 / (n if n > 0 else count)
    return _wrap(_here().add_node(op, 1, &x.idx, _without_dims(name, node, mask, 1 if b else node.bs),
                              0, &at))


def sum_dim(Expression x, d, b=False, n=0):
    """Sum over the dimensions in the list d (removed from the shape), and over the batch
    when b; n is unused (DyNet's signature)."""
    return _sum_dims(OP_SUM_DIM, x, d, b, n)


def mean_dim(Expression x, d, b=False, n=0):
    """Mean over the dimensions in the list d (removed from the shape), and over the
    batch when b; n > 0 divides the sum by n instead of the number of elements
    (masking)."""
    return _sum_dims(OP_MEAN_DIM, x, d, b, n)


def softmax(Expression x, d=0):
    """Softmax along dimension d: d=0 normalises each column, d=1 each row (any
    dimension of an N-d value; DyNet stops at matrices)."""
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
