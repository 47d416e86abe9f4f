# The DyNet functions that make leaves: parameters as expressions, lookups, inputs,
# constants and random values. Included by _core.pyx; uses the current graph and
# Expression (_expression.pxi) and the shape helpers (_shapes.pxi).

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
    """An integer index; floats and other non-integers are refused, not truncated. An
    object's __index__ may run any code: one that changes the graph is refused (the
    caller holds nodes of it)."""
    if type(i) is int:
        return i
    cdef ComputationGraph g = _here()
    cdef int version = g.version
    cdef int64_t count = g.n_nodes
    try:
        k = operator.index(i)
    except TypeError:
        raise TypeError(f"{name}: index must be an int, got {type(i).__name__}") from None
    if _here() is not g or g.version != version or g.n_nodes != count:
        raise RuntimeError(f"{name}: converting the index {type(i).__name__} to an int changed "
                           f"the computation graph")
    return k


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
    cdef int32_t slot = _here().add_table(p.vptr, p.gptr if trained else NULL)
    cdef int32_t at = _here().add_ints([slot] + idx, len(idx) + 1)
    cdef int32_t n = _here().add_node(OP_LOOKUP_BATCH, 0, NULL, shape, at)
    if trained:
        (&_here().nodes[n]).flags |= F_NEEDS_GRAD
        for i in idx:
            p.used[i] = 1
    _here().keepalive.append(p)
    return _wrap(n)


cdef Expression _leaf_from_flat(object flat, Shape shape):
    cdef int32_t i = _here().add_node(OP_INPUT, 0, NULL, shape)
    cdef float* dst = _here().leaf_memory(i)
    cdef float[::1] src = flat
    memcpy(dst, &src[0], _here().nodes[i].size * sizeof(float))
    return _wrap(i)


cdef Expression _filled_leaf(object dim, int64_t batch_size, str op):
    """A new input leaf of a user-given shape whose memory the caller fills."""
    cdef int32_t i = _here().add_node(OP_INPUT, 0, NULL, _shape_from(op, dim, batch_size))
    _here().leaf_memory(i)
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
    cdef float* p = _here().nodes[e.idx].val
    cdef int64_t k
    for k in range(_here().nodes[e.idx].size):
        p[k] = val
    return e


def zeros(dim, batch_size=1):
    return constant(dim, 0.0, batch_size)


def ones(dim, batch_size=1):
    return constant(dim, 1.0, batch_size)


def random_normal(dim, float mean=0.0, float stddev=1.0, batch_size=1):
    cdef Expression e = _filled_leaf(dim, _as_size(batch_size, "random_normal"), "random_normal")
    cdef float* p = _here().nodes[e.idx].val
    cdef int64_t k
    for k in range(_here().nodes[e.idx].size):
        p[k] = mean + stddev * rng_normal(&_here().rng)
    return e


def random_uniform(dim, float left, float right, batch_size=1):
    cdef Expression e = _filled_leaf(dim, _as_size(batch_size, "random_uniform"), "random_uniform")
    cdef float* p = _here().nodes[e.idx].val
    cdef int64_t k
    for k in range(_here().nodes[e.idx].size):
        p[k] = left + (right - left) * rng_uniform(&_here().rng)
    return e
