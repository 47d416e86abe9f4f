# The expression functions of DyNet's API: shape checks, then one node each.
# Included by _core.pyx.

# ---------------------------------------------------- expression functions ----

def parameter(*ps, update=True):
    """Parameters as expressions (one node per parameter per graph)."""
    out = []
    for p in ps:
        if isinstance(p, Parameters):
            out.append((<Parameters>p).expr(update))
        elif isinstance(p, LookupParameters):
            out.append((<LookupParameters>p).expr(update))
        else:
            raise TypeError(f"parameter() takes Parameters, got {type(p).__name__}")
    return out[0] if len(out) == 1 else out


def const_parameter(*ps):
    return parameter(*ps, update=False)


cdef object _as_index(object i, str name):
    """An integer index; floats and other non-integers are refused, not truncated."""
    try:
        return operator.index(i)
    except TypeError:
        raise TypeError(f"{name}: index must be an int, got {type(i).__name__}") from None


def lookup(LookupParameters p not None, index, update=True):
    """Row `index` of a lookup table (no copy: the node reads the table's memory)."""
    cdef long i = _as_index(index, "lookup")
    p._row_check(i)
    cdef bint trained = update and p._updated
    cdef int32_t n = _alias_leaf(p, OP_LOOKUP, p.row_dims,
                                 p.vptr + i * p.row_size,
                                 p.gptr + i * p.row_size if trained else NULL, <int32_t>i)
    if trained:
        p.used[i] = 1
    return _wrap(n)


def lookup_batch(LookupParameters p not None, indices, update=True):
    """Rows as one expression with a batch element per index."""
    idx = [_as_index(i, "lookup_batch") for i in indices]
    if not idx:
        raise ValueError("lookup_batch: needs at least one index")
    for i in idx:
        p._row_check(i)
    cdef Shape shape = _with_batch("lookup_batch", p.row_dims, len(idx))
    cdef bint trained = update and p._updated
    cdef int32_t slot = _cg.add_table(p.vptr, p.gptr if trained else NULL)
    cdef int32_t at = _cg.add_ints([slot] + idx, len(idx) + 1)
    cdef int32_t n = _cg.add_node(OP_LOOKUP_BATCH, 0, NULL, shape, at)
    if trained:
        _cg.nodes[n].flags |= F_NEEDS_GRAD
        for i in idx:
            p.used[i] = 1
    _cg.keepalive.append(p)
    return _wrap(n)


cdef Expression _leaf_from_flat(object flat, Shape shape):
    cdef int32_t i = _cg.add_node(OP_INPUT, 0, NULL, shape)
    cdef float* dst = _cg.leaf_memory(i)
    cdef float[::1] src = flat
    memcpy(dst, &src[0], _cg.nodes[i].size * sizeof(float))
    return _wrap(i)


cdef Expression _filled_leaf(object dim, int64_t batch_size, str op):
    """A new input leaf of a user-given shape whose memory the caller fills."""
    cdef int32_t i = _cg.add_node(OP_INPUT, 0, NULL, _shape_from(op, dim, batch_size))
    _cg.leaf_memory(i)
    return _wrap(i)


cdef int _cpu_only(object device, str where) except -1:
    if device not in (None, "", "CPU", "cpu"):
        raise ValueError(f"{where}: device {device!r}: autobatch runs on the CPU only")
    return 0


def inputTensor(arr, batched=False, device=""):
    """A constant from a numpy array (or nested lists) of 1 to 4 dimensions, kept as
    given (a (3, 1) array stays (3, 1), as in DyNet); with batched=True the last axis
    is the batch. A list of numpy arrays is a batch: one element per array."""
    _cpu_only(device, "inputTensor")
    if isinstance(arr, list) and arr and all(isinstance(v, np.ndarray) for v in arr):
        arr = np.stack(arr, axis=-1)
        batched = True
    a = np.asarray(arr, dtype=np.float32)
    if not np.all(np.isfinite(a)):
        raise ValueError("inputTensor: the input holds NaN or infinity")
    shape = a.shape
    bs = 1
    if batched:
        if a.ndim == 0:
            raise DimensionError("inputTensor(batched=True) needs at least one axis")
        bs = shape[len(shape) - 1]
        shape = shape[:len(shape) - 1]
    if len(shape) == 0:
        shape = (1,)
    if a.size == 0:
        raise DimensionError(f"inputTensor: empty input of shape {a.shape}")
    return _leaf_from_flat(np.ascontiguousarray(a.ravel(order="F")),
                           _shape_from("inputTensor", shape, bs))


def inputVector(v):
    return inputTensor(np.asarray(v, dtype=np.float32).reshape(-1))


def scalarInput(float x):
    return inputTensor(np.array([x], dtype=np.float32))


def inputMatrix(v, d):
    """DyNet's column-major matrix input from a flat list."""
    return inputTensor(np.asarray(v, dtype=np.float32).reshape(tuple(d), order="F"))


def constant(dim, float val, batch_size=1):
    cdef Expression e = _filled_leaf(dim, _as_size(batch_size, "constant"), "constant")
    cdef float* p = _cg.nodes[e.idx].val
    cdef int64_t k
    for k in range(_cg.nodes[e.idx].size):
        p[k] = val
    return e


def zeros(dim, batch_size=1):
    return constant(dim, 0.0, batch_size)


def ones(dim, batch_size=1):
    return constant(dim, 1.0, batch_size)


def random_normal(dim, float mean=0.0, float stddev=1.0, batch_size=1):
    cdef Expression e = _filled_leaf(dim, _as_size(batch_size, "random_normal"), "random_normal")
    cdef float* p = _cg.nodes[e.idx].val
    cdef int64_t k
    for k in range(_cg.nodes[e.idx].size):
        p[k] = mean + stddev * rng_normal(&_cg.rng)
    return e


def random_uniform(dim, float left, float right, batch_size=1):
    cdef Expression e = _filled_leaf(dim, _as_size(batch_size, "random_uniform"), "random_uniform")
    cdef float* p = _cg.nodes[e.idx].val
    cdef int64_t k
    for k in range(_cg.nodes[e.idx].size):
        p[k] = left + (right - left) * rng_uniform(&_cg.rng)
    return e


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
    return value


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
    """Zero each element with probability p, scale the rest by 1/(1-p)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    return _unary(OP_DROPOUT, x, p)


def noise(Expression x, float stddev):
    if stddev < 0:
        raise ValueError(f"noise: stddev must be >= 0, got {stddev}")
    return _unary(OP_NOISE, x, stddev)


def cmult(x, y): return _binary(OP_CMULT, _as_expr(x), _as_expr(y))
def cdiv(x, y): return _binary(OP_CDIV, _as_expr(x), _as_expr(y))


def colwise_add(x, bias):
    """x + bias with the column vector bias added to every column of the matrix x."""
    cdef Expression ex = _as_expr(x), eb = _as_expr(bias)
    cdef Node* a = _check(ex)
    cdef Node* b = _check(eb)
    if a.nd != 2 or b.nd > 2 or b.d[0] != a.d[0] or b.d[1] != 1:
        raise DimensionError(f"colwise_add: x of shape {_dimstr(a)} must be a matrix and bias "
                             f"of shape {_dimstr(b)} a column of as many rows")
    return _binary(OP_ADD, ex, eb)


def pow(x, y):
    """Elementwise x ** y; y may be a one-element expression (or a number)."""
    if _is_number(y):
        y = constant((1,), y)
    return _binary(OP_POW, _as_expr(x), _as_expr(y))


def esum(xs): return _nary_same(OP_ESUM, xs, True)
def average(xs): return _nary_same(OP_AVERAGE, xs, True)
def logsumexp(xs): return _nary_same(OP_LOGSUMEXP, xs, False)


def concatenate_to_batch(xs):
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "concatenate_to_batch", &ids)
    cdef Node* a
    cdef Node* first = &_cg.nodes[ids[0]]
    cdef int k, bs = 0
    try:
        for k in range(n):
            a = &_cg.nodes[ids[k]]
            if not _same_dims(a, first):
                raise DimensionError(f"concatenate_to_batch: argument {k} has shape {_dimstr(a)}, "
                                     f"argument 0 has {_dimstr(first)}")
            bs += a.bs
        return _wrap(_cg.add_node(OP_CONCAT_TO_BATCH, n, ids, _like(first, bs)))
    finally:
        free(ids)


def concatenate(xs, d=0):
    """Concatenate along dimension d. The arguments (padded with 1s) agree on every other
    dimension; the result has the first one's rank, or d + 1 if larger (DyNet's rule);
    a batch of 1 repeats over the others'."""
    d = _as_index(d, "concatenate")
    if not 0 <= d < MAX_DIMS:
        raise DimensionError(f"concatenate: d={d} is not a dimension (0 to {MAX_DIMS - 1})")
    cdef int dd = d
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "concatenate", &ids)
    cdef Node* a
    cdef Node* first = &_cg.nodes[ids[0]]
    cdef int k, i, bs = first.bs
    cdef int64_t total = 0
    cdef int64_t dims[4]
    cdef Shape shape
    cdef Attrs at
    try:
        for k in range(n):
            a = &_cg.nodes[ids[k]]
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
        return _wrap(_cg.add_node(OP_CONCAT, n, ids, shape, 0, &at))
    finally:
        free(ids)


def concatenate_cols(xs):
    return concatenate(xs, 1)


def affine_transform(xs):
    """xs = [b, W1, x1, W2, x2, ...]: b + W1 x1 + W2 x2 + ..."""
    xs = list(xs)
    if len(xs) % 2 != 1:
        raise ValueError("affine_transform: expects [b, W1, x1, W2, x2, ...] (an odd number)")
    if len(xs) == 1:
        return _as_expr(xs[0])
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "affine_transform", &ids)
    cdef Node* b = &_cg.nodes[ids[0]]
    cdef Node* w
    cdef Node* x
    cdef int k, nrows = -1, ncols = -1, bs = b.bs, x_nd = _cg.nodes[ids[2]].nd
    try:
        for k in range(1, n, 2):
            w = &_cg.nodes[ids[k]]
            x = &_cg.nodes[ids[k + 1]]
            if w.nd > 2 or x.nd > 2 or cols(w) != rows(x) or \
                    (nrows >= 0 and (rows(w) != nrows or cols(x) != ncols)):
                raise DimensionError(f"affine_transform: term {k // 2} multiplies {_dimstr(w)} by "
                                     f"{_dimstr(x)}")
            nrows, ncols = rows(w), cols(x)
            bs = _merge_bs("affine_transform", _merge_bs("affine_transform", bs, w.bs), x.bs)
        if b.nd > 2 or rows(b) != nrows or not (cols(b) == 1 or cols(b) == ncols):
            raise DimensionError(f"affine_transform: bias of shape {_dimstr(b)} does not fit a "
                                 f"({nrows}, {ncols}) result")
        return _wrap(_cg.add_node(OP_AFFINE, n, ids,
                                  _product_shape("affine_transform", nrows, ncols, x_nd, bs)))
    finally:
        free(ids)


cdef Expression _reduce(int op, Expression x):
    cdef Node* n = _check(x)
    return _wrap(_cg.add_node(op, 1, &x.idx, _matrix_shape(OP_NAMES[op], 1, 1, n.bs)))


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
    return _wrap(_cg.add_node(op, 2, argv, _matrix_shape(name, 1, 1, bs)))


def dot_product(Expression x, Expression y): return _pair_reduce(OP_DOT, x, y)
def squared_distance(Expression x, Expression y): return _pair_reduce(OP_SQUARED_DISTANCE, x, y)
def binary_log_loss(Expression x, Expression y): return _pair_reduce(OP_BINARY_LOG_LOSS, x, y)


def sum_batches(Expression x):
    cdef Node* n = _check(x)
    return _wrap(_cg.add_node(OP_SUM_BATCHES, 1, &x.idx, _like(n, 1)))


cdef Expression _extreme_dim(int op, Expression x, object d):
    cdef Node* n = _check(x)
    name = OP_NAMES[op]
    cdef int k = _dim_index(name, n, d)
    cdef Attrs at = _axis_attr(k)
    return _wrap(_cg.add_node(op, 1, &x.idx, _without_dims(name, n, 1 << k, n.bs), 0, &at))


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
    return _wrap(_cg.add_node(op, 1, &x.idx, _without_dims(name, node, mask, 1 if b else node.bs),
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
    return _wrap(_cg.add_node(OP_SOFTMAX, 1, &x.idx, _like(n, n.bs), 0, &at))


def log_softmax(Expression x, restrict=None):
    """Log of the softmax of each column (dimension 0), as DyNet."""
    if restrict is not None:
        raise NotImplementedError("log_softmax(restrict=...) is not supported")
    cdef Node* n = _check(x)
    cdef Attrs at = _axis_attr(0)
    return _wrap(_cg.add_node(OP_LOG_SOFTMAX, 1, &x.idx, _like(n, n.bs), 0, &at))


cdef int32_t _index_list(object index, int* bs, int limit, str name) except -1:
    """Store one index per batch element of the result; check the range. *bs is the
    argument's batch size on entry, the result's on return: a list of indices for an
    unbatched argument makes a batch of that many, a single int is repeated."""
    if isinstance(index, (list, tuple, np.ndarray)):
        idx = [_as_index(i, name) for i in index]
        if bs[0] == 1:
            bs[0] = len(idx)
        if len(idx) != bs[0]:
            raise ValueError(f"{name}: {len(idx)} indices for a batch of {bs[0]}")
    else:
        idx = [_as_index(index, name)] * bs[0]
    for i in idx:
        if not 0 <= i < limit:
            raise IndexError(f"{name}: index {i} out of range [0, {limit})")
    return _cg.add_ints(idx, bs[0])


def pickneglogsoftmax(Expression x, v):
    """-log softmax(x)[v]; v is an int or one int per batch element."""
    cdef Node* n = _check(x)
    if n.nd != 1:
        raise DimensionError(f"pickneglogsoftmax: needs a vector, got {_dimstr(n)}")
    cdef int bs = n.bs
    cdef int32_t at = _index_list(v, &bs, rows(n), "pickneglogsoftmax")
    return _wrap(_cg.add_node(OP_PICKNLS, 1, &x.idx, _matrix_shape("pickneglogsoftmax", 1, 1, bs), at))


def pickneglogsoftmax_batch(Expression x, v):
    return pickneglogsoftmax(x, list(v))


def hinge(Expression x, v, float m=1.0):
    cdef Node* n = _check(x)
    if n.nd != 1:
        raise DimensionError(f"hinge: needs a vector, got {_dimstr(n)}")
    cdef int bs = n.bs
    cdef int32_t at = _index_list(v, &bs, rows(n), "hinge")
    cdef Attrs attr
    memset(&attr, 0, sizeof(Attrs))
    attr.hinge.margin = m
    return _wrap(_cg.add_node(OP_HINGE, 1, &x.idx, _matrix_shape("hinge", 1, 1, bs), at, &attr))


def hinge_batch(Expression x, v, float m=1.0):
    return hinge(x, list(v), m)


def pick(Expression e, index=0, dim=0):
    """The slice at `index` along dimension `dim`, which is removed (DyNet's pick; its
    keywords). A list of indices picks one per batch element (pick_batch)."""
    cdef Node* n = _check(e)
    cdef int k = _dim_index("pick", n, dim, "dim")
    cdef int bs = n.bs
    cdef int32_t at = _index_list(index, &bs, n.d[k], "pick")
    n = &_cg.nodes[e.idx]
    cdef Attrs attr = _axis_attr(k)
    return _wrap(_cg.add_node(OP_PICK, 1, &e.idx, _without_dims("pick", n, 1 << k, bs), at, &attr))


def pick_batch(Expression e, indices, dim=0):
    """pick with one index per batch element (an unbatched e makes a batch of them)."""
    return pick(e, list(indices), dim)


def pick_range(Expression x, s, e, d=0):
    """Elements [s, e) along dimension d, which keeps its place with size e - s."""
    s, e = _as_index(s, "pick_range"), _as_index(e, "pick_range")
    cdef Node* n = _check(x)
    cdef int k = _dim_index("pick_range", n, d)
    if not 0 <= s < e <= n.d[k]:
        raise IndexError(f"pick_range: range [{s}, {e}) is not inside [0, {n.d[k]}) "
                         f"(dimension {k} of {_dimstr(n)})")
    cdef Attrs attr = _axis_attr(k)
    cdef int64_t dims[4]
    cdef int a
    for a in range(MAX_DIMS):
        dims[a] = e - s if a == k else n.d[a]
    return _wrap(_cg.add_node(OP_PICK_RANGE, 1, &x.idx, _checked_shape("pick_range", n.nd, dims, n.bs),
                              s, &attr))


def pick_batch_elems(Expression x, indices):
    cdef Node* n = _check(x)
    idx = [_as_index(i, "pick_batch_elems") for i in indices]
    if not idx:
        raise ValueError("pick_batch_elems: needs at least one index")
    for i in idx:
        if not 0 <= i < n.bs:
            raise IndexError(f"pick_batch_elems: batch element {i} out of range [0, {n.bs})")
    cdef int32_t at = _cg.add_ints(idx, len(idx))
    n = &_cg.nodes[x.idx]
    return _wrap(_cg.add_node(OP_PICK_BATCH_ELEMS, 1, &x.idx, _like(n, len(idx)), at))


def pick_batch_elem(Expression x, int i):
    return pick_batch_elems(x, [i])


def transpose(Expression x, dims=[1, 0]):
    """Permute the dimensions: output dimension k is x's dimension dims[k]. x is seen as
    having len(dims) dimensions (padded with 1s, or its trailing 1s dropped): the
    default [1, 0] transposes a matrix, and turns a vector (d,) into a row (1, d)."""
    cdef Node* n = _check(x)
    perm = [_as_index(v, "transpose") for v in dims]
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
    return _wrap(_cg.add_node(OP_TRANSPOSE, 1, &x.idx, _checked_shape("transpose", nd, d, n.bs), 0, &at))


def reshape(Expression x, d, batch_size=1):
    """The same elements (column-major, the batch slowest) in shape d with batch_size
    batch elements, as DyNet: if that does not hold all of x's elements and batch_size
    is 1, every batch element is reshaped to d and the batch kept. So reshape(x, (6,))
    of a (2,) x batch 3 merges the batch, reshape(x, (2,)) keeps it, and the masking
    idiom reshape(mask, (1,), batch_size=n) spreads a vector over a batch."""
    cdef Node* n = _check(x)
    cdef int64_t bs = _as_size(batch_size, "reshape")
    cdef Shape shape = _shape_from("reshape", d, 1)
    cdef int64_t per = elems_of(shape)
    if per * bs == n.size:
        shape.bs = <int32_t>bs
    elif bs == 1 and per == elems(n):
        shape.bs = n.bs
    else:
        raise DimensionError(f"reshape: cannot reshape {_dimstr(n)} to {tuple(d)}"
                             + ("" if bs == 1 else f" x batch {bs}"))
    return _wrap(_cg.add_node(OP_RESHAPE, 1, &x.idx, shape))


# ---------------------------------------------------------- fused LSTM ops ----
# Gate vectors hold blocks of `hidden_dim`: [i, f_1 .. f_k, o, g].

def lstm_gates(Expression pre, int hidden_dim, float forget_bias=0.0):
    """Gate activations of a pre-activation vector of blocks [i, f_1..f_k, o, g]:
    logistic on all blocks but the last (forget blocks get + forget_bias), tanh on g."""
    cdef Node* n = _check(pre)
    if hidden_dim <= 0 or n.nd != 1 or rows(n) % hidden_dim != 0 or rows(n) // hidden_dim < 3:
        raise DimensionError(f"lstm_gates: pre-activations of shape {_dimstr(n)} are not "
                             f"3 or more blocks of {hidden_dim}")
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.gates.hidden = hidden_dim
    at.gates.forget_bias = forget_bias
    return _wrap(_cg.add_node(OP_LSTM_GATES, 1, &pre.idx, _like(n, n.bs), 0, &at))


def lstm_cell(Expression gates, prev_cells=()):
    """Cell update c = i * g + sum_m f_m * prev_cells[m] (gates from lstm_gates with
    len(prev_cells) forget blocks)."""
    cdef Node* g = _check(gates)
    cdef int k = len(prev_cells)
    if g.nd != 1 or rows(g) % (k + 3) != 0:
        raise DimensionError(f"lstm_cell: gates of shape {_dimstr(g)} are not {k + 3} blocks")
    cdef int h = rows(g) // (k + 3)
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect([gates] + list(prev_cells), "lstm_cell", &ids)
    cdef Node* c
    try:
        for m in range(1, n):
            c = &_cg.nodes[ids[m]]
            if rows(c) != h or c.nd != 1 or c.bs != g.bs:
                raise DimensionError(f"lstm_cell: previous cell {m - 1} has shape {_dimstr(c)}, "
                                     f"expected ({h},) with batch {g.bs}")
        return _wrap(_cg.add_node(OP_LSTM_CELL, n, ids, _matrix_shape("lstm_cell", h, 1, g.bs)))
    finally:
        free(ids)


def lstm_hidden(Expression cell, Expression gates):
    """Hidden output h = o * tanh(cell); o is the second-to-last block of gates."""
    cdef Node* c = _check(cell)
    cdef Node* g = _check(gates)
    if c.nd != 1 or g.nd != 1 or rows(g) % rows(c) != 0 or rows(g) // rows(c) < 3 or c.bs != g.bs:
        raise DimensionError(f"lstm_hidden: cell {_dimstr(c)} does not fit gates {_dimstr(g)}")
    cdef int32_t argv[2]
    argv[0] = cell.idx
    argv[1] = gates.idx
    return _wrap(_cg.add_node(OP_LSTM_HIDDEN, 2, argv, _like(c, c.bs)))


def vanilla_lstm_gates(x_t, h_tm1, Wx, Wh, b, float weightnoise_std=0.0):
    """DyNet's fused LSTM gates [i, f, o, g] from input and previous hidden state
    (forget bias +1, as in DyNet)."""
    if weightnoise_std != 0.0:
        raise NotImplementedError("vanilla_lstm_gates: weight noise is not supported")
    b = _as_expr(b)
    pre = affine_transform([b, Wx, x_t, Wh, h_tm1])
    return lstm_gates(pre, rows(_check(b)) // 4, 1.0)


def vanilla_lstm_c(c_tm1, gates_t):
    return lstm_cell(gates_t, [c_tm1])


def vanilla_lstm_h(c_t, gates_t):
    return lstm_hidden(c_t, gates_t)
