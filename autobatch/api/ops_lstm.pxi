# The fused LSTM nodes of the builders (and DyNet's vanilla_lstm_* functions), and
# the compiled sequence of VanillaLSTMBuilder.transduce. Included by api/core.pyx; uses
# api/expression.pxi and api/shapes.pxi.

# ---------------------------------------------------------- fused LSTM ops ----
# Gate vectors hold blocks of `hidden_dim`: [i, f_1 .. f_k, o, g].

def lstm_gates(Expression pre, int hidden_dim, float forget_bias=0.0):
    """Gate activations of a pre-activation vector of blocks [i, f_1..f_k, o, g], each of
    ``hidden_dim`` rows: logistic on all blocks but the last (the forget blocks get
    ``+ forget_bias``), tanh on g. Shape: pre's shape and batch size.

    A fused LSTM node of this library (not in DyNet): with ``lstm_cell`` and ``lstm_hidden``
    it is what the builders use. Batching: the lstm_gates nodes of one shape ready together
    run as one kernel.

    Example::

        gates = dy.lstm_gates(dy.affine_transform([b, Wx, x, Wh, h]), hidden, 1.0)
    """
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
    """The cell update c = i * g + sum_m f_m * prev_cells[m], from ``gates`` made by
    ``lstm_gates`` with len(prev_cells) forget blocks (one for an LSTM, two for a Tree-LSTM
    node with two children); no previous cells (a first step, a leaf) gives c = i * g.

    Shape: (hidden,) per batch element (batch sizes equal or 1). A fused node of this
    library; batching: the lstm_cell nodes of one shape and child count ready together run
    as one kernel.

    Example::

        c = dy.lstm_cell(gates, [c_prev])
    """
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
    """The hidden output h = o * tanh(cell), ``o`` being the second-to-last block of ``gates``
    (from ``lstm_gates``). Shape: the cell's shape and batch size.

    A fused node of this library; batching: the lstm_hidden nodes of one shape ready
    together run as one kernel.

    Example::

        h = dy.lstm_hidden(c, gates)
    """
    cdef ComputationGraph cg = _here()
    _check_args(cg, cell, gates)   # before any Node*: see _check_args
    cdef Node* c = _node(cg, cell)
    cdef Node* g = _node(cg, gates)
    if c.nd != 1 or g.nd != 1 or rows(c) == 0 or rows(g) % rows(c) != 0 or \
            rows(g) // rows(c) < 3 or c.bs != g.bs:      # (an empty cell: no blocks to divide by)
        raise DimensionError(f"lstm_hidden: cell {_dimstr(c)} does not fit gates {_dimstr(g)}")
    cdef int32_t argv[2]
    argv[0] = cell.idx
    argv[1] = gates.idx
    return _wrap(_here().add_node(OP_LSTM_HIDDEN, 2, argv, _like(c, c.bs)))


cdef bint _lstm_vector(ComputationGraph g, object e, int r) except -1:
    """Whether e is an Expression of g holding one (unbatched) vector of r rows."""
    if not isinstance(e, Expression):
        return False
    cdef Node* n = _check_in(g, <Expression>e)
    return n.nd == 1 and rows(n) == r and n.bs == 1


cdef bint _lstm_matrix(ComputationGraph g, object e, int r, int c) except -1:
    """Whether e is an Expression of g holding one (unbatched) r x c matrix."""
    if not isinstance(e, Expression):
        return False
    cdef Node* n = _check_in(g, <Expression>e)
    return n.nd == 2 and rows(n) == r and cols(n) == c and n.bs == 1


def _vanilla_lstm_run(list xs, list layer_params, list h0, list c0, int hidden,
                      float forget_bias):
    """VanillaLSTMBuilder's steps over the inputs xs, for RNNState.transduce: the nodes
    its _cell makes, in the same order, without a Python call per node. Each layer's
    parameters are [W_x, W_h, b]; h0 and c0 hold each layer's initial state or None.
    Returns the top layer's outputs, or None when an input or a state is not one
    unbatched vector of the size expected: the caller then takes the general path,
    which broadcasts batches and reports errors."""
    cdef ComputationGraph g = _here()
    cdef int layers = len(layer_params), L, G = 4 * hidden
    cdef Py_ssize_t t
    cdef int32_t argv[3]
    cdef Attrs at
    cdef Expression pre, gates, cell, x
    cdef list hs = list(h0), cs = list(c0), out = []
    cdef object h, c
    if layers == 0 or not isinstance(layer_params[0][0], Expression):
        return None
    cdef int in_dim = cols(_check_in(g, layer_params[0][0]))
    for L in range(layers):                 # everything checked before a node is made
        Wx, Wh, b = layer_params[L]
        if not (_lstm_matrix(g, Wx, G, hidden if L else in_dim) and _lstm_matrix(g, Wh, G, hidden)
                and _lstm_vector(g, b, G)):
            return None
        if (hs[L] is not None and not _lstm_vector(g, hs[L], hidden)) or \
                (cs[L] is not None and not _lstm_vector(g, cs[L], hidden)):
            return None
    for x in xs:
        if not _lstm_vector(g, x, in_dim):
            return None
    memset(&at, 0, sizeof(Attrs))
    at.gates.hidden = hidden
    at.gates.forget_bias = forget_bias
    # every step's shapes: the pre-activations and gates, then the cell and hidden output
    cdef Shape gate_shape = _product_shape("affine_transform", G, 1, 1, 1)
    cdef Shape cell_shape = _matrix_shape("lstm_cell", hidden, 1, 1)
    for t in range(len(xs)):
        x = xs[t]
        for L in range(layers):
            Wx, Wh, b = layer_params[L]
            h, c = hs[L], cs[L]
            argv[0], argv[1], argv[2] = (<Expression>b).idx, (<Expression>Wx).idx, x.idx
            pre = _wrap_in(g, g.add_node(OP_AFFINE, 3, argv, gate_shape))
            if h is not None:
                argv[0], argv[1], argv[2] = pre.idx, (<Expression>Wh).idx, (<Expression>h).idx
                pre = _wrap_in(g, g.add_node(OP_AFFINE, 3, argv, gate_shape))
            gates = _wrap_in(g, g.add_node(OP_LSTM_GATES, 1, &pre.idx, gate_shape, 0, &at))
            if c is None:
                c = zeros(hidden, batch_size=1)
            argv[0], argv[1] = gates.idx, (<Expression>c).idx
            cell = _wrap_in(g, g.add_node(OP_LSTM_CELL, 2, argv, cell_shape))
            argv[0], argv[1] = cell.idx, gates.idx
            x = _wrap_in(g, g.add_node(OP_LSTM_HIDDEN, 2, argv, cell_shape))
            hs[L], cs[L] = x, cell
        out.append(x)
    return out


# DyNet's VanillaLSTMGates (dynet/nodes-lstm.cc) as the ops that compute it: the inputs
# concatenated, masked (the dropout variants), one affine_transform (one gemm per weight
# for all the nodes of a batch) and lstm_gates with DyNet's forget bias of +1.

cdef Expression _vanilla_gates(str op, list x_t, object h_tm1, object Wx, object Wh, object b,
                               object mask_x, object mask_h, float weightnoise_std):
    """DyNet's checks (VanillaLSTMGates::dim_forward), then the nodes."""
    if not weightnoise_std >= 0.0 or weightnoise_std == float("inf"):
        raise ValueError(f"{op}: weightnoise_std must be a finite number >= 0, got {weightnoise_std}")
    if not x_t:
        raise ValueError(f"{op}: x_t needs at least one expression")
    cdef list xs = [_as_expr(x) for x in x_t]
    cdef Expression h = _as_expr(h_tm1), wx = _as_expr(Wx), wh = _as_expr(Wh), eb = _as_expr(b)
    cdef list masks = [] if mask_x is None else [_as_expr(mask_x), _as_expr(mask_h)]
    cdef ComputationGraph g = _here()
    cdef Expression e
    for e in xs + [h, wx, wh, eb] + masks:      # every node first (see _check_args)
        _check_in(g, e)
    cdef Node* n
    cdef int k, batch = _node(g, xs[0]).bs, inputs = 0
    for k in range(len(xs)):
        n = _node(g, xs[k])
        if n.nd != 1 or n.bs != batch:
            raise DimensionError(f"{op}: x_t[{k}] of shape {_dimstr(n)} is not a vector with "
                                 f"the batch size of x_t[0] ({batch})")
        inputs += rows(n)
    n = _node(g, h)
    if n.nd != 1:
        raise DimensionError(f"{op}: h_tm1 must be a vector, got {_dimstr(n)}")
    cdef int hidden = rows(n)
    _vanilla_shape(op, "Wx", _node(g, wx), 4 * hidden, inputs)
    _vanilla_shape(op, "Wh", _node(g, wh), 4 * hidden, hidden)
    _vanilla_shape(op, "b", _node(g, eb), 4 * hidden, 0)
    if masks:
        _vanilla_mask(op, "dropout_mask_x", _node(g, masks[0]), inputs, batch)
        _vanilla_mask(op, "dropout_mask_h", _node(g, masks[1]), hidden, batch)
    if weightnoise_std > 0.0:
        # Wx, Wh and b plus fresh normal noise, a constant of each node (the weights'
        # gradients are those of the noisy copies). DyNet 2.2 draws the noisy copies and
        # then skips both products (its gates see the bias alone): a bug not copied.
        wx = _binary(OP_ADD, wx, random_normal((4 * hidden, inputs), 0.0, weightnoise_std))
        wh = _binary(OP_ADD, wh, random_normal((4 * hidden, hidden), 0.0, weightnoise_std))
        eb = _binary(OP_ADD, eb, random_normal(4 * hidden, 0.0, weightnoise_std))
    cdef Expression x = xs[0] if len(xs) == 1 else concatenate(xs)
    if masks:       # constants, as in DyNet (its node gives them no gradient, even
                    # to a backward(full=True))
        x = _binary(OP_CMULT, x, nobackprop(masks[0]))
        h = _binary(OP_CMULT, h, nobackprop(masks[1]))
    return lstm_gates(affine_transform([eb, wx, x, wh, h]), hidden, 1.0)


cdef list _input_list(str op, object x_t):
    """x_t of the _concat variants: a list (or tuple) of expressions, as DyNet's list;
    an Expression alone would be iterated element by element."""
    if not isinstance(x_t, (list, tuple)):
        raise TypeError(f"{op}: x_t must be a list of expressions, got {type(x_t).__name__}")
    return list(x_t)


cdef int _vanilla_shape(str op, str what, Node* n, int r, int c) except -1:
    """A matrix (r, c), or a vector (r,) when c is 0, as VanillaLSTMGates wants it."""
    if (n.nd != 1 or rows(n) != r) if c == 0 else (n.nd != 2 or rows(n) != r or cols(n) != c):
        raise DimensionError(f"{op}: {what} must be " + (f"a vector ({r},)" if c == 0 else
                             f"a matrix ({r}, {c})") + f", got {_dimstr(n)}")
    return 0


cdef int _vanilla_mask(str op, str what, Node* n, int r, int batch) except -1:
    if n.nd != 1 or rows(n) != r or not (n.bs == 1 or n.bs == batch):
        raise DimensionError(f"{op}: {what} must be a vector ({r},) with batch size 1 or "
                             f"{batch}, got {_dimstr(n)}")
    return 0


def vanilla_lstm_gates(x_t, h_tm1, Wx, Wh, b, float weightnoise_std=0.0):
    """DyNet's fused LSTM gates [i, f, o, g] of ``dy.vanilla_lstm_gates(x_t, h_tm1, Wx, Wh, b,
    weightnoise_std=0.0)``: logistic(i, f + 1, o) and tanh(g) of ``Wx x_t + Wh h_tm1 + b``
    (the forget bias of +1 as in DyNet). x_t (I,) and h_tm1 (H,) are vectors, Wx is
    (4H, I), Wh (4H, H), b (4H,). ``weightnoise_std > 0`` adds normal noise of that
    standard deviation to Wx, Wh and b, drawn anew for each node (DyNet 2.2 draws it and
    then skips the products, a bug: its gates are those of the bias alone).

    Shape: (4H,) per batch element (a batch of 1 repeats). The products of every gates
    node with the same weights batch as one gemm per weight (``affine_transform``), the
    nonlinearities as one kernel (``lstm_gates``).

    Example::

        gates = dy.vanilla_lstm_gates(x, h, Wx, Wh, b)
        c = dy.vanilla_lstm_c(c, gates)
        h = dy.vanilla_lstm_h(c, gates)
    """
    return _vanilla_gates("vanilla_lstm_gates", [x_t], h_tm1, Wx, Wh, b, None, None,
                          weightnoise_std)


def vanilla_lstm_gates_concat(x_t, h_tm1, Wx, Wh, b, float weightnoise_std=0.0):
    """``vanilla_lstm_gates`` of the inputs ``x_t`` (a list of vectors) concatenated: Wx has
    as many columns as their sizes summed (DyNet's ``dy.vanilla_lstm_gates_concat(x_t,
    h_tm1, Wx, Wh, b, weightnoise_std=0.0)``). Shape and batching as vanilla_lstm_gates.

    Example::

        gates = dy.vanilla_lstm_gates_concat([word, feature], h, Wx, Wh, b)
    """
    return _vanilla_gates("vanilla_lstm_gates_concat", _input_list("vanilla_lstm_gates_concat", x_t),
                          h_tm1, Wx, Wh, b, None, None, weightnoise_std)


def vanilla_lstm_gates_dropout(x_t, h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h,
                               float weightnoise_std=0.0):
    """``vanilla_lstm_gates`` with dropout masks: the gates of ``Wx (x_t * dropout_mask_x) +
    Wh (h_tm1 * dropout_mask_h) + b`` (DyNet's ``dy.vanilla_lstm_gates_dropout(x_t, h_tm1,
    Wx, Wh, b, dropout_mask_x, dropout_mask_h, weightnoise_std=0.0)``). The masks are
    vectors of x_t's and h_tm1's sizes, with batch size 1 (one mask for the whole batch)
    or x_t's; they are used as given (scale them by 1 / (1 - p) yourself, as in DyNet).
    Shape and batching as vanilla_lstm_gates (the masking one elementwise loop).

    Example::

        mask_x = dy.random_bernoulli((I,), 0.8, 1 / 0.8)
        gates = dy.vanilla_lstm_gates_dropout(x, h, Wx, Wh, b, mask_x, mask_h)
    """
    return _vanilla_gates("vanilla_lstm_gates_dropout", [x_t], h_tm1, Wx, Wh, b,
                          dropout_mask_x, dropout_mask_h, weightnoise_std)


def vanilla_lstm_gates_dropout_concat(x_t, h_tm1, Wx, Wh, b, dropout_mask_x, dropout_mask_h,
                                      float weightnoise_std=0.0):
    """``vanilla_lstm_gates_dropout`` of the inputs ``x_t`` (a list of vectors) concatenated;
    ``dropout_mask_x`` has their sizes summed (DyNet's
    ``dy.vanilla_lstm_gates_dropout_concat(x_t, h_tm1, Wx, Wh, b, dropout_mask_x,
    dropout_mask_h, weightnoise_std=0.0)``, what xnmt's LSTM calls). Shape and batching as
    vanilla_lstm_gates.

    Example::

        gates = dy.vanilla_lstm_gates_dropout_concat([x], h, Wx, Wh, b, mask_x, mask_h)
    """
    return _vanilla_gates("vanilla_lstm_gates_dropout_concat",
                          _input_list("vanilla_lstm_gates_dropout_concat", x_t), h_tm1, Wx, Wh,
                          b, dropout_mask_x, dropout_mask_h, weightnoise_std)


def vanilla_lstm_c(c_tm1, gates_t):
    """DyNet's ``dy.vanilla_lstm_c(c_tm1, gates_t)``: the new cell i * g + f * c_tm1 from the
    gates of ``vanilla_lstm_gates``. Shape: (hidden,) per batch element.

    Batching: the same kernel as ``lstm_cell``, one call for the nodes of one shape.

    Example::

        c = dy.vanilla_lstm_c(c, gates)
    """
    return lstm_cell(gates_t, [c_tm1])


def vanilla_lstm_h(Expression c_t, Expression gates_t):
    """DyNet's ``dy.vanilla_lstm_h(c_t, gates_t)``: the hidden output o * tanh(c_t) from the
    gates of ``vanilla_lstm_gates``. Shape: (hidden,) per batch element.

    Batching: the same kernel as ``lstm_hidden``, one call for the nodes of one shape.

    Example::

        h = dy.vanilla_lstm_h(c, gates)
    """
    cdef ComputationGraph g = _here()
    _check_args(g, c_t, gates_t)
    if rows(_node(g, gates_t)) != 4 * rows(_node(g, c_t)):
        raise DimensionError(f"vanilla_lstm_h: gates_t of shape {_dimstr(_node(g, gates_t))} "
                             f"are not 4 times c_t's {_dimstr(_node(g, c_t))}")
    return lstm_hidden(c_t, gates_t)
