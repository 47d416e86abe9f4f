# The DyNet functions that make leaves: parameters as expressions, lookups, inputs,
# constants and random values. Included by api/core.pyx; uses the current graph and
# Expression (api/expression.pxi) and the shape helpers (api/shapes.pxi).

def parameter(*ps, update=True):
    """Parameters (or LookupParameters) as expressions: ``dy.parameter(W)``, or several at
    once, ``W, b = dy.parameter(W, b)`` (DyNet's ``dy.parameter(*args)``).

    Each parameter gives one node per graph, whose value is the parameter's own memory
    (no copy) and whose gradient goes to the parameter. Shape: the parameter's shape,
    batch size 1 (it broadcasts over the batch of whatever it meets). A Parameters
    already is one (as in DyNet, where parameter(p) returns p): ``update=True`` gives p
    itself, which stands for its node in whatever graph is current; ``update=False`` a
    constant node of the current graph (as ``const_parameter``). Inside a graph
    ``W * h`` with ``W`` a Parameters works without this call: the first use makes the
    node.

    Batching: a leaf runs no kernel; its identity enters the signature of the products
    that use it, so ``W * h`` of every instance becomes one gemm with ``W``.

    Example::

        W = dy.parameter(pW)            # the same node for every instance of the graph
    """
    out = []
    for p in ps:
        if isinstance(p, Parameters):
            out.append(p if update else (<Parameters>p)._expr(False, True))
        elif isinstance(p, LookupParameters):
            out.append(p if update else (<LookupParameters>p)._table_expr(False, True))
        else:
            raise TypeError(f"parameter() takes Parameters, got {type(p).__name__}")
    return out[0] if len(out) == 1 else out


def const_parameter(*ps):
    """Parameters as constant expressions: their values, with no gradient flowing back
    (DyNet's ``dy.const_parameter``); ``dy.parameter(p, update=False)`` for one.

    Shape: the parameter's, batch size 1 (broadcast over any batch it meets). Batching:
    a leaf; it runs no kernel, and products with it batch as with ``parameter``.

    Example::

        E_fixed = dy.const_parameter(pretrained)   # use, but do not train
    """
    return parameter(*ps, update=False)


cdef object _as_index(object i, str name):
    """An integer index; floats and other non-integers are refused, not truncated. An
    object's __index__ may run any code: one that changes the graph is refused (the
    caller holds nodes of it)."""
    if type(i) is int:
        return i
    cdef ComputationGraph g = _here()
    cdef int version = g.version_id
    cdef int64_t count = g.n_nodes
    try:
        k = operator.index(i)
    except TypeError:
        raise TypeError(f"{name}: index must be an int, got {type(i).__name__}") from None
    if _here() is not g or g.version_id != version or g.n_nodes != count:
        raise RuntimeError(f"{name}: converting the index {type(i).__name__} to an int changed "
                           f"the computation graph")
    return k


cdef object _as_function_index(object i, str name):
    """An index or a dimension's number given to an op function (pick, select_rows,
    lookup, the d of sum_dim ...): an int, or a float that is a whole number, which DyNet
    takes (it truncates any float: 2.0 is 2 here too, 2.5 is a TypeError). x[i] and its
    slices keep _as_index: DyNet's x[2.0] refuses a float."""
    if type(i) is int:
        return i
    if isinstance(i, (float, np.floating)):
        if float(i).is_integer():
            return int(i)
        raise TypeError(f"{name}: index must be an int or a whole number, got {i!r} "
                        f"(not truncated)")
    return _as_index(i, name)


def lookup(LookupParameters p not None, index, update=True):
    """Row ``index`` of a lookup table ``p`` as an expression (DyNet's
    ``dy.lookup(p, index=0, update=True)``).

    The node copies its row when it is computed (as DyNet's): a later change of the
    table does not change it. Shape: the table's row shape
    (``dim`` of ``add_lookup_parameters((n, dim))``), batch size 1. ``update=False``
    keeps the row constant; otherwise backward adds into that row's gradient only and
    the trainer updates only the rows that were looked up. An ``index`` outside
    ``[0, n)`` raises IndexError; a float raises TypeError.

    Batching: a leaf; the ops over many lookups (an LSTM's input product) gather them
    into one batch. ``lookup_batch`` makes one batched expression of many rows.

    Example::

        xs = [dy.lookup(E, w) for w in sentence]
    """
    cdef long i = _as_function_index(index, "lookup")
    p._row_check(i)
    cdef bint trained = update and p._updated
    cdef int32_t n = _alias_leaf(p, OP_LOOKUP, p.row_dims, &p._buf.src,
                                 p.gptr + i * p.row_size if trained else NULL, <int32_t>i)
    if trained:     # a backward from here on marks row i used (DyNet's accumulate_grad)
        _here().add_row_mark(n, p.used)
    return _wrap(n)


def lookup_batch(LookupParameters p not None, indices, update=True):
    """Rows ``indices`` of the table ``p`` as one expression with one batch element per
    index (DyNet's ``dy.lookup_batch(p, indices, update=True)``): shape the row shape,
    batch size ``len(indices)``. Backward adds into the rows used (a row used twice gets
    both gradients).

    Batching: the batch dimension is explicit here (hand batching, as in DyNet); such an
    expression composes with automatic batching: two lookup_batch results of the same
    batch size meet in the same batched ops.

    Example::

        x = dy.lookup_batch(E, [3, 1, 4])     # (dim,) x 3
    """
    idx = [_as_function_index(i, "lookup_batch") for i in indices]
    if not idx:
        raise ValueError("lookup_batch: needs at least one index")
    for i in idx:
        p._row_check(i)
    cdef Shape shape = _with_batch("lookup_batch", p.row_dims, len(idx))
    cdef bint trained = update and p._updated
    cdef int32_t slot = _here().add_table(&p._buf.src, p.gptr if trained else NULL)
    cdef int32_t at = _here().add_ints([slot] + idx, len(idx) + 1)
    cdef int32_t n = _here().add_node(OP_LOOKUP_BATCH, 0, NULL, shape, at)
    if trained:
        (&_here().nodes[n]).flags |= F_NEEDS_GRAD
        _here().add_row_mark(n, p.used)
    _here().keepalive.append(p)
    return _wrap(n)


# OP_INPUT's idata: may set() replace the values (DyNet's reusable inputs)?
cdef enum:
    INPUT_FIXED = 0     # constants, random values, inputTensor(...) (DyNet: not reusable)
    INPUT_VALUES = 1    # vecInput, inputVector, matInput, inputMatrix,
                        # inputTensor(..., reusable_expr=True): set(flat list)
    INPUT_SCALAR = 2    # scalarInput: set(number)


cdef Expression _leaf_from_flat(object flat, Shape shape, int settable=INPUT_FIXED):
    cdef int32_t i = _here().add_node(OP_INPUT, 0, NULL, shape, settable)
    cdef float* dst = _here().leaf_memory(i)
    cdef float[::1] src = flat
    if src.shape[0]:            # (&src[0] of an empty view is out of bounds)
        memcpy(dst, &src[0], _here().nodes[i].size * sizeof(float))
    return _wrap(i)


cdef Expression _filled_leaf(object dim, int64_t batch_size, str op, int settable=INPUT_FIXED):
    """A new input leaf of a user-given shape whose memory the caller fills."""
    cdef int32_t i = _here().add_node(OP_INPUT, 0, NULL, _shape_from(op, dim, batch_size), settable)
    _here().leaf_memory(i)
    return _wrap(i)


cdef int _cpu_only(object device, str where) except -1:
    if device not in (None, "", "CPU", "cpu"):
        raise ValueError(f"{where}: device {device!r}: autobatch runs on the CPU only "
                         f"(its device is 'CPU')")
    return 0


def inputTensor(arr, batched=False, device="", reusable_expr=False):
    """A constant from a numpy array (or nested lists) of 1 to 4 dimensions, as float32
    (DyNet's ``dy.inputTensor(arr, batched=False, device="", reusable_expr=False)``).

    The shape is kept as given (a (3, 1) array stays (3, 1), as in DyNet). With
    ``batched=True`` the last axis is the batch: a (3, 4, 8) array becomes (3, 4) x 8. A
    list of numpy arrays is a batch, one element per array. NaN or infinity raises
    ValueError; ``device`` other than the CPU raises ValueError. ``reusable_expr=True``:
    ``set()`` may replace its values later (DyNet's reusable input). ((3,) with
    ``batched=True`` is (1,) x batch 3.)

    Batching: a leaf (its memory filled once); the ops that read it batch with those of
    other instances of the same shape.

    Example::

        x = dy.inputTensor(np.array([[1, 2], [3, 4]]))        # (2, 2)
        xb = dy.inputTensor(np.ones((5, 16)), batched=True)   # (5,) x 16
    """
    _cpu_only(device, "inputTensor")
    if isinstance(arr, list) and arr and all(isinstance(v, np.ndarray) for v in arr):
        arr = np.stack(arr, axis=-1)
        batched = True
    a = np.asarray(arr, dtype=np.float32)
    shape = a.shape
    bs = 1
    if batched:
        if a.ndim == 0:
            raise DimensionError("inputTensor(batched=True) needs at least one axis")
        bs = shape[len(shape) - 1]
        shape = shape[:len(shape) - 1]
    if len(shape) == 0:
        shape = (1,)
    return _input(a, _shape_from("inputTensor", shape, bs),
                  INPUT_VALUES if reusable_expr else INPUT_FIXED, "inputTensor")


cdef Expression _input(object a, Shape shape, int settable, str where):
    """An input leaf holding the float32 array a (column-major), checked. An empty a
    (a dimension of 0) is an empty value, as in DyNet."""
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{where}: the input holds NaN or infinity")
    return _leaf_from_flat(np.ascontiguousarray(a.ravel(order="F")), shape, settable)


def inputVector(v, device=""):
    """A vector input from a flat sequence of numbers (DyNet's ``dy.inputVector(v,
    device="")``): shape ``(len(v),)``, batch size 1; ``set()`` may replace its values.
    Batching: a leaf; ops reading it batch with those of other instances.

    Example::

        x = dy.inputVector([0.5, -1.0, 2.0])
    """
    _cpu_only(device, "inputVector")
    a = np.asarray(v, dtype=np.float32)
    if a.ndim != 1:
        raise TypeError(f"inputVector takes a flat sequence of numbers, got an array of shape "
                        f"{a.shape} (inputTensor takes arrays)")
    return _input(a, _shape_from("inputVector", a.shape, 1), INPUT_VALUES, "inputVector")


def vecInput(dim, device=""):
    """A vector input of ``dim`` zeros, to fill with ``set()`` (DyNet's static-graph
    style, ``dy.vecInput(dim, device="")``): shape ``(dim,)``, batch size 1. Batching: a
    leaf.

    Example::

        x = dy.vecInput(3); x.set([1.0, 2.0, 3.0])
    """
    _cpu_only(device, "vecInput")
    return _constant((dim,), 0.0, 1, INPUT_VALUES)


def matInput(d1, d2):
    """A ``(d1, d2)`` matrix input of zeros, to fill with ``set()`` (values column-major),
    batch size 1. DyNet 2.2 deprecated it (and raises); it works here as in DyNet 2.0.
    Batching: a leaf.

    Example::

        M = dy.matInput(2, 3); M.set([1, 2, 3, 4, 5, 6])
    """
    return _constant((d1, d2), 0.0, 1, INPUT_VALUES)


def scalarInput(float s, device=""):
    """A scalar input holding ``s`` (DyNet's ``dy.scalarInput(s, device="")``): shape
    (1,), batch size 1; ``set()`` may replace it. Batching: a leaf; it broadcasts over
    the batch of any elementwise op it meets.

    Example::

        y = x * dy.scalarInput(0.5)
    """
    _cpu_only(device, "scalarInput")
    return _input(np.array([s], dtype=np.float32), _shape_from("scalarInput", (1,), 1),
                  INPUT_SCALAR, "scalarInput")


def inputMatrix(v, d):
    """DyNet's ``dy.inputMatrix(v, d)``: a matrix of shape ``d`` = (rows, cols) from the
    flat list ``v`` in column-major order (DyNet's memory order), batch size 1; ``set()``
    may replace it. Batching: a leaf; ops reading it batch with those of other instances.

    Example::

        M = dy.inputMatrix([1, 2, 3, 4, 5, 6], (2, 3))   # columns [1, 2], [3, 4], [5, 6]
    """
    a = np.asarray(v, dtype=np.float32).reshape(tuple(d), order="F")
    return _input(a, _shape_from("inputMatrix", a.shape, 1), INPUT_VALUES, "inputMatrix")


def sparse_inputTensor(idxs, values, shape, batched=False, defval=0, device=""):
    """An input of ``shape`` equal to ``defval`` except at the coordinates ``idxs`` (one
    integer array per dimension of shape, the batch included when ``batched=True``: the
    last dimension is then the batch, as in inputTensor), which hold ``values``; a
    repeated coordinate keeps its last value (DyNet's ``dy.sparse_inputTensor(idxs,
    values, shape, batched=False, defval=0, device="")``). Batching: a leaf.

    Example::

        x = dy.sparse_inputTensor([[0, 2]], [1.0, 5.0], (4,))    # [1, 0, 5, 0]
    """
    _cpu_only(device, "sparse_inputTensor")
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"sparse_inputTensor: shape must be a tuple, got {type(shape).__name__}")
    shape = tuple(_as_size(v, "sparse_inputTensor") for v in shape)
    if len(idxs) != len(shape):
        raise ValueError(f"sparse_inputTensor: {len(idxs)} index arrays for a shape of "
                         f"{len(shape)} dimensions")
    vals = np.asarray(values, dtype=np.float32)
    coords = [np.asarray(i) for i in idxs]
    for k, c in enumerate(coords):
        if c.ndim != 1 or c.shape[0] != vals.size or vals.ndim != 1:
            raise ValueError(f"sparse_inputTensor: index array {k} has shape {c.shape}, the "
                             f"values {vals.shape}: they must be 1-d of the same length")
        if c.size and (c.dtype.kind not in "iu" or c.min() < 0 or c.max() >= shape[k]):
            raise ValueError(f"sparse_inputTensor: index array {k} holds an entry that is not "
                             f"an integer in [0, {shape[k]})")
    dense = np.full(shape, defval, dtype=np.float32)
    if vals.size:
        flat = np.ravel_multi_index(tuple(coords), shape)
        _, last = np.unique(flat[::-1], return_index=True)     # a repeat: its last value
        keep = flat.size - 1 - last
        dense.reshape(-1)[flat[keep]] = vals[keep]
    return inputTensor(dense, batched=batched)


# ------------------------------------------------ flat column-major values ----
# DyNet's inputs from flat values: inputTensorTranspose, ComputationGraph's
# inputMatrixLiteral and inputSparseTensor.

cdef Expression _flat_input(object values, object dim, object batch_size, int settable,
                            str where):
    """An input of shape `dim` x `batch_size` from its values flat in column-major order
    (the batch last), as DyNet's _vecInputExpression takes them."""
    a = np.asarray(values, dtype=np.float32)
    if a.ndim != 1:
        raise TypeError(f"{where}: the values must be flat (one dimension), got shape {a.shape}")
    dims = (a.size,) if dim is None else dim
    cdef Shape shape = _shape_from(where, dims, _as_size(batch_size, where))
    cdef int64_t total = elems_of(shape) * shape.bs
    if total != a.size:
        raise ValueError(f"{where}: dimensions {tuple(dims)} x batch {shape.bs} hold {total} "
                         f"values, got {a.size}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{where}: the input holds NaN or infinity")
    return _leaf_from_flat(np.ascontiguousarray(a), shape, settable)


cdef Expression _sparse_flat_input(object idxs, object values, object dim, object batch_size,
                                   object defval, str where):
    """An input equal to defval except at the flat column-major positions idxs."""
    cdef Shape shape = _shape_from(where, dim, _as_size(batch_size, where))
    cdef int64_t total = elems_of(shape) * shape.bs
    at = np.asarray(idxs)
    vals = np.asarray(values, dtype=np.float32)
    if at.ndim != 1 or vals.ndim != 1 or at.size != vals.size:
        raise ValueError(f"{where}: {at.size} indices for {vals.size} values (both flat lists "
                         f"of one length)")
    if at.size and (at.dtype.kind not in "iu" or at.min() < 0 or at.max() >= total):
        raise ValueError(f"{where}: every index must be an integer in [0, {total})")
    dense = np.full(total, _finite(where, "defval", defval), dtype=np.float32)
    if at.size:
        _, last = np.unique(at[::-1], return_index=True)     # a repeat: its last value
        keep = at.size - 1 - last
        dense[at[keep]] = vals[keep]
    return _flat_input(dense, dim, batch_size, INPUT_FIXED, where)


def _transposed_input(val, dim=None, batch_size=1, device=""):
    """The input node of inputTensorTranspose (api/extras.py, a Python subclass of
    Expression: a cdef subclass here would slow the creation of every Expression)."""
    _cpu_only(device, "inputTensorTranspose")
    return _flat_input(val, dim, batch_size, INPUT_VALUES, "inputTensorTranspose")


def _adopt_node(Expression handle, Expression source):
    """Point `handle` (an instance of a Python subclass of Expression) at source's node."""
    handle.idx, handle.version = source.idx, source.version


def to_device(e, device_str):
    """``e`` on device ``device_str`` (DyNet's ``dy.to_device(e, device_str)``): autobatch
    runs on the CPU only, so 'CPU' gives ``e`` itself and any other device raises
    ValueError. No node is added.

    Example::

        y = dy.to_device(x, "CPU")      # x itself
    """
    _cpu_only(device_str, "to_device")
    return _as_expr(e)


def constant(dim, float val, batch_size=1):
    """An input of shape ``dim`` with every element ``val`` and ``batch_size`` batch
    elements (DyNet's ``dy.constant(dim, val, batch_size=1)``). Batching: a leaf; no
    kernel runs for it.

    Example::

        bias = dy.constant((10,), 0.1)
    """
    return _constant(dim, val, batch_size, INPUT_FIXED)


cdef Expression _constant(object dim, float val, object batch_size, int settable):
    cdef Expression e = _filled_leaf(dim, _as_size(batch_size, "constant", 1), "constant", settable)
    cdef float* p = _here().nodes[e.idx].val
    cdef int64_t k
    for k in range(_here().nodes[e.idx].size):
        p[k] = val
    return e


def zeros(dim, batch_size=1):
    """Zeros of shape ``dim`` with ``batch_size`` batch elements (DyNet's
    ``dy.zeros(dim, batch_size=1)``), e.g. an initial hidden state. Batching: a leaf; no
    kernel runs for it.

    Example::

        h0 = dy.zeros((128,))
    """
    return constant(dim, 0.0, batch_size)


def ones(dim, batch_size=1):
    """Ones of shape ``dim`` with ``batch_size`` batch elements (DyNet's
    ``dy.ones(dim, batch_size=1)``). Batching: a leaf; no kernel runs for it.

    Example::

        one_minus_z = dy.ones((64,)) - z
    """
    return constant(dim, 1.0, batch_size)


def random_normal(dim, float mean=0.0, float stddev=1.0, batch_size=1):
    """Gaussian values of shape ``dim`` with ``batch_size`` batch elements, mean ``mean`` and
    standard deviation ``stddev`` (DyNet's ``dy.random_normal(dim, mean=0.0, stddev=1.0,
    batch_size=1)``), drawn from the graph's generator (``dy.set_random_seed``) when the
    node is created. Batching: a leaf; no kernel runs for it.

    Example::

        eps = dy.random_normal((16,))       # the reparameterisation trick
    """
    cdef Expression e = _filled_leaf(dim, _as_size(batch_size, "random_normal", 1), "random_normal")
    cdef float* p = _here().nodes[e.idx].val
    cdef int64_t k
    for k in range(_here().nodes[e.idx].size):
        p[k] = mean + stddev * rng_normal(&_here().rng)
    return e


def random_uniform(dim, float left, float right, batch_size=1):
    """Uniform values in [``left``, ``right``) of shape ``dim`` with ``batch_size`` batch
    elements (DyNet's ``dy.random_uniform(dim, left, right, batch_size=1)``), drawn from the
    graph's generator when the node is created. Batching: a leaf; no kernel runs for it.

    Example::

        u = dy.random_uniform((10,), -0.1, 0.1)
    """
    cdef Expression e = _filled_leaf(dim, _as_size(batch_size, "random_uniform", 1), "random_uniform")
    cdef float* p = _here().nodes[e.idx].val
    cdef int64_t k
    for k in range(_here().nodes[e.idx].size):
        p[k] = left + (right - left) * rng_uniform(&_here().rng)
    return e
