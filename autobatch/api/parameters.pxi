# Parameters and lookup tables: their values (runtime/param_buffers), gradients and the
# leaves that read them. Included by api/core.pyx.

# ------------------------------------------------------------- parameters ----

# p.save / p.populate are DyNet's methods, but reading and writing files is io/'s job:
# autobatch.io.parameter_files hands itself over when it loads (api imports nothing above it)
_parameter_files_module = None


def _set_parameter_files(module):
    global _parameter_files_module
    _parameter_files_module = module


cdef object _parameter_files():
    if _parameter_files_module is None:
        raise RuntimeError("autobatch.io.parameter_files is not loaded: import autobatch first")
    return _parameter_files_module

cdef inline int64_t elems_of(Shape s) noexcept:
    return <int64_t>s.d[0] * s.d[1] * s.d[2] * s.d[3]


cdef int _checked_size(str where, int64_t n, int64_t per) except -1:
    if n * per >= MAX_ELEMS:
        raise DimensionError(f"{where}: {n} x {per} elements is more than one array can hold (2^31)")
    return 0


cdef float* _float_ptr(object arr):
    cdef float[::1] view = arr
    return &view[0] if view.shape[0] > 0 else NULL


cdef int32_t _alias_leaf(object owner, int op, Shape shape, ValueSource* src, float* grad,
                         int32_t idata, bint headroom=True) except -1:
    """A leaf that reads parameter values when it is first computed (an OP_PARAM points
    into them, an OP_LOOKUP copies its row into its own memory, as DyNet's nodes copy
    at forward time: see runtime/param_buffers.pyx) and, given grad, trains them."""
    cdef ComputationGraph g = _here()
    cdef int32_t i = g.add_node(op, 0, NULL, shape, idata, NULL, headroom)
    cdef Node* n
    if op == OP_LOOKUP:
        g.leaf_memory(i)
    n = &g.nodes[i]
    if op != OP_LOOKUP:
        n.val = src.values
    n.flags |= F_ALIAS
    if grad != NULL:
        n.grad = grad
        n.flags |= F_NEEDS_GRAD | F_TRAINABLE
    g.add_read(i, src)
    if not g.keepalive or g.keepalive[len(g.keepalive) - 1] is not owner:
        g.keepalive.append(owner)     # the graph points into its memory
    return i


# A Parameters (or LookupParameters) is an Expression whose node is made in each graph
# that uses it: _check_in calls _refresh when its node is not a live node of the graph
# (another graph's, or dropped by cg_revert: g.owns checks the node's birth version, so
# a cached index never points at a dropped or reused slot).

cdef int _refresh(ComputationGraph g, Expression e) except -1:
    """Point a Parameters or LookupParameters at its node of g (created on first use in
    g, without headroom: see ComputationGraph.add_node); any other Expression of another
    graph is stale."""
    cdef Expression node
    if isinstance(e, Parameters):
        node = (<Parameters>e)._expr(True, False)
    elif isinstance(e, LookupParameters):
        node = (<LookupParameters>e)._table_expr(True, False)
    else:
        raise StaleExpressionError(
            "stale Expression: it was created before the computation graph was renewed, "
            "dropped by cg_revert(), or made by another thread (each thread builds its own graph)")
    e.idx = node.idx
    e.version = node.version
    return 0


cdef inline bint _is_param(object e):
    return isinstance(e, Parameters) or isinstance(e, LookupParameters)


cdef tuple _param_shape(object shape, str where, int max_dims):
    """A user's parameter shape (an int or 1 to max_dims sizes, 0 or more) as a tuple."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not 1 <= len(shape) <= max_dims:
        raise DimensionError(f"{where}: shapes have 1 to {max_dims} dimensions, got {shape}")
    return tuple([_as_size(v, where) for v in shape])


cdef class Parameters(Expression):
    """A trainable tensor of 1 to 4 dimensions, stored column-major as DyNet does. The
    gradient is one fixed numpy array; the values are read by a graph's nodes as they
    were when the graph computed them (runtime/param_buffers.pyx, docs/security.md
    "Parameters read by a graph").

    As in DyNet, a Parameters is an Expression: used as one (`W * x`, `dy.tanh(b)`,
    `p.value()`, `p[0]`), it stands for its node in the calling thread's current graph
    (one per graph, created on first use, trained by backward)."""
    cdef readonly ValueBuffers _buf       # the values (1-D float32, column-major)
    cdef readonly object _grad_flat
    cdef float* gptr
    cdef tuple _shape                     # as the user gave it, trailing 1s included
    cdef Shape dims                       # ... as a node's shape
    cdef int32_t cached_idx[2]
    cdef int32_t cached_version[2]
    cdef public object _name
    cdef public bint _updated
    cdef public object _owner

    def __cinit__(self, *args, **kwargs):
        self.version = -1                 # no graph's: its node is made on first use

    def __init__(self, shape, name="", owner=None):
        self._shape = _param_shape(shape, "parameter", MAX_DIMS)
        self.dims = _shape_from("parameter", self._shape, 1)
        n = elems_of(self.dims)
        self._buf = ValueBuffers(n)
        self._grad_flat = np.zeros(n, dtype=np.float32)
        self.gptr = _float_ptr(self._grad_flat)
        self.cached_version[0] = self.cached_version[1] = -1
        self._name = name
        self._updated = True
        self._owner = owner

    @property
    def _flat(self):
        """The values (1-D float32), safe to change in place: copied to another buffer
        first when a live graph computed with them, so that graph keeps what it read."""
        return self._buf.values()

    def shape(self):
        """The shape as given to ``add_parameters`` (a tuple, trailing 1s kept), as DyNet's
        ``shape()``."""
        return self._shape

    def _view(self, arr):
        return arr.reshape(self._shape, order="F")     # a view: the storage is column-major

    def as_array(self):
        """Copy of the values, shaped like the parameter."""
        return self._view(self._buf.current).copy()

    def grad_as_array(self):
        """A copy of the accumulated gradient, shaped like the parameter (DyNet's
        ``grad_as_array``)."""
        return self._view(self._grad_flat).copy()

    @property
    def values(self):
        """Writable view of the values: the memory nodes computed from now on read (a
        trainer step or a change while a graph reads them may move them to another
        buffer: take the view again after one)."""
        return self._view(self._flat)

    @property
    def grad(self):
        """Writable numpy view of the parameter's accumulated gradient (the memory backward
        adds into; trainers zero it after each update)."""
        return self._view(self._grad_flat)

    def set_value(self, arr):
        """Overwrite the values with ``arr`` (a numpy array or nested lists of exactly the
        parameter's shape, as DyNet requires: a transposed or flat array is a ValueError),
        as DyNet's ``set_value``. A graph that already computed with the old values keeps
        them (DyNet's nodes copy the values): ``value(recalculate=True)`` reads the new."""
        arr = np.asarray(arr, dtype=np.float32)
        if arr.shape != self._shape:
            raise ValueError(f"Shape of values and parameter don't match in Parameters.set_value: "
                             f"{arr.shape} != {self._shape}")
        self._view(self._flat)[...] = arr

    def zero(self):
        """Set every value of the parameter to zero (a graph that computed with the old
        values keeps them)."""
        self._flat[:] = 0

    def scale(self, float s):
        """Multiply every value of the parameter by ``s`` (a graph that computed with the
        old values keeps them)."""
        flat = self._flat
        flat *= s

    def scale_gradient(self, float s):
        """Multiply the parameter's accumulated gradient by ``s``, in place."""
        self._grad_flat *= s

    def clip_inplace(self, float left, float right):
        """Clip every value into [left, right] (DyNet's clip_inplace);
        left > right is a ValueError."""
        if not left <= right:
            raise ValueError(f"clip_inplace: left ({left}) must not exceed right ({right})")
        flat = self._flat
        np.clip(flat, left, right, out=flat)

    def name(self):
        """The parameter's name within its collection (e.g. '/lstm/W_x'), as DyNet's
        ``name()``."""
        return self._name

    def is_updated(self):
        """Whether trainers update this parameter (``set_updated(False)`` freezes it)."""
        return self._updated

    def set_updated(self, b):
        """Freeze (``False``) or unfreeze (``True``) the parameter: a frozen one gets no
        gradient and trainers leave it alone (DyNet's ``set_updated``)."""
        self._updated = bool(b)

    def expr(self, update=False):
        """The parameter as an Expression of the current graph (one node per graph).

        As in DyNet, the default (update=False) is a constant, like const_parameter(p):
        no gradient reaches p. Use the Parameters itself (or expr(update=True)) in an
        expression to train it."""
        return self._expr(update, True)

    cdef Expression _expr(self, bint update, bint headroom):
        cdef int k = 0 if (update and self._updated) else 1
        cdef ComputationGraph g = _here()
        if g.owns(self.cached_version[k], self.cached_idx[k]):   # not renewed, not reverted
            return _wrap_in(g, self.cached_idx[k])
        cdef int32_t i = _alias_leaf(self, OP_PARAM, self.dims, &self._buf.src,
                                     self.gptr if k == 0 else NULL, 0, headroom)
        self.cached_idx[k] = i
        self.cached_version[k] = g.version_id
        return _wrap_in(g, i)

    def __reduce__(self):
        raise TypeError("Parameters cannot be pickled: save them with dy.save or "
                        "ParameterCollection.save (or pickle as_array())")

    # partial save/load, as DyNet (autobatch.io.parameter_files)
    def save(self, fname, key="", append=False, format=None):
        """Write this parameter to `fname` under the name `key` (default: its full name);
        `append` adds it to an existing file. `format`: None/"autobatch" (ours) or
        "dynet" (DyNet's text format; None when appending: the file's format)."""
        _parameter_files().save_one(self, fname, key, append, format)

    def populate(self, fname, key=""):
        """Set the values from the parameter stored under `key` (default: its own name) in
        `fname`, a file in our format or DyNet's; the shapes must match. From a DyNet
        file the gradient is read too (zero when not stored), as DyNet does."""
        _parameter_files().populate_one(self, fname, key)

    def populate_from_textfile(self, fname, key=""):
        """DyNet's name for `populate`."""
        self.populate(fname, key)

    def write_to_textfile(self, fname, key="", append=False):
        """DyNet's `write_to_textfile`: `save` in DyNet's text format."""
        self.save(fname, key, append, "dynet")

    def __repr__(self):
        return f"<Parameters {self._name or ''} {self.shape()}>"


cdef class LookupParameters(Expression):
    """A table of trainable rows; `lp[i]` looks row i up. A row has 1 to 4 dimensions
    (a table of shape (n, d) has vector rows, (n, r, c) matrix rows ...). A backward
    marks the rows looked up by the trainable lookups of its graph made up to the node
    it starts from (as DyNet does, also those whose gradient is 0), so that trainers
    update only those (sparse updates).

    As in DyNet, a LookupParameters is an Expression too: used as one (`dy.tanh(lp)`,
    `lp.npvalue()`), it stands for the whole table as one node of shape row shape +
    (rows,) in the current graph (every row then gets a gradient, and a backward marks
    every row)."""
    cdef readonly ValueBuffers _buf       # the values: rows one after another, each column-major
    cdef readonly object _grad_flat
    cdef float* gptr
    cdef readonly int n_rows
    """The number of rows of the table."""
    cdef readonly int row_size
    """The number of elements of one row."""
    cdef readonly tuple row_shape
    """The shape of one row (a tuple), as ``lookup`` gives it."""
    cdef Shape row_dims                   # a row as a node's shape
    cdef readonly object _used_mask       # uint8 numpy array, one per row
    cdef uint8_t* used
    # the gradient may be nonzero on rows the mask does not mark (written from Python:
    # the `grad` view, a loaded file, an all-reduce; or marks cleared with it kept); else
    # backward alone wrote it, marking every row it added into, and a dense update reads
    # only the marked rows' gradient (model/update_rules.pyx)
    cdef public bint _grad_off_marks
    cdef public object _name
    cdef public bint _updated
    cdef public object _owner
    cdef int32_t cached_idx[2]
    cdef int32_t cached_version[2]

    def __cinit__(self, *args, **kwargs):
        self.version = -1                 # no graph's: its node is made on first use

    def __init__(self, shape, name="", owner=None):
        shape = _param_shape(shape, "lookup parameters", MAX_DIMS + 1)
        if len(shape) < 2:
            raise DimensionError(f"lookup parameters need a shape (rows, dims...), got {shape}")
        self.n_rows, self.row_shape = shape[0], shape[1:]
        self.row_dims = _shape_from("lookup parameters", self.row_shape, 1)
        self.row_size = elems_of(self.row_dims)
        _checked_size("lookup parameters", self.n_rows, self.row_size)
        self._buf = ValueBuffers(self.n_rows * self.row_size)
        self._grad_flat = np.zeros(self.n_rows * self.row_size, dtype=np.float32)
        self.gptr = _float_ptr(self._grad_flat)
        self._used_mask = np.zeros(self.n_rows, dtype=np.uint8)
        cdef uint8_t[::1] m = self._used_mask
        self.used = &m[0] if self.n_rows else NULL     # (no rows: nothing to mark)
        self._name = name
        self._updated = True
        self._owner = owner
        self.cached_version[0] = self.cached_version[1] = -1

    @property
    def _flat(self):
        """The values (1-D float32), safe to change in place: copied to another buffer
        first when a live graph computed with them, so that graph keeps what it read."""
        return self._buf.values()

    def shape(self):
        """``(n_rows,) + row shape`` (DyNet's ``shape()``)."""
        return (self.n_rows,) + self.row_shape

    def _table(self, arr):
        """(n_rows,) + row shape view of a flat array: row i in its npvalue() layout."""
        k = len(self.row_shape)
        return arr.reshape((self.n_rows,) + self.row_shape[::-1]).transpose((0,) + tuple(range(k, 0, -1)))

    def as_array(self):
        """A copy of the table, of shape (n_rows,) + row shape; row i as
        ``lookup(i).npvalue()`` shows it."""
        return self._table(self._buf.current).copy()

    def grad_as_array(self):
        """A copy of the accumulated gradient, of shape (n_rows,) + row shape (rows not
        looked up are zero)."""
        return self._table(self._grad_flat).copy()

    @property
    def values(self):
        """Writable (rows, row_size) view of the table (each row flat, column-major; as
        Parameters.values, valid until the next trainer step or change)."""
        return self._flat.reshape(self.n_rows, self.row_size)

    @property
    def grad(self):
        """Writable numpy view of the table's accumulated gradient (the memory backward
        adds into; trainers zero it after each update)."""
        self._grad_off_marks = True         # what is written through it is not marked
        return self._grad_flat.reshape(self.n_rows, self.row_size)

    def used_rows(self):
        """Rows marked by a backward since the last `clear_used()` (see the class), as a
        sorted int array."""
        return np.flatnonzero(self._used_mask)

    def clear_used(self):
        """Forget which rows were looked up (trainers do it after each update; the next
        update then touches only the rows used after it)."""
        self._used_mask[:] = 0
        self._grad_off_marks = True         # the gradient of those rows is kept

    def set_value(self, value):
        """Values of shape (n_rows,) + row shape (row i as lookup(i).npvalue() shows it)."""
        arr = np.asarray(value, dtype=np.float32)
        if arr.shape != self.shape():
            raise ValueError(f"set_value: shape {arr.shape} does not match {self.shape()}")
        self._table(self._flat)[...] = arr

    def init_row(self, int i, row):
        """Set row ``i`` to ``row`` (an array of the row shape), as DyNet's ``init_row``;
        IndexError outside the table."""
        self._row_check(i)
        self._table(self._flat)[i] = np.asarray(row, dtype=np.float32).reshape(self.row_shape)

    def init_from_array(self, arr):
        """Set the whole table from an array of shape (n_rows,) + row shape (DyNet's
        ``init_from_array``)."""
        self.set_value(arr)

    def zero(self):
        """Set every value of the table to zero (a graph that computed with the old values
        keeps them)."""
        self._flat[:] = 0

    def scale(self, float s):
        """Multiply every value of the table by ``s`` (a graph that computed with the old
        values keeps them)."""
        flat = self._flat
        flat *= s

    def scale_gradient(self, float s):
        """Multiply the table's accumulated gradient by ``s``, in place."""
        self._grad_flat *= s
        if not isfinite(s):                 # 0 * inf is NaN: rows not marked change
            self._grad_off_marks = True

    def name(self):
        """The table's name within its collection (e.g. '/lstm/W_x'), as DyNet's
        ``name()``."""
        return self._name

    def is_updated(self):
        """Whether trainers update this table (``set_updated(False)`` freezes it)."""
        return self._updated

    def set_updated(self, b):
        """Freeze (``False``) or unfreeze (``True``) the table: a frozen one gets no
        gradient and trainers leave it alone (DyNet's ``set_updated``)."""
        self._updated = bool(b)

    cdef int _row_check(self, long i) except -1:
        if not 0 <= i < self.n_rows:
            raise IndexError(f"lookup index {i} out of range for a table of {self.n_rows} rows")
        return 0

    def __getitem__(self, i):
        """Row i (lookup(self, i))."""
        return lookup(self, i)

    def batch(self, i):
        """Rows ``i`` (a list) as one batched expression: ``dy.lookup_batch(self, i)``
        (DyNet's ``batch``); shape the row shape, batch size len(i)."""
        return lookup_batch(self, i)

    def expr(self, update=True):
        """The whole table as one expression of shape row shape + (rows,), as in DyNet
        (one node per graph; update=False: a constant)."""
        return self._table_expr(update, True)

    cdef Expression _table_expr(self, bint update, bint headroom):
        cdef int k = 0 if (update and self._updated) else 1
        cdef ComputationGraph g = _here()
        if g.owns(self.cached_version[k], self.cached_idx[k]):   # not renewed, not reverted
            return _wrap_in(g, self.cached_idx[k])
        cdef int32_t i = _alias_leaf(self, OP_PARAM, _shape_from("parameter", self.row_shape + (self.n_rows,), 1),
                                     &self._buf.src, self.gptr if k == 0 else NULL, 0, headroom)
        if k == 0 and self.n_rows:      # a backward from here on marks every row used
            g.add_row_mark(i, self.used, self.n_rows)       # (whole=0 would read as one row)
        self.cached_idx[k] = i
        self.cached_version[k] = g.version_id
        return _wrap_in(g, i)

    def __reduce__(self):
        raise TypeError("LookupParameters cannot be pickled: save them with dy.save or "
                        "ParameterCollection.save (or pickle as_array())")

    # partial save/load, as DyNet (autobatch.io.parameter_files)
    def save(self, fname, key="", append=False, format=None):
        """Write this lookup table to `fname` under the name `key` (default: its full name);
        `append` adds it to an existing file. `format`: None/"autobatch" (ours) or
        "dynet" (DyNet's text format; None when appending: the file's format)."""
        _parameter_files().save_one(self, fname, key, append, format)

    def populate(self, fname, key=""):
        """Set the values from the lookup table stored under `key` (default: its own name) in
        `fname`, a file in our format or DyNet's; the shapes must match. From a DyNet
        file the gradient is read too (zero when not stored), as DyNet does."""
        _parameter_files().populate_one(self, fname, key)

    def populate_from_textfile(self, fname, key=""):
        """DyNet's name for `populate`."""
        self.populate(fname, key)

    def write_to_textfile(self, fname, key="", append=False):
        """DyNet's `write_to_textfile`: `save` in DyNet's text format."""
        self.save(fname, key, append, "dynet")

    # rows as numpy, as DyNet (row shape as lookup(i).npvalue() shows it)
    def __len__(self):
        """The number of rows."""
        return self.n_rows

    cdef long _row_index(self, row) except -1:
        if isinstance(row, (bool, np.bool_)) or not isinstance(row, (int, np.integer)):
            raise TypeError(f"a row index is an int, got {type(row).__name__}")
        self._row_check(row)
        return row

    def row_as_array(self, row):
        """Copy of row `row` (0 <= row < len(self)), of the row's shape."""
        return self._table(self._buf.current)[self._row_index(row)].copy()

    def rows_as_array(self, rows):
        """Copy of the rows `rows` (a list of ints): shape (len(rows),) + row shape."""
        idx = [self._row_index(r) for r in rows]
        return self._table(self._buf.current)[idx].reshape((len(idx),) + self.row_shape)

    def row_grad_as_array(self, row):
        """Copy of the gradient of row `row`."""
        return self._table(self._grad_flat)[self._row_index(row)].copy()

    def rows_grad_as_array(self, rows):
        """Copy of the gradients of the rows `rows`: shape (len(rows),) + row shape."""
        idx = [self._row_index(r) for r in rows]
        return self._table(self._grad_flat)[idx].reshape((len(idx),) + self.row_shape)

    def __repr__(self):
        return f"<LookupParameters {self._name or ''} {self.shape()}>"
