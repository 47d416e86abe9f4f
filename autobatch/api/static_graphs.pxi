# Building a graph once and computing it again with new inputs (DyNet's static-graph
# style): set() of inputs and lookups, set_index() of picks, and forward() of several
# expressions at once. A change invalidates the graph (every computed value and
# gradient is forgotten), so the next value(), forward() or backward() computes it
# again: no stale value can be read. Included by api/core.pyx; uses api/expression.pxi,
# api/parameters.pxi and api/ops_inputs.pxi.

cdef int _set_values(Expression e, object values) except -1:
    """Expression.set(values): new values of a reusable input, a new row of a lookup,
    new rows of a lookup_batch."""
    cdef ComputationGraph g = _here()
    cdef Node* n = _check_in(g, e)
    g.check_idle()
    if _is_param(e):
        raise TypeError("set() changes an input or a lookup; a Parameters is changed "
                        "with set_value()")
    if n.op == OP_INPUT:
        _set_input(g, e.idx, values)
    elif n.op == OP_LOOKUP:
        _set_lookup(g, e.idx, values)
    elif n.op == OP_LOOKUP_BATCH:
        _set_lookup_batch(g, e.idx, values)
    else:
        raise TypeError(f"set() replaces the values of an input (vecInput, inputVector, "
                        f"scalarInput, matInput, inputTensor(..., reusable_expr=True)) or "
                        f"the row of a lookup; this expression is a {OP_NAMES[n.op]}")
    g.invalidate()
    return 0


cdef int _set_input(ComputationGraph g, int32_t i, object values) except -1:
    cdef Node* n = &g.nodes[i]
    if n.idata == INPUT_FIXED:
        raise ValueError("set() can only be called on a reusable input: vecInput, inputVector, "
                         "scalarInput, matInput, inputMatrix or inputTensor(..., "
                         "reusable_expr=True); constants keep their values, as in DyNet")
    if n.idata == INPUT_SCALAR:
        if not _is_number(values):
            raise TypeError(f"set() of a scalarInput takes a number, got {type(values).__name__}")
        a = np.array([values], dtype=np.float32)
    else:
        if _is_number(values) or isinstance(values, (str, bytes)):
            raise TypeError(f"set() takes a flat sequence of numbers, got {type(values).__name__}")
        try:
            a = np.ascontiguousarray(values, dtype=np.float32)
        except (TypeError, ValueError):
            raise TypeError("set() takes a flat sequence of numbers") from None
        if a.ndim != 1:
            raise TypeError(f"set() takes the values flat (column-major, the batch last), as "
                            f"DyNet; got an array of shape {a.shape}")
    n = &g.nodes[i]
    if a.size != n.size:
        raise ValueError(f"set(): {a.size} values for an input of {n.size} ({_dimstr(n)})")
    if not np.all(np.isfinite(a)):
        raise ValueError("set(): the values hold NaN or infinity")
    cdef float[::1] src = a
    if n.size:                  # (&src[0] of an empty view is out of bounds)
        memcpy(n.val, &src[0], n.size * sizeof(float))
    return 0


cdef LookupParameters _table_at(ComputationGraph g, ValueSource* values):
    """The lookup table whose values are `values` (the graph keeps it alive)."""
    for owner in reversed(g.keepalive):
        if isinstance(owner, LookupParameters) and &(<LookupParameters>owner)._buf.src == values:
            return <LookupParameters>owner
    raise RuntimeError("set(): the lookup table of this expression is not in its graph")


cdef int _set_lookup(ComputationGraph g, int32_t i, object index) except -1:
    cdef long row = _as_function_index(index, "set")
    cdef Node* n = &g.nodes[i]
    cdef int size = elems(n)
    cdef LookupParameters p = _table_at(g, g.read_source(i))
    p._row_check(row)
    n = &g.nodes[i]
    if n.flags & F_TRAINABLE:       # the next backward marks the new row (mark_used_rows)
        n.grad = p.gptr + row * size
    n.idata = <int32_t>row          # copied into the node at the next forward (invalidate)
    return 0


cdef int _set_lookup_batch(ComputationGraph g, int32_t i, object indices) except -1:
    if _is_number(indices):
        raise TypeError("set() of a lookup_batch takes a list of indices, one per batch element")
    rows = [_as_function_index(r, "set") for r in indices]
    cdef Node* n = &g.nodes[i]
    cdef int k, at = n.idata, slot = g.ibuf[at]
    if len(rows) != n.bs:
        raise ValueError(f"set(): {len(rows)} indices for a lookup_batch of {n.bs} (its batch "
                         f"size cannot change)")
    cdef LookupParameters p = _table_at(g, g.table_src[slot])
    for r in rows:
        p._row_check(r)
    for k in range(len(rows)):      # the next backward marks the new rows (mark_used_rows)
        g.ibuf[at + 1 + k] = rows[k]
    return 0


cdef int _set_pick_index(Expression e, object index) except -1:
    """Expression.set_index(index): a new index of a pick (or one per batch element)."""
    cdef ComputationGraph g = _here()
    cdef Node* n = _check_in(g, e)
    g.check_idle()
    if n.op != OP_PICK:
        raise TypeError(f"set_index() changes the index of a pick or pick_batch expression; "
                        f"this expression is a {OP_NAMES[n.op]}")
    cdef int bs = n.bs, limit = g.nodes[g.args[n.args_at]].d[n.attr.axis.dim], k
    if isinstance(index, (list, tuple, np.ndarray)):
        idx = [_as_function_index(i, "set_index") for i in index]
        if len(idx) != bs:
            raise ValueError(f"set_index(): {len(idx)} indices for a batch of {bs}")
    else:
        idx = [_as_function_index(index, "set_index")] * bs
    for i in idx:
        if not 0 <= i < limit:
            raise IndexError(f"set_index(): index {i} out of range [0, {limit})")
    n = &g.nodes[e.idx]
    for k in range(bs):
        g.ibuf[n.idata + k] = idx[k]
    g.invalidate()
    return 0


def forward(exps, recalculate=False):
    """Compute every expression of the list exps in one forward pass, so that their
    nodes batch together (as one value() that needed them all); recalculate=True
    computes the whole graph again."""
    if isinstance(exps, Expression):
        raise TypeError("forward() takes a list of expressions (use e.forward() for one)")
    exps = list(exps)
    if not exps:
        return
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(exps, "forward", &ids)
    try:
        if recalculate:
            _here().invalidate()
        _here().forward_many(ids, n)
    finally:
        free(ids)
