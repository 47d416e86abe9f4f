# The DyNet functions of arithmetic: elementwise ops (the API's unary ops are made
# from kernels/elementwise.h here), dropout and noise, max/min and rounding, sums of lists,
# affine_transform (reductions and softmax are in api/ops_reduce.pxi). Included by
# api/core.pyx; uses api/expression.pxi and api/shapes.pxi.

def nobackprop(x):
    """x in the forward pass; no gradient flows back through it (DyNet's ``dy.nobackprop(x)``).

    Shape: x's shape and batch size.

    Batching: the nobackprop nodes of one shape ready together are one copy loop.

    Example::

        target = dy.nobackprop(teacher_scores)    # train the student only
    """
    return _unary(OP_NOBACKPROP, _as_expr(x), 0.0)


# ------------------------------------------- the API's unary elementwise ops ----
# One function per line of AB_UNARY_OPS in kernels/elementwise.h (tanh, exp, elu, ...), made
# here when the module loads: a line there is the whole op.

cdef float _constant_argument(str name, str attr, float default, tuple args, dict kwargs) except? -1:
    """The op's constant A from f(x, A) or f(x, attr=A)."""
    if len(args) + len(kwargs) > 1 or (kwargs and attr not in kwargs):
        raise TypeError(f"{name}() takes x and an optional {attr}")
    value = args[0] if args else kwargs.get(attr, default)
    if not _is_number(value):
        raise TypeError(f"{name}: {attr} must be a number, got {type(value).__name__}")
    return _finite(name, attr, value)


def _math_text(bytes c):
    """A formula of kernels/elementwise.h as a reader writes it: expf(X) -> exp(X), 1.0f -> 1.0."""
    text = c.decode()
    text = re.sub(r"\b(?:ab_fast_|ab_)(\w+)\(", r"\1(", text)        # our helpers: their math name
    text = re.sub(r"\b([a-z0-9]+?)f\(", r"\1(", text)                  # the float versions of libm
    text = re.sub(r"(\d)f\b", r"\1", text)                            # float literals
    return " ".join(text.split())


cdef str _api_unary_doc(str name, str attr, float default, const ab_unary_info* info):
    """The docstring of a generated elementwise function, from its kernels/elementwise.h line."""
    sig = f"{name}(x)" if not attr else f"{name}(x, {attr}={default:g})"
    constant = "" if not attr else f" (A = ``{attr}``, default {default:g})"
    return (
        f"{sig}\n\n"
        f"Elementwise ``{name}`` (DyNet's ``dy.{name}``): every element X of x becomes\n"
        f"``Y = {_math_text(info.fwd_text)}``{constant};\n"
        f"the derivative is ``dY/dX = {_math_text(info.deriv_text)}``.\n\n"
        f"x: an Expression of any shape (one to four dimensions) and any batch size; the\n"
        f"result has the same shape and batch size.\n\n"
        f"Batching: the {name} nodes of one signature (same shape and batch size"
        f"{', same ' + attr if attr else ''})\n"
        f"that are ready together run as one vectorised loop over all their elements (one\n"
        f"call when their inputs lie contiguous in memory).\n\n"
        f"Example::\n\n"
        f"    h = dy.{name}(W * x + b)      # one loop for the {name} of every instance\n")


cdef object _api_unary(int op, str name, str attr, float default, const ab_unary_info* info):
    if not attr:
        def function(x):
            return _unary(op, _as_expr(x), 0.0)
        params = [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    else:
        def function(x, *args, **kwargs):
            return _unary(op, _as_expr(x), _constant_argument(name, attr, default, args, kwargs))
        params = [inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                  inspect.Parameter(attr, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)]
    function.__doc__ = _api_unary_doc(name, attr, default, info)
    function.__signature__ = inspect.Signature(params)   # what help(), Sphinx and stubtest show
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
                                              ab_unary_api[_k_api].attr_default, &ab_unary_api[_k_api])
globals().update(ELEMENTWISE_FUNCTIONS)


def dropout(Expression x, float p):
    """Inverted dropout: each element is zeroed with probability ``p`` and the others are
    scaled by 1/(1-p), so that nothing needs scaling at test time (DyNet's
    ``dy.dropout(x, p)``); ``p`` in [0, 1]: p = 1 zeroes everything (DyNet computes
    0 * 1/0 = NaN there).

    Shape: x's shape and batch size. The mask of each element is drawn from (the graph's seed,
    the node, the element), not in execution order, so it is the same under every strategy.

    Batching: the dropout nodes of one shape and ``p`` ready together run as one loop.

    Example::

        h = dy.dropout(h, 0.3)      # training only: leave it out at test time
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    return _unary(OP_DROPOUT, x, p)


def noise(Expression x, float stddev):
    """x plus Gaussian noise of standard deviation ``stddev`` (>= 0), drawn per element from
    (the graph's seed, the node, the element) (DyNet's ``dy.noise(x, stddev)``).

    Shape: x's shape and batch size.

    Batching: the noise nodes of one shape and ``stddev`` ready together run as one loop.

    Example::

        x = dy.noise(x, 0.1)
    """
    if not _finite("noise", "stddev", stddev) >= 0:
        raise ValueError(f"noise: stddev must be >= 0, got {stddev}")
    return _unary(OP_NOISE, x, stddev)


def cmult(x, y):
    """Elementwise product x * y (DyNet's ``dy.cmult(x, y)``).

    Shape: along every dimension, the batch included, the arguments have the same size or
    one of them 1 (DyNet's broadcasting); the result has the larger size.

    Batching: the cmult nodes of one signature (shapes, batch sizes) ready together run as one
    vectorised loop.

    Example::

        c = dy.cmult(i, g) + dy.cmult(f, c_prev)
    """
    return _binary(OP_CMULT, _as_expr(x), _as_expr(y))


def cdiv(x, y):
    """Elementwise quotient x / y (DyNet's ``dy.cdiv(x, y)``).

    Shape: DyNet's broadcasting, as ``cmult`` (every dimension and the batch: equal sizes or 1).

    Batching: the cdiv nodes of one signature ready together run as one vectorised loop.

    Example::

        p = dy.cdiv(e, dy.sum_elems(e))
    """
    return _binary(OP_CDIV, _as_expr(x), _as_expr(y))


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
    """x + y with the column vector ``y`` (rows,) or (rows, 1) added to every column of
    the matrix ``x`` (rows, cols) (DyNet's ``dy.colwise_add(x, y)``).

    Shape: x's shape; the batch sizes are equal or 1. Batching: as ``+``, one vectorised
    loop for the nodes of one signature.

    Example::

        H = dy.colwise_add(W * X, b)    # X: one column per word
    """
    cdef Expression ex = _as_expr(x), eb = _as_expr(y)
    cdef ComputationGraph cg = _here()
    _check_args(cg, ex, eb)   # before any Node*: see _check_args
    cdef Node* a = _node(cg, ex)
    cdef Node* b = _node(cg, eb)
    if a.nd != 2 or b.nd > 2 or b.d[0] != a.d[0] or b.d[1] != 1:
        raise DimensionError(f"colwise_add: x of shape {_dimstr(a)} must be a matrix and bias "
                             f"of shape {_dimstr(b)} a column of as many rows")
    return _binary(OP_ADD, ex, eb)


def pow(x, y):
    """Elementwise x ** y; ``y`` may be a one-element expression or a number, and
    broadcasts as in cmult; ``x`` may be a number (``2 ** e``) (DyNet's ``dy.pow(x, y)``).

    Shape: x's shape; batch sizes equal or 1.

    Batching: the pow nodes of one signature ready together run as one vectorised loop.

    Example::

        y = dy.pow(x, dy.scalarInput(3.0))
    """
    if _is_number(y):
        y = constant((1,), y)
    if _is_number(x):
        x = constant((1,), x)
    return _binary(OP_POW, _as_expr(x), _as_expr(y))


def esum(xs):
    """The sum of a list of expressions of one shape (DyNet's ``dy.esum(xs)``).

    Shape: the arguments' shape; their batch sizes are equal or 1 (broadcast). Batching:
    the esum nodes with the same number of arguments and shapes ready together run as
    one loop. It is how per-instance losses become a minibatch loss.

    Example::

        loss = dy.esum([dy.pickneglogsoftmax(W * h + b, y) for h, y in zip(hs, ys)])
    """
    return _nary_same(OP_ESUM, xs, True)


def average(xs):
    """The mean of a list of expressions of one shape (DyNet's ``dy.average(xs)``).

    Shape: the arguments' shape; batch sizes equal or 1. Batching: as ``esum``.

    Example::

        sentence = dy.average([dy.lookup(E, w) for w in words])   # a bag of words
    """
    return _nary_same(OP_AVERAGE, xs, True)


def logsumexp(xs):
    """log(sum_k exp(xs[k])) elementwise over a list of expressions of the same shape
    (DyNet's ``dy.logsumexp(xs)``), computed stably (the maximum taken out first).

    Shape: the arguments' shape and batch size (all equal). Batching: the logsumexp nodes
    with the same number of arguments and shapes ready together run as one loop.

    Example::

        log_z = dy.logsumexp([score_a, score_b, score_c])
    """
    return _nary_same(OP_LOGSUMEXP, xs, False)


def affine_transform(exprs):
    """``b + W1 * x1 + W2 * x2 + ...`` from the list ``exprs = [b, W1, x1, W2, x2, ...]`` (DyNet's
    ``dy.affine_transform(exprs)``).

    Shape: every ``Wk * xk`` has the same (rows, cols); ``b`` is (rows,) or (rows, cols). Batch
    sizes: equal or 1 across all terms.

    Batching: nodes with the same weights (by identity) and shapes run as one gemm per
    weight over all their columns, then one bias loop: the products of all instances of
    a time step cost one sgemm each.

    Example::

        h = dy.tanh(dy.affine_transform([b, Wx, x, Wh, h_prev]))
    """
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
