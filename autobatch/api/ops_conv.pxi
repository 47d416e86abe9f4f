# DyNet's image ops: conv2d, conv2d_bias, maxpooling2d. Layout is DyNet's: images
# (H, W, C) column-major (a 2-d x is one channel), filters (KH, KW, C_in, C_out).
# Included by api/core.pyx.

cdef tuple _int_pair(object v, str op, str what):
    """Two sizes of 1 or more (a list or tuple), as DyNet's stride and ksize."""
    try:
        a, b = v
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {what} must be two ints, got {v!r}") from None
    return _as_size(a, op, 1), _as_size(b, op, 1)


cdef int _geometry_error(int code, str op, Node* x, object window) except -1:
    if code == GEOM_FILTER_TOO_BIG:
        raise DimensionError(f"{op}: a {window} window does not fit in an image of "
                             f"{_dimstr(x)} without padding (is_valid=True)")
    raise DimensionError(f"{op}: image {_dimstr(x)} with a {window} window is too large")


cdef Expression _conv(object x, object f, object b, object stride, object is_valid, str op):
    cdef Expression ex = _as_expr(x), ef = _as_expr(f)
    cdef Expression eb = None if b is None else _as_expr(b)
    cdef ComputationGraph cg = _here()
    _check_args3(cg, ex, ef, eb)   # before any Node*: see _check_args
    cdef Node* nx = _node(cg, ex)
    cdef Node* nf = _node(cg, ef)
    if nx.nd > 3:
        raise DimensionError(f"{op}: the input must be an image (H, W, C), got {_dimstr(nx)}")
    if nf.nd != 4 or nf.bs != 1:
        raise DimensionError(f"{op}: filters are (KH, KW, C_in, C_out) without a batch, "
                             f"got {_dimstr(nf)}")
    if nf.d[2] != nx.d[2]:
        raise DimensionError(f"{op}: the image has {nx.d[2]} channels, the filters expect "
                             f"{nf.d[2]}")
    sh, sw = _int_pair(stride, op, "stride")
    cdef ConvGeom g
    cdef int code = conv_geom(&g, nx.d[0], nx.d[1], nx.d[2], nf.d[0], nf.d[1], nf.d[3],
                              sh, sw, bool(is_valid))
    if code != GEOM_OK:
        _geometry_error(code, op, nx, (nf.d[0], nf.d[1]))
    cdef int32_t argv[3]
    argv[0] = ex.idx
    argv[1] = ef.idx
    cdef Node* nb
    if eb is not None:
        nb = _node(cg, eb)
        if nb.nd != 1 or nb.d[0] != nf.d[3] or nb.bs != 1:
            raise DimensionError(f"{op}: the bias must be ({nf.d[3]},) without a batch, "
                                 f"got {_dimstr(nb)}")
        argv[2] = eb.idx
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.conv.stride[0] = sh
    at.conv.stride[1] = sw
    at.conv.is_valid = bool(is_valid)
    cdef int64_t d[3]
    d[0], d[1], d[2] = g.OH, g.OW, g.C_out
    return _wrap(_here().add_node(OP_CONV2D, 2 if b is None else 3, argv,
                              _checked_shape(op, 3, d, nx.bs), 0, &at))


def conv2d(x, f, stride, is_valid=True):
    """2-d cross-correlation of images ``x`` (H, W, C_in) with filters ``f`` (KH, KW, C_in,
    C_out) (DyNet's ``dy.conv2d(x, f, stride, is_valid=True)``): ``stride`` is (rows,
    columns); ``is_valid`` means no padding, else SAME (output ceil(H / stride), the
    padding split with the odd one at the bottom/right), as DyNet. A 2-d x is one channel.

    Shape: (OH, OW, C_out) per batch element; the batch is kept. Batching: every image of
    every conv2d node with the same filter (by identity), shapes, stride and padding is
    unfolded into one matrix, and the whole batch is one sgemm.

    Example::

        h = dy.rectify(dy.conv2d(image, F, stride=(1, 1), is_valid=False))
    """
    return _conv(x, f, None, stride, is_valid, "conv2d")


def conv2d_bias(x, f, b, stride, is_valid=True):
    """``conv2d`` plus a bias per output channel, ``b`` of shape (C_out,) (DyNet's
    ``dy.conv2d_bias(x, f, b, stride, is_valid=True)``). Shape: (OH, OW, C_out) per batch
    element.

    Batching: as conv2d (one sgemm for every image of the nodes with the same filter and
    bias), the bias added in the same kernel.

    Example::

        h = dy.rectify(dy.conv2d_bias(image, F, b, (1, 1)))
    """
    return _conv(x, f, b, stride, is_valid, "conv2d_bias")


def maxpooling2d(x, ksize, stride, is_valid=True):
    """The maximum over ``ksize`` (rows, columns) windows of each channel of images ``x``
    (H, W, C), moved by ``stride`` (DyNet's ``dy.maxpooling2d(x, ksize, stride,
    is_valid=True)``); SAME pads with -FLT_MAX (DyNet's padding and output sizes). The
    gradient goes to the first maximum of each window.

    Shape: (OH, OW, C) per batch element; the batch is kept. Batching: the maxpooling2d
    nodes of one shape, ksize, stride and padding ready together run as one kernel.

    Example::

        pooled = dy.maxpooling2d(h, (2, 2), (2, 2))
    """
    cdef Expression ex = _as_expr(x)
    cdef Node* nx = _check(ex)
    if nx.nd > 3:
        raise DimensionError(f"maxpooling2d: the input must be an image (H, W, C), got {_dimstr(nx)}")
    kh, kw = _int_pair(ksize, "maxpooling2d", "ksize")
    sh, sw = _int_pair(stride, "maxpooling2d", "stride")
    cdef ConvGeom g
    cdef int code = pool_geom(&g, nx.d[0], nx.d[1], nx.d[2], kh, kw, sh, sw, bool(is_valid))
    if code != GEOM_OK:
        _geometry_error(code, "maxpooling2d", nx, (kh, kw))
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.pool.ksize[0] = kh
    at.pool.ksize[1] = kw
    at.pool.stride[0] = sh
    at.pool.stride[1] = sw
    at.pool.is_valid = bool(is_valid)
    cdef int64_t d[3]
    d[0], d[1], d[2] = g.OH, g.OW, g.C
    return _wrap(_here().add_node(OP_MAXPOOL2D, 1, &ex.idx,
                              _checked_shape("maxpooling2d", max(nx.nd, 2), d, nx.bs), 0, &at))
