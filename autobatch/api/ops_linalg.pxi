# DyNet's linear algebra and tensor ops: inverse, logdet, trace_of_product, the 3-d
# contractions, sparsemax and constrained_softmax, kmh_ngram, filter1d_narrow,
# circ_conv and circ_corr. Included by api/core.pyx; uses api/expression.pxi and api/shapes.pxi.

cdef Shape _shape2(str op, int64_t d0, int64_t d1, int64_t bs) except *:
    """A matrix shape, (d0, 1) included (DyNet's ops that make a matrix keep 2 dims)."""
    cdef int64_t d[2]
    d[0] = d0
    d[1] = d1
    return _checked_shape(op, 2, d, bs)


cdef Node* _square(str op, Expression e) except NULL:
    cdef Node* n = _check(e)
    if n.nd > 2 or rows(n) != cols(n):
        raise DimensionError(f"{op}: needs a square matrix, got {_dimstr(n)}")
    return n


def inverse(x):
    """The inverse of the square matrix x (n, n), per batch element. Computed in float64
    through LAPACK's LU (getrf/getri) and rounded to float32. A singular matrix gives
    NaN, as DyNet gives NaN/inf (renew_cg(check_validity=True) raises on it).
    Backward: dX -= Y^T dY Y^T. Nodes of one shape run as one batch (a loop over
    their matrices).

        inverse(dy.inputTensor([[2.0, 0.0], [0.0, 4.0]]))    # [[0.5, 0], [0, 0.25]]
    """
    cdef Expression e = _as_expr(x)
    cdef Node* n = _square("inverse", e)
    return _wrap(_here().add_node(OP_INVERSE, 1, &e.idx, _like(n, n.bs)))


def logdet(x):
    """log(det x) of the square matrix x, (1,) per batch element: float64 LU through
    LAPACK. As DyNet: -inf for a singular matrix, NaN for a negative determinant.
    Backward: dX += g X^-T (kept from forward). Nodes of one shape run as one batch."""
    cdef Expression e = _as_expr(x)
    cdef Node* n = _square("logdet", e)
    return _wrap(_here().add_node(OP_LOGDET, 1, &e.idx, _matrix_shape("logdet", 1, 1, n.bs)))


def trace_of_product(x, y):
    """Tr(x y^T) = the sum of x * y over all elements, for two vectors or matrices of
    the same shape: (1,) per batch element (a batch of 1 repeats). A composite: it is
    dot_product (one node, the same kernel) after DyNet's shape check."""
    cdef Expression a = _as_expr(x), b = _as_expr(y)
    cdef ComputationGraph cg = _here()
    _check_args(cg, a, b)   # before any Node*: see _check_args
    cdef Node* na = _node(cg, a)
    cdef Node* nb = _node(cg, b)
    if na.nd > 2 or nb.nd > 2:
        raise DimensionError(f"trace_of_product: needs vectors or matrices, got {_dimstr(na)} "
                             f"and {_dimstr(nb)}")
    return dot_product(a, b)


cdef int _vector_rows(str op, Node* n, str what, int want=-1) except -1:
    """Rows of a vector argument ((r,) or (r, 1)), checked against want (if >= 0)."""
    if cols(n) != 1 or (want >= 0 and rows(n) != want):
        raise DimensionError(f"{op}: {what} must be a vector" + ("" if want < 0 else f" of {want}")
                             + f", got {_dimstr(n)}")
    return rows(n)


cdef Expression _ops_node(int op, list args, Shape shape):
    """A node of op over the expressions args (their batches checked by the caller)."""
    cdef int32_t argv[4]
    cdef int k
    for k in range(len(args)):
        argv[k] = (<Expression>args[k]).idx
    return _wrap(_here().add_node(op, len(args), argv, shape))


cdef int _merged_batch(str op, list args) except -1:
    cdef int bs = 1
    for e in args:
        bs = _merge_bs(op, bs, _check(<Expression>e).bs)
    return bs


cdef Expression _contract(str op, int opid, object x, list vectors, object bias):
    cdef Expression ex = _as_expr(x)
    cdef Node* nx = _check(ex)
    if nx.nd != 3:
        raise DimensionError(f"{op}: x must be a 3-d tensor, got {_dimstr(nx)}")
    cdef int I = nx.d[0], J = nx.d[1], K = nx.d[2]
    args = [ex] + [_as_expr(v) for v in vectors]
    _vector_rows(op, _check(<Expression>args[1]), "y", K)
    if len(vectors) == 2:
        _vector_rows(op, _check(<Expression>args[2]), "z", J)
    cdef Node* nb
    cdef bint matrix = len(vectors) == 1         # contract3d_1d: (I, J); _1d_1d: (I,)
    if bias is not None:
        args.append(_as_expr(bias))
        nb = _check(<Expression>args[len(args) - 1])
        if nb.d[0] != I or (nb.nd != 2 or nb.d[1] != J if matrix else nb.nd != 1):
            raise DimensionError(f"{op}: the bias has shape {_dimstr(nb)}, the result "
                                 + (f"({I}, {J})" if matrix else f"({I},)"))
    cdef int bs = _merged_batch(op, args)
    return _ops_node(opid, args, _shape2(op, I, J, bs) if matrix else _matrix_shape(op, I, 1, bs))


def contract3d_1d(x, y):
    """z_ij = sum_k x_ijk y_k: a 3-d tensor x (I, J, K) and a vector y (K,) give (I, J)
    (always 2-d, as DyNet). Per batch element (a batch of 1 repeats). x is shared by
    identity, as matmul's W: the nodes of a batch have the same x (a parameter, say)
    and their y's are multiplied by it in one gemm; nodes with other x's batch apart.

        W = pc.add_parameters((4, 5, 3))
        scores = [dy.contract3d_1d(W, h) for h in states]     # one sgemm for all
    """
    return _contract("contract3d_1d", OP_CONTRACT3D_1D, x, [y], None)


def contract3d_1d_bias(x, y, b):
    """contract3d_1d(x, y) + b, b of shape (I, J) (DyNet's ``contract3d_1d_bias``). Per
    batch element; batches as contract3d_1d (x shared, the products of all nodes in one
    gemm), the bias added per node."""
    return _contract("contract3d_1d", OP_CONTRACT3D_1D, x, [y], b)


def contract3d_1d_1d(x, y, z):
    """t_i = sum_jk x_ijk y_k z_j: x (I, J, K), y (K,), z (J,) give (I,) (contract3d_1d
    then a matrix-vector product). Per batch element; DyNet refuses batches. Batches
    as contract3d_1d: x shared, x y of all nodes in one gemm."""
    return _contract("contract3d_1d_1d", OP_CONTRACT3D_1D_1D, x, [y, z], None)


def contract3d_1d_1d_bias(x, y, z, b):
    """contract3d_1d_1d(x, y, z) + b, b of shape (I,) (DyNet's ``contract3d_1d_1d_bias``).
    Per batch element; batches as contract3d_1d_1d, the bias added per node."""
    return _contract("contract3d_1d_1d", OP_CONTRACT3D_1D_1D, x, [y, z], b)


def sparsemax(x):
    """Sparsemax of a vector (Martins and Astudillo 2016): the Euclidean projection of x
    onto the probability simplex, max(x - tau, 0) summing to 1; most entries are
    exactly 0 and get no gradient. Each batch element on its own (DyNet refuses
    batches); nodes of one shape run as one batch. Computed on x - max(x), so inputs
    far from 0 keep the mass; an x holding NaN or +inf gives NaN everywhere (and NaN
    gradients), a -inf entry 0.

        sparsemax(dy.inputVector([0.5, 1.2, -0.3, 1.0]))     # [0, 0.6, 0, 0.4]
    """
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    _vector_rows("sparsemax", n, "x")
    return _wrap(_here().add_node(OP_SPARSEMAX, 1, &e.idx, _like(n, n.bs)))


def constrained_softmax(x, y):
    """Softmax of the scores x under the upper bounds y (Martins and Kreutzer 2017):
    entries whose probability would exceed their bound are capped at it and the rest
    share the remaining mass as a softmax does. Vectors of one size; per batch element
    (a batch of 1 repeats; DyNet refuses batches). The bounds must leave some mass
    (sum of y > 1), as in DyNet. Nodes of one shape run as one batch."""
    cdef Expression a = _as_expr(x), b = _as_expr(y)
    cdef Node* na = _check(a)
    cdef int r = _vector_rows("constrained_softmax", na, "x")
    _vector_rows("constrained_softmax", _check(b), "y", r)
    cdef int bs = _merged_batch("constrained_softmax", [a, b])
    na = _check(a)
    return _ops_node(OP_CONSTRAINED_SOFTMAX, [a, b], _like(na, bs))


def kmh_ngram(x, v):
    """Sums of v consecutive columns of the matrix x (R, C): (R, C - v + 1), column c the
    sum of columns c .. c + v - 1. Per batch element; nodes with the same shapes (so
    the same v) run as one batch."""
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    k = _as_size(v, "kmh_ngram")
    if n.nd != 2 or not 1 <= k <= cols(n):
        raise DimensionError(f"kmh_ngram: needs a matrix with at least v={k} >= 1 columns, "
                             f"got {_dimstr(n)}")
    return _wrap(_here().add_node(OP_KMH_NGRAM, 1, &e.idx,
                                  _shape2("kmh_ngram", rows(n), cols(n) - k + 1, n.bs)))


def filter1d_narrow(x, y):
    """Narrow 1-d filtering of the matrix x (R, C) (a column per position) with the
    filters y (R, W, F) (or (R, W): F = 1): (F, C - W + 1), entry (f, c) the sum of
    x[:, c:c+W] * y[:, :, f] (a correlation: the filter is not flipped, as DyNet).
    Per batch element; one gemv per output column. Nodes of the same shapes run as
    one batch (the filters need not be the same node)."""
    cdef Expression a = _as_expr(x), b = _as_expr(y)
    cdef ComputationGraph cg = _here()
    _check_args(cg, a, b)   # before any Node*: see _check_args
    cdef Node* nx = _node(cg, a)
    cdef Node* nf = _node(cg, b)
    if nx.nd != 2 or nf.nd not in (2, 3) or rows(nx) != rows(nf) or nf.d[1] > nx.d[1]:
        raise DimensionError(f"filter1d_narrow: x {_dimstr(nx)} must be a matrix (R, C) and the "
                             f"filters {_dimstr(nf)} (R, W) or (R, W, F) with W <= C")
    cdef int F = nf.d[2], oc = nx.d[1] - nf.d[1] + 1
    cdef int bs = _merged_batch("filter1d_narrow", [a, b])
    return _ops_node(OP_FILTER1D_NARROW, [a, b], _shape2("filter1d_narrow", F, oc, bs))


cdef Expression _circular(int op, object u, object v):
    cdef Expression a = _as_expr(u), b = _as_expr(v)
    cdef ComputationGraph cg = _here()
    _check_args(cg, a, b)   # before any Node*: see _check_args
    cdef Node* na = _node(cg, a)
    cdef Node* nb = _node(cg, b)
    name = OP_NAMES[op]
    if na.nd != 1 or nb.nd != 1 or rows(na) != rows(nb):
        raise DimensionError(f"{name}: needs two vectors of one size, got {_dimstr(na)} and "
                             f"{_dimstr(nb)}")
    cdef int bs = _merged_batch(name, [a, b])
    return _ops_node(op, [a, b], _like(na, bs))


def circ_conv(u, v):
    """Circular convolution of two vectors of size n: y_k = sum_i u_i v_((k - i) mod n).
    Per batch element (a batch of 1 repeats; DyNet refuses batches); nodes of one
    size run as one batch."""
    return _circular(OP_CIRC_CONV, u, v)


def circ_corr(u, v):
    """Circular correlation of two vectors of size n: y_k = sum_i u_i v_((i + k) mod n).
    Per batch element (a batch of 1 repeats; DyNet refuses batches); nodes of one
    size run as one batch."""
    return _circular(OP_CIRC_CORR, u, v)
