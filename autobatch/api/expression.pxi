# The Expression handle and its operators. Included by api/core.pyx; uses the current
# graph (api/current_graph.pxi), the shape helpers of api/shapes.pxi and Parameters
# (api/parameters.pxi).

cdef inline Node* _check(Expression e) except NULL:
    """e's node, if e belongs to the calling thread's current graph."""
    return _check_in(_here(), e)


cdef inline Node* _check_in(ComputationGraph g, Expression e) except NULL:
    """e's node, if e belongs to g (the calling thread's graph): made under g's current
    version, or under an earlier one of g and not dropped by cg_revert (g.owns). A
    Parameters or LookupParameters (Expressions too, as in DyNet) gets its node of g
    here (_refresh)."""
    if e.version != g.version_id and not g.owns(e.version, e.idx):
        _refresh(g, e)
    return &g.nodes[e.idx]


# Indices, not pointers, across appends. Appending a node (any op, an input, a
# Parameters' first use in a graph) may move the node array, so a Node* is valid only
# until the next append: check every argument first (_check_args), then take the
# pointers (_node), read what is needed, and after an append re-fetch by index
# (_node(g, e) or &g.nodes[e.idx]). AUTOBATCH_DEBUG_MOVE_ARRAYS=1 moves the array on
# every append, so that a pointer kept across one reads garbage (docs/architecture.md).

cdef inline Node* _node(ComputationGraph g, Expression e) noexcept:
    """e's node, for an e already checked in g (_check_in, _check_args): valid until the
    next append to g."""
    return &g.nodes[e.idx]


cdef inline int _check_args(ComputationGraph g, Expression a, Expression b) except -1:
    """_check_in of each argument of an op before the op takes any Node*: checking a
    Parameters appends its node, which may move the nodes of the arguments before it."""
    _check_in(g, a)
    _check_in(g, b)
    return 0


cdef int _check_args3(ComputationGraph g, Expression a, Expression b, Expression c) except -1:
    """_check_args of three arguments; c may be None (an optional argument)."""
    _check_args(g, a, b)
    if c is not None:
        _check_in(g, c)
    return 0


cdef int _compute(int32_t idx, bint recalculate) except -1:
    if recalculate:
        _here().invalidate()
    return _here().forward_to(idx)


cdef inline Expression _wrap(int32_t idx):
    """The handle of node idx, just added to the calling thread's graph."""
    return _wrap_in(_here(), idx)


cdef inline Expression _wrap_in(ComputationGraph g, int32_t idx):
    """The handle of node idx of g (the calling thread's graph)."""
    cdef Expression e = Expression.__new__(Expression)
    e.idx = idx
    e.version = g.version_id
    if g.immediate_compute:
        g.forward_to(idx)
    return e


cdef str _dimstr(Node* n):
    s = str(tuple(n.d[a] for a in range(n.nd)))
    return s if n.bs == 1 else f"{s} x batch {n.bs}"


# ------------------------------------------------------------------ Expression ----

@cython.freelist(1024)
cdef class Expression:
    """Handle to a node of the current computation graph (graph version + index): what
    every ``dy.`` function returns. Making one only records the node; ``value()``,
    ``npvalue()``, ``forward()`` or ``backward()`` compute it, batched with every other
    pending node of the graph.

    Operators build nodes as DyNet's: ``x + y``, ``x - y``, ``-x``, ``x * y`` (a matrix
    product, or scaling when one side is a number or has one element), ``x / y``,
    ``x ** y``, ``x[i]`` (``pick``) and ``x[a:b]`` (``pick_range``); numbers may stand on
    either side. ``dim()`` is ``(shape, batch size)``.

    An Expression belongs to one graph of one thread: after ``renew_cg()`` it is stale
    (StaleExpressionError), and it cannot be pickled (pickle ``npvalue()`` instead).

    Parameters and LookupParameters are Expressions too (as in DyNet): each use stands
    for their node in the calling thread's current graph.

    Example::

        h = dy.tanh(W * x + b)        # three nodes; nothing computed yet
        print(h.npvalue())            # computes them (and everything else pending)
    """
    cdef int32_t idx
    cdef int32_t version

    @property
    def vindex(self):
        """The index of this expression's node in its graph (DyNet's ``vindex``)."""
        if _is_param(self):
            _check(self)
        return self.idx

    @property
    def cg_version(self):
        """The version of the graph this expression belongs to (compare
        ``dy.cg_version()``)."""
        if _is_param(self):
            _check(self)
        return self.version

    def is_stale(self):
        """True when the graph this expression was made in has been renewed (``renew_cg``)
        or reverted past it since: using it then raises StaleExpressionError."""
        if _is_param(self):
            return False                # stands for its node of whichever graph uses it
        cdef ComputationGraph g = _here()
        return self.version != g.version_id and not g.owns(self.version, self.idx)

    def dim(self):
        """(shape, batch size), as in DyNet."""
        cdef Node* n = _check(self)
        return _here().shape_of(self.idx), n.bs

    def _batch_size(self):
        """dim()[1] without making the shape tuple (the builders ask it every step)."""
        return _check(self).bs

    def forward(self, recalculate=False):
        """Compute the value; with recalculate=True everything is computed again (after
        changing parameter values, say), else only what was not computed yet."""
        _check(self)
        _compute(self.idx, recalculate)
        return self

    incremental_forward = forward

    def value(self, recalculate=False):
        """As DyNet: npvalue() for values of 2 or more dimensions; else vec_value() (a
        list of every batch element's values, one after another), or its one number as
        a float."""
        cdef Node* n = _check(self)
        _compute(self.idx, recalculate)
        n = &_here().nodes[self.idx]
        if n.nd >= 2:
            return _here().value_array(self.idx, False)
        if n.size == 1:
            return float(n.val[0])
        return [float(n.val[i]) for i in range(n.size)]

    def npvalue(self, recalculate=False):
        """Numpy copy of the value; the batch is the last axis when batch size > 1."""
        _check(self)
        _compute(self.idx, recalculate)
        return _here().value_array(self.idx, False)

    def scalar_value(self, recalculate=False):
        """The value of a one-element expression as a float (DyNet's ``scalar_value``); ValueError
        for any other shape. Computes what is needed first (batched), as ``value()``.
        """
        cdef Node* n = _check(self)
        if n.size != 1:
            raise ValueError(f"scalar_value() of an expression of shape {_dimstr(n)}")
        _compute(self.idx, recalculate)
        return float(_here().nodes[self.idx].val[0])

    def vec_value(self, recalculate=False):
        """The value flattened to a list (column-major, batch last)."""
        _check(self)
        _compute(self.idx, recalculate)
        return _here().value_array(self.idx, False).ravel(order="F").tolist()

    def tensor_value(self, recalculate=False):
        """The value as a Tensor (DyNet's ``tensor_value``): ``as_numpy()`` is npvalue()'s
        array, and ``argmax``, ``topk`` and ``categorical_sample_log_prob`` work on it
        without building nodes (api/tensor.py)."""
        cdef Node* n = _check(self)
        _compute(self.idx, recalculate)
        n = &_here().nodes[self.idx]
        return Tensor(_here().value_array(self.idx, False), _here().shape_of(self.idx), n.bs)

    def backward(self, full=False):
        """Accumulate d(self)/d(parameter) into every parameter's gradient; with
        full=True also keep the gradient of every node it depends on, inputs and
        constants included (read them with gradient())."""
        _check(self)
        _here().backward_from(self.idx, full)

    def gradient(self):
        """d(last backward's loss)/d(self) as numpy, shaped as npvalue() (zeros where
        nothing flows, and for nodes the loss does not use; inputs get theirs with
        backward(full=True)). As in DyNet, it is an error before backward() (or after
        set() or recalculation: the gradients were of the old values), and for a node
        created after the one backward started from."""
        cdef ComputationGraph g = _here()
        cdef Node* n = _check_in(g, self)
        if g.backward_target < 0:
            raise RuntimeError("gradient() before backward(): no gradients were computed in "
                               "this graph since it was started or its values recomputed")
        if self.idx > g.backward_target:
            raise RuntimeError(f"gradient() of node {self.idx}: the last backward() started "
                               f"from node {g.backward_target}, which does not depend on it")
        if self.idx == g.backward_target and not (n.flags & F_NEEDS_GRAD):
            return np.ones_like(g.value_array(self.idx, False))    # d(loss)/d(loss)
        return g.value_array(self.idx, True)

    def set(self, values):
        """New values for an input, or a new row for a lookup; the graph is kept and
        its next value()/forward()/backward() computes it again (DyNet's pattern of
        building a graph once and re-setting its inputs).

        vecInput / inputVector / matInput / inputMatrix / inputTensor(...,
        reusable_expr=True): `values` is a flat sequence of as many numbers (column-major,
        the batch last). scalarInput: a number. lookup: a row index. lookup_batch: one
        index per batch element."""
        _set_values(self, values)

    def set_index(self, index):
        """pick / pick_batch: a new index (or one per batch element); the graph is
        recomputed as after set()."""
        _set_pick_index(self, index)

    def __reduce__(self):
        raise TypeError("an Expression is a handle into one computation graph of one process; "
                        "it cannot be pickled (pickle its npvalue() instead)")

    def __repr__(self):
        if self.is_stale():
            return f"<Expression {self.idx} (stale)>"
        n = &_here().nodes[self.idx]
        return f"<Expression {self.idx}: {OP_NAMES[n.op]} {_dimstr(n)}>"

    def __add__(self, other):
        return _add(self, other)

    def __radd__(self, other):
        return _add(other, self)

    def __sub__(self, other):
        return _sub(self, other)

    def __rsub__(self, other):
        return _sub(other, self)

    def __mul__(self, other):
        return _mul(self, other)

    def __rmul__(self, other):
        return _mul(other, self)

    def __truediv__(self, other):
        return _div(self, other)

    def __rtruediv__(self, other):
        return _div(other, self)

    def __neg__(self):
        return _unary(OP_NEG, self, 0.0)

    def __pow__(self, other, modulo):
        if modulo is not None:
            return NotImplemented
        return pow(self, other)

    def __rpow__(self, other, modulo):
        if modulo is not None or not _is_number(other):
            return NotImplemented
        return pow(other, self)

    def __getitem__(self, index):
        """x[i] picks along dimension 0 (i < 0 counts from the end), x[a:b:s] takes a
        strided range of it, and a tuple indexes several dimensions (M[:, 1:3],
        M[1, 2]); an entry past the last dimension indexes the batch."""
        return _getitem(self, index)


cdef inline Expression _as_expr(object x):
    if isinstance(x, Expression):
        return <Expression>x            # a Parameters gets its node when checked
    raise TypeError(f"expected an Expression, got {type(x).__name__}")


cdef object _numpy_number = np.number


cdef inline bint _is_number(object x):
    if isinstance(x, Expression):
        return False                    # the common case, decided without a lookup
    return isinstance(x, (int, float)) or isinstance(x, _numpy_number)


cdef Expression _add(object x, object y):
    if _is_number(y):
        return _unary(OP_ADD_CONST, _as_expr(x), y)
    if _is_number(x):
        return _unary(OP_ADD_CONST, _as_expr(y), x)
    return _binary(OP_ADD, _as_expr(x), _as_expr(y))


cdef Expression _sub(object x, object y):
    if _is_number(y):
        return _unary(OP_ADD_CONST, _as_expr(x), -y)
    if _is_number(x):
        return _unary(OP_RSUB_CONST, _as_expr(y), x)
    return _binary(OP_SUB, _as_expr(x), _as_expr(y))


cdef Expression _mul(object x, object y):
    if _is_number(y):
        return _unary(OP_MUL_CONST, _as_expr(x), y)
    if _is_number(x):
        return _unary(OP_MUL_CONST, _as_expr(y), x)
    cdef Expression a = _as_expr(x), b = _as_expr(y)
    cdef ComputationGraph g = _here()
    _check_args(g, a, b)   # before any Node*: see _check_args
    cdef Node* na = _node(g, a)
    cdef Node* nb = _node(g, b)
    if cols(na) == rows(nb) or (elems(na) != 1 and elems(nb) != 1):
        return _matmul(a, b)
    return _binary(OP_CMULT, a, b)      # a scalar times an expression


cdef Expression _div(object x, object y):
    if _is_number(y):
        if y == 0:
            raise ZeroDivisionError("expression divided by zero")
        return _unary(OP_MUL_CONST, _as_expr(x), 1.0 / y)
    if _is_number(x):
        return _unary(OP_RDIV_CONST, _as_expr(y), x)
    return _binary(OP_CDIV, _as_expr(x), _as_expr(y))


cdef inline Expression _unary(int op, Expression x, float value):
    """An elementwise op of one argument; `value` is its constant (ScalarAttr)."""
    cdef ComputationGraph g = _here()
    cdef Node* n = _check_in(g, x)
    cdef Attrs at = _scalar_attr(value)
    return _wrap_in(g, g.add_node(op, 1, &x.idx, _like(n, n.bs), 0, &at))


cdef Shape _broadcast_shape(int op, Node* a, Node* b) except *:
    """DyNet's broadcasting of an elementwise op of a and b: along every dimension (the
    ones past a value's rank are 1) and the batch, sizes are equal or one of them is 1
    and repeats; the rank is the larger one. cdiv: only the divisor b may repeat."""
    if _same_dims(a, b) and a.nd >= b.nd and a.bs == b.bs:
        return _like(a, a.bs)           # the common case: nothing broadcasts
    cdef bint divisor_only = op == OP_CDIV
    cdef int64_t d[4]
    cdef int k
    for k in range(MAX_DIMS):
        if a.d[k] == b.d[k] or b.d[k] == 1:
            d[k] = a.d[k]
        elif a.d[k] == 1 and not divisor_only:
            d[k] = b.d[k]
        else:
            raise DimensionError(
                f"{OP_NAMES[op]}: shapes {_dimstr(a)} and {_dimstr(b)} do not broadcast (along each "
                + ("dimension the divisor's size must be the dividend's or 1)" if divisor_only
                   else "dimension the sizes must be equal or one of them 1)"))
    if divisor_only and not (b.bs == a.bs or b.bs == 1):
        raise DimensionError(f"{OP_NAMES[op]}: batch sizes {a.bs} and {b.bs} do not broadcast "
                             f"(the divisor's must be the dividend's or 1)")
    return _checked_shape(OP_NAMES[op], max(a.nd, b.nd), d, _bs2(OP_NAMES[op], a, b))


cdef Expression _binary(int op, Expression x, Expression y):
    """An elementwise op of two arguments, broadcast as DyNet does."""
    cdef ComputationGraph g = _here()
    _check_args(g, x, y)   # before any Node*: see _check_args
    cdef Node* a = _node(g, x)
    cdef Node* b = _node(g, y)
    cdef Shape shape = _broadcast_shape(op, a, b)
    cdef int32_t argv[2]
    argv[0] = x.idx
    argv[1] = y.idx
    return _wrap_in(g, g.add_node(op, 2, argv, shape))


cdef Expression _matmul(Expression x, Expression y):
    cdef ComputationGraph g = _here()
    _check_args(g, x, y)   # before any Node*: see _check_args
    cdef Node* a = _node(g, x)
    cdef Node* b = _node(g, y)
    if cols(a) != rows(b) or a.nd > 2 or b.nd > 2:
        raise DimensionError(f"matmul: cannot multiply {_dimstr(a)} by {_dimstr(b)}")
    cdef int bs = _bs2("matmul", a, b)
    cdef int32_t argv[2]
    argv[0] = x.idx
    argv[1] = y.idx
    return _wrap_in(g, g.add_node(OP_MATMUL, 2, argv,
                                  _product_shape("matmul", rows(a), cols(b), b.nd, bs)))


cdef int32_t _collect(object xs, str name, int32_t** out) except -1:
    """Argument ids of a list of expressions, in a malloc'd array."""
    cdef Py_ssize_t k, n = len(xs)
    if n == 0:
        raise ValueError(f"{name}: needs at least one expression")
    cdef int32_t* ids = <int32_t*>malloc(n * sizeof(int32_t))
    if ids == NULL:
        raise MemoryError()
    cdef Expression e
    try:
        for k in range(n):
            e = _as_expr(xs[k])
            _check(e)
            ids[k] = e.idx
    except BaseException:
        free(ids)
        raise
    out[0] = ids
    return <int32_t>n


cdef Expression _nary_same(int op, object xs, bint allow_batch_broadcast):
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, OP_NAMES[op], &ids)
    cdef Node* a
    cdef Node* first = &_here().nodes[ids[0]]
    cdef int k, bs = first.bs
    try:
        for k in range(n):
            a = &_here().nodes[ids[k]]
            if not _same_dims(a, first):
                raise DimensionError(f"{OP_NAMES[op]}: argument {k} has shape {_dimstr(a)}, "
                                     f"argument 0 has {_dimstr(first)}")
            if allow_batch_broadcast:
                bs = _merge_bs(OP_NAMES[op], bs, a.bs)
            elif a.bs != bs:
                raise DimensionError(f"{OP_NAMES[op]}: batch sizes {bs} and {a.bs} do not match")
        return _wrap(_here().add_node(op, n, ids, _like(first, bs)))
    finally:
        free(ids)
