# The DyNet functions of structure: concatenation, losses that pick an element,
# picking and slicing, transposition, reshaping, and the fused LSTM cells. Included by
# _core.pyx; uses _expression.pxi and _shapes.pxi.

def concatenate_to_batch(xs):
    cdef int32_t* ids = NULL
    cdef int32_t n = _collect(xs, "concatenate_to_batch", &ids)
    cdef Node* a
    cdef Node* first = &_here().nodes[ids[0]]
    cdef int k, bs = 0
    try:
        for k in range(n):
            a = &_here().nodes[ids[k]]
            if not _same_dims(a, first):
                raise DimensionError(f"concatenate_to_batch: argument {k} has shape {_dimstr(a)}, "
                                     f"argument 0 has {_dimstr(first)}")
            bs += a.bs
        return _wrap(_here().add_node(OP_CONCAT_TO_BATCH, n, ids, _like(first, bs)))
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
    cdef Node* first = &_here().nodes[ids[0]]
    cdef int k, i, bs = first.bs
    cdef int64_t total = 0
    cdef int64_t dims[4]
    cdef Shape shape
    cdef Attrs at
    try:
        for k in range(n):
            a = &_here().nodes[ids[k]]
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
        return _wrap(_here().add_node(OP_CONCAT, n, ids, shape, 0, &at))
    finally:
        free(ids)


def concatenate_cols(xs):
    return concatenate(xs, 1)


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
    return _here().add_ints(idx, bs[0])


cdef inline bint _is_vector(Node* n) noexcept:
    """A vector (n,) or a column (n, 1): DyNet's losses over classes take both (a
    product W * h with h of shape (k, 1) gives an (n, 1) column), and both hold n
    contiguous values per batch element, which is all the kernels read."""
    return n.nd == 1 or (n.nd == 2 and n.d[1] == 1)


def pickneglogsoftmax(Expression x, v):
    """-log softmax(x)[v]; x is a vector (n,) or a column (n, 1), as in DyNet; v is an
    int or one int per batch element. The result is (1,) per batch element."""
    cdef Node* n = _check(x)
    if not _is_vector(n):
        raise DimensionError(f"pickneglogsoftmax: needs a vector, got {_dimstr(n)}")
    cdef int bs = n.bs
    cdef int32_t at = _index_list(v, &bs, rows(n), "pickneglogsoftmax")
    return _wrap(_here().add_node(OP_PICKNLS, 1, &x.idx, _matrix_shape("pickneglogsoftmax", 1, 1, bs), at))


def pickneglogsoftmax_batch(Expression x, vs):
    """pickneglogsoftmax with one index per batch element (vs)."""
    return pickneglogsoftmax(x, list(vs))


def hinge(Expression x, v, float m=1.0):
    """sum over i != v of max(0, m - x[v] + x[i]) (per batch element); x is a vector
    (n,) or a column (n, 1), as in DyNet."""
    _finite("hinge", "m", m)
    cdef Node* n = _check(x)
    if not _is_vector(n):
        raise DimensionError(f"hinge: needs a vector, got {_dimstr(n)}")
    cdef int bs = n.bs
    cdef int32_t at = _index_list(v, &bs, rows(n), "hinge")
    cdef Attrs attr
    memset(&attr, 0, sizeof(Attrs))
    attr.hinge.margin = m
    return _wrap(_here().add_node(OP_HINGE, 1, &x.idx, _matrix_shape("hinge", 1, 1, bs), at, &attr))


def hinge_batch(Expression x, vs, float m=1.0):
    """hinge with one index per batch element (vs)."""
    return hinge(x, list(vs), m)


def pick(Expression e, index=0, dim=0, *, d=None):
    """The slice at `index` along dimension `dim`, which is removed (DyNet's pick; its
    keywords; `d=` is this library's older name for `dim`). A list of indices picks one
    per batch element (pick_batch)."""
    if d is not None:
        dim = d
    cdef Node* n = _check(e)
    cdef int k = _dim_index("pick", n, dim, "dim")
    cdef int bs = n.bs
    cdef int32_t at = _index_list(index, &bs, n.d[k], "pick")
    n = &_here().nodes[e.idx]
    cdef Attrs attr = _axis_attr(k)
    return _wrap(_here().add_node(OP_PICK, 1, &e.idx, _without_dims("pick", n, 1 << k, bs), at, &attr))


def pick_batch(Expression e, indices, dim=0, *, d=None):
    """pick with one index per batch element (an unbatched e makes a batch of them)."""
    return pick(e, list(indices), dim if d is None else d)


def pick_range(Expression x, s, e, d=0):
    """Elements [s, e) along dimension d, which keeps its place with size e - s."""
    return _pick_range(x, s, e, d, 1)


cdef Expression _pick_range(Expression x, object s, object e, object d, int step):
    """Every step-th element of [s, e) along dimension d (x[s:e:step] along d)."""
    s, e = _as_index(s, "pick_range"), _as_index(e, "pick_range")
    cdef Node* n = _check(x)
    cdef int k = _dim_index("pick_range", n, d)
    if not 0 <= s < e <= n.d[k]:
        raise IndexError(f"pick_range: range [{s}, {e}) is not inside [0, {n.d[k]}) "
                         f"(dimension {k} of {_dimstr(n)})")
    cdef Attrs attr
    memset(&attr, 0, sizeof(Attrs))
    attr.range.dim = k
    attr.range.step = step
    cdef int64_t dims[4]
    cdef int a
    for a in range(MAX_DIMS):
        dims[a] = (e - s + step - 1) // step if a == k else n.d[a]
    return _wrap(_here().add_node(OP_PICK_RANGE, 1, &x.idx, _checked_shape("pick_range", n.nd, dims, n.bs),
                              s, &attr))


def pick_batch_elems(Expression x, vs):
    """The batch elements of the list vs (repeats allowed) as a batch of len(vs)."""
    cdef Node* n = _check(x)
    idx = [_as_index(i, "pick_batch_elems") for i in vs]
    if not idx:
        raise ValueError("pick_batch_elems: needs at least one index")
    for i in idx:
        if not 0 <= i < n.bs:
            raise IndexError(f"pick_batch_elems: batch element {i} out of range [0, {n.bs})")
    cdef int32_t at = _here().add_ints(idx, len(idx))
    n = &_here().nodes[x.idx]
    return _wrap(_here().add_node(OP_PICK_BATCH_ELEMS, 1, &x.idx, _like(n, len(idx)), at))


def pick_batch_elem(Expression x, v):
    """Batch element v, as an expression of batch size 1."""
    return pick_batch_elems(x, [v])


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
    return _wrap(_here().add_node(OP_TRANSPOSE, 1, &x.idx, _checked_shape("transpose", nd, d, n.bs), 0, &at))


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
    return _wrap(_here().add_node(OP_RESHAPE, 1, &x.idx, shape))


# ---------------------------------------------------------- fused LSTM ops ----
# Gate vectors hold blocks of `hidden_dim`: [i, f_1 .. f_k, o, g].

def lstm_gates(Expression pre, int hidden_dim, float forget_bias=0.0):
    """Gate activations of a pre-activation vector of blocks [i, f_1..f_k, o, g]:
    logistic on all blocks but the last (forget blocks get + forget_bias), tanh on g."""
    _finite("lstm_gates", "forget_bias", forget_bias)
    cdef Node* n = _check(pre)
    if hidden_dim <= 0 or n.nd != 1 or rows(n) % hidden_dim != 0 or rows(n) // hidden_dim < 3:
        raise DimensionError(f"lstm_gates: pre-activations of shape {_dimstr(n)} are not "
                             f"3 or more blocks of {hidden_dim}")
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.gates.hidden = hidden_dim
    at.gates.forget_bias = forget_bias
    return _wrap(_here().add_node(OP_LSTM_GATES, 1, &pre.idx, _like(n, n.bs), 0, &at))


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
            c = &_here().nodes[ids[m]]
            if rows(c) != h or c.nd != 1 or c.bs != g.bs:
                raise DimensionError(f"lstm_cell: previous cell {m - 1} has shape {_dimstr(c)}, "
                                     f"expected ({h},) with batch {g.bs}")
        return _wrap(_here().add_node(OP_LSTM_CELL, n, ids, _matrix_shape("lstm_cell", h, 1, g.bs)))
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
    return _wrap(_here().add_node(OP_LSTM_HIDDEN, 2, argv, _like(c, c.bs)))


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
