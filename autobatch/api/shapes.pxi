# Shapes and attributes of new nodes: every node's shape goes through _checked_shape
# (sizes are Python ints checked in 64 bits, so nothing wraps around or is truncated),
# and every size a user passes (a shape's entries, a batch size, a builder's dims)
# through _as_size. A dimension may be 0, as in DyNet: an empty value has no elements.
# Included by api/core.pyx; reads nodes only through the Node* it is given.

cdef int64_t MAX_ELEMS = 2147483647     # floats in one node (its size is an int32)


cdef tuple _dims(int nd, const int64_t* d):
    # (a generator expression in _checked_shape would make it allocate a closure on
    # every call, the valid ones included)
    return tuple([d[k] for k in range(nd)])


cdef Shape _checked_shape(str op, int nd, const int64_t* d, int64_t bs) except *:
    cdef Shape s
    cdef int a
    cdef int64_t total = bs
    if not 1 <= nd <= MAX_DIMS:
        raise DimensionError(f"{op}: values have 1 to {MAX_DIMS} dimensions, got {nd}")
    if bs < 1:
        raise DimensionError(f"{op}: batch size must be positive, got {bs}")
    for a in range(nd):
        if d[a] < 0:
            raise DimensionError(f"{op}: dimensions must be 0 or more, got {_dims(nd, d)}")
        total *= d[a] if d[a] < MAX_ELEMS else MAX_ELEMS
        if total >= MAX_ELEMS:
            raise DimensionError(
                f"{op}: a value of {_dims(nd, d)} x batch {bs} elements is "
                f"larger than one node can hold (2^31 floats)")
    s.nd = nd
    for a in range(MAX_DIMS):
        s.d[a] = <int32_t>d[a] if a < nd else 1
    s.bs = <int32_t>bs
    return s


cdef Shape _with_batch(str op, Shape s, int64_t bs) except *:
    """Shape s with bs batch elements, checked."""
    cdef int64_t d[4]
    cdef int a
    for a in range(MAX_DIMS):
        d[a] = s.d[a]
    return _checked_shape(op, s.nd, d, bs)


cdef Shape _matrix_shape(str op, int64_t d0, int64_t d1, int64_t bs) except *:
    """A vector (d1 == 1) or a matrix, as the 2-D ops make them."""
    cdef int64_t d[2]
    d[0] = d0
    d[1] = d1
    return _checked_shape(op, 1 if d1 == 1 else 2, d, bs)


cdef Shape _product_shape(str op, int64_t r, int64_t c, int x_nd, int64_t bs) except *:
    """The shape of W x, as DyNet: (r,) for a vector x, else (r, c) (a (k, 1) x gives
    (r, 1))."""
    cdef int64_t d[2]
    d[0] = r
    d[1] = c
    return _checked_shape(op, 1 if x_nd == 1 else 2, d, bs)


cdef Shape _shape_from(str op, object dims, int64_t bs) except *:
    """A shape from a user's tuple (or one size): 1 to MAX_DIMS sizes (_as_size)."""
    cdef int64_t d[4]
    cdef int a
    if isinstance(dims, (int, float, np.integer, np.floating)):
        dims = (dims,)
    try:
        dims = tuple(dims)
    except TypeError:
        raise TypeError(f"{op}: a shape is an int or a tuple of ints, "
                        f"got {type(dims).__name__}") from None
    if not 1 <= len(dims) <= MAX_DIMS:
        raise DimensionError(f"{op}: shapes have 1 to {MAX_DIMS} dimensions, got {dims}")
    for a in range(len(dims)):
        v = _as_size(dims[a], op)
        d[a] = v if v < MAX_ELEMS else MAX_ELEMS
    return _checked_shape(op, len(dims), d, bs)


cdef object _as_size(object v, str op, int least=0):
    """A size the user gave, as an int >= least (0 for a dimension, 1 for a batch size or
    a count of layers). A float that is a whole number (48.0) is taken: code written for
    DyNet computes sizes with / (DyNet truncates any float). Any other float (2.5, nan)
    or a bool is a TypeError: truncating silently would hide a wrong size."""
    if type(v) is not int:
        v = _whole_number(v, op)
    if v < least:
        raise DimensionError(f"{op}: sizes must be {least} or more, got {v}")
    return v


cdef object _whole_number(object v, str op):
    # (apart from _as_size, whose common case, an int, stays a type test and a comparison)
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{op}: sizes must be ints, got {v!r}")
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, (float, np.floating)):
        raise TypeError(f"{op}: sizes must be whole numbers, got {v!r} (not truncated)")
    raise TypeError(f"{op}: sizes must be ints, got {v!r}")


def size_argument(v, where, least=0):
    """_as_size for the layers above the API (parameter collections, builders), so that
    every size in the library follows one rule."""
    return _as_size(v, where, least)


cdef inline Shape _like(Node* n, int32_t bs) noexcept:
    """n's shape with bs batch elements (bs must be >= 1)."""
    cdef Shape s
    cdef int a
    s.nd = n.nd
    for a in range(MAX_DIMS):
        s.d[a] = n.d[a]
    s.bs = bs
    return s


cdef inline bint _same_dims(Node* a, Node* b) noexcept:
    return a.d[0] == b.d[0] and a.d[1] == b.d[1] and a.d[2] == b.d[2] and a.d[3] == b.d[3]


cdef inline Attrs _scalar_attr(float value) noexcept:
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.scalar.value = value
    return at


cdef inline Attrs _axis_attr(int dim) noexcept:
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.axis.dim = dim
    return at


cdef int _dim_index(str op, Node* n, object d, str what="d") except -1:
    """A dimension of n: an int in [0, nd)."""
    k = _as_function_index(d, op)
    if not 0 <= k < n.nd:
        raise DimensionError(f"{op}: {what}={k} is not a dimension of a value of shape "
                             f"{_dimstr(n)} (0 to {n.nd - 1})")
    return k


cdef Shape _without_dims(str op, Node* n, int mask, int64_t bs) except *:
    """n's shape without the dimensions in mask (bit k: dimension k), as DyNet's
    delete_dims: the others keep their order; nothing left is (1,)."""
    cdef int64_t d[4]
    cdef int a, nd = 0
    for a in range(n.nd):
        if not mask & (1 << a):
            d[nd] = n.d[a]
            nd += 1
    if nd == 0:
        d[0] = 1
        nd = 1
    return _checked_shape(op, nd, d, bs)


cdef inline int _merge_bs(str op, int bs, int other) except -1:
    """The batch size of an op whose arguments have batch sizes bs and other: equal,
    or one of them is 1 and broadcasts."""
    if bs == other or other == 1:
        return bs
    if bs == 1:
        return other
    raise DimensionError(f"{op}: batch sizes {bs} and {other} do not match")


cdef inline int _bs2(str op, Node* x, Node* y) except -1:
    return _merge_bs(op, x.bs, y.bs)


cdef float _finite(str op, str what, double value) except? -1:
    """A hyperparameter of an op: NaN or an infinity is a ValueError."""
    if value != value or value - value != 0:
        raise ValueError(f"{op}: {what} must be a finite number, got {value}")
    return <float>value
