# Parameter storage the graph reads without copying. Included by _core.pyx.

# ------------------------------------------------------------- parameters ----

cdef inline int64_t elems_of(Shape s) noexcept:
    return <int64_t>s.d[0] * s.d[1] * s.d[2] * s.d[3]


cdef int _checked_size(str where, int64_t n, int64_t per) except -1:
    if n * per >= MAX_ELEMS:
        raise DimensionError(f"{where}: {n} x {per} elements is more than one array can hold (2^31)")
    return 0


cdef float* _float_ptr(object arr):
    cdef float[::1] view = arr
    return &view[0] if view.shape[0] > 0 else NULL


cdef int32_t _alias_leaf(object owner, int op, Shape shape, float* val, float* grad,
                         int32_t idata) except -1:
    """A leaf that reads parameter memory in place and, given grad, trains it."""
    cdef ComputationGraph g = _here()
    cdef int32_t i = g.add_node(op, 0, NULL, shape, idata)
    cdef Node* n = &g.nodes[i]
    n.val = val
    n.flags |= F_ALIAS
    if grad != NULL:
        n.grad = grad
        n.flags |= F_NEEDS_GRAD | F_TRAINABLE
    if not g.keepalive or g.keepalive[len(g.keepalive) - 1] is not owner:
        g.keepalive.append(owner)     # the graph points into its memory
    return i


cdef tuple _param_shape(object shape, str where, int max_dims):
    """A user's parameter shape (an int or 1 to max_dims positive ints) as a tuple."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not 1 <= len(shape) <= max_dims:
        raise DimensionError(f"{where}: shapes have 1 to {max_dims} dimensions, got {shape}")
    for v in shape:
        _as_size(v, where)
    return tuple(int(v) for v in shape)


cdef class Parameters:
    """A trainable tensor of 1 to 4 dimensions. Values and gradient are fixed numpy
    arrays (updated in place), stored column-major as DyNet does."""
    cdef readonly object _flat            # 1-D float32 storage (column-major)
    cdef readonly object _grad_flat
    cdef float* vptr
    cdef float* gptr
    cdef tuple _shape                     # as the user gave it, trailing 1s included
    cdef Shape dims                       # ... as a node's shape
    cdef int32_t cached_idx[2]
    cdef int32_t cached_version[2]
    cdef public object _name
    cdef public bint _updated
    cdef public object _owner

    def __init__(self, shape, name="", owner=None):
        self._shape = _param_shape(shape, "parameter", MAX_DIMS)
        self.dims = _shape_from("parameter", self._shape, 1)
        n = elems_of(self.dims)
        self._flat = np.zeros(n, dtype=np.float32)
        self._grad_flat = np.zeros(n, dtype=np.float32)
        self.vptr = _float_ptr(self._flat)
        self.gptr = _float_ptr(self._grad_flat)
        self.cached_version[0] = self.cached_version[1] = -1
        self._name = name
        self._updated = True
        self._owner = owner

    def shape(self):
        return self._shape

    def _view(self, arr):
        return arr.reshape(self._shape, order="F")     # a view: the storage is column-major

    def as_array(self):
        """Copy of the values, shaped like the parameter."""
        return self._view(self._flat).copy()

    def grad_as_array(self):
        return self._view(self._grad_flat).copy()

    @property
    def values(self):
        """Writable view of the values (same memory the graph reads)."""
        return self._view(self._flat)

    @property
    def grad(self):
        return self._view(self._grad_flat)

    def set_value(self, value):
        arr = np.asarray(value, dtype=np.float32)
        if arr.shape != self._shape and arr.size != self._flat.size:
            raise ValueError(f"set_value: shape {arr.shape} does not match parameter shape {self._shape}")
        self._view(self._flat)[...] = arr.reshape(self._shape)

    def zero(self):
        self._flat[:] = 0

    def scale(self, float s):
        self._flat *= s

    def scale_gradient(self, float s):
        self._grad_flat *= s

    def clip_inplace(self, float left, float right):
        """Clip every value into [left, right], in place (DyNet's clip_inplace);
        left > right is a ValueError."""
        if not left <= right:
            raise ValueError(f"clip_inplace: left ({left}) must not exceed right ({right})")
        np.clip(self._flat, left, right, out=self._flat)

    def name(self):
        return self._name

    def is_updated(self):
        return self._updated

    def set_updated(self, b):
        self._updated = bool(b)

    def expr(self, update=True):
        """The parameter as an Expression of the current graph (one node per graph)."""
        return self._expr(update)

    cdef Expression _expr(self, bint update):
        cdef int k = 0 if (update and self._updated) else 1
        cdef ComputationGraph g = _here()
        if self.cached_version[k] == g.version:
            return _wrap(self.cached_idx[k])
        cdef int32_t i = _alias_leaf(self, OP_PARAM, self.dims, self.vptr,
                                     self.gptr if k == 0 else NULL, 0)
        self.cached_idx[k] = i
        self.cached_version[k] = g.version
        return _wrap(i)

    def __add__(self, other): return _add(self, other)
    def __radd__(self, other): return _add(other, self)
    def __sub__(self, other): return _sub(self, other)
    def __rsub__(self, other): return _sub(other, self)
    def __mul__(self, other): return _mul(self, other)
    def __rmul__(self, other): return _mul(other, self)
    def __truediv__(self, other): return _div(self, other)
    def __rtruediv__(self, other): return _div(other, self)
    def __neg__(self): return _unary(OP_NEG, self.expr(), 0.0)

    # partial save/load, as DyNet (autobatch.model_files)
    def save(self, fname, key="", append=False, format=None):
        """Write this parameter to `fname` under the name `key` (default: its full name);
        `append` adds it to an existing file. `format`: None/"autobatch" (ours) or
        "dynet" (DyNet's text format; None when appending: the file's format)."""
        from autobatch import model_files
        model_files.save_one(self, fname, key, append, format)

    def populate(self, fname, key=""):
        """Set the values from the parameter stored under `key` (default: its own name) in
        `fname`, a file in our format or DyNet's; the shapes must match. From a DyNet
        file the gradient is read too (zero when not stored), as DyNet does."""
        from autobatch import model_files
        model_files.populate_one(self, fname, key)

    def populate_from_textfile(self, fname, key=""):
        """DyNet's name for `populate`."""
        self.populate(fname, key)

    def write_to_textfile(self, fname, key="", append=False):
        """DyNet's `write_to_textfile`: `save` in DyNet's text format."""
        self.save(fname, key, append, "dynet")

    def __repr__(self):
        return f"<Parameters {self._name or ''} {self.shape()}>"


cdef class LookupParameters:
    """A table of trainable rows; `lp[i]` looks row i up. A row has 1 to 4 dimensions
    (a table of shape (n, d) has vector rows, (n, r, c) matrix rows ...). Rows that were
    looked up are remembered so that trainers can update only those (sparse updates)."""
    cdef readonly object _flat            # rows one after another, each column-major
    cdef readonly object _grad_flat
    cdef float* vptr
    cdef float* gptr
    cdef readonly int n_rows, row_size
    cdef readonly tuple row_shape
    cdef Shape row_dims                   # a row as a node's shape
    cdef readonly object _used_mask       # uint8 numpy array, one per row
    cdef uint8_t* used
    cdef readonly object _used_list       # rows looked up since the last clear
    cdef public object _name
    cdef public bint _updated
    cdef public object _owner
    cdef int32_t cached_idx
    cdef int32_t cached_version

    def __init__(self, shape, name="", owner=None):
        shape = _param_shape(shape, "lookup parameters", MAX_DIMS + 1)
        if len(shape) < 2:
            raise DimensionError(f"lookup parameters need a shape (rows, dims...), got {shape}")
        self.n_rows, self.row_shape = shape[0], shape[1:]
        self.row_dims = _shape_from("lookup parameters", self.row_shape, 1)
        self.row_size = elems_of(self.row_dims)
        _checked_size("lookup parameters", self.n_rows, self.row_size)
        self._flat = np.zeros(self.n_rows * self.row_size, dtype=np.float32)
        self._grad_flat = np.zeros(self.n_rows * self.row_size, dtype=np.float32)
        self.vptr = _float_ptr(self._flat)
        self.gptr = _float_ptr(self._grad_flat)
        self._used_mask = np.zeros(self.n_rows, dtype=np.uint8)
        cdef uint8_t[::1] m = self._used_mask
        self.used = &m[0]
        self._used_list = []
        self._name = name
        self._updated = True
        self._owner = owner
        self.cached_version = -1

    def shape(self):
        return (self.n_rows,) + self.row_shape

    def _table(self, arr):
        """(n_rows,) + row shape view of a flat array: row i in its npvalue() layout."""
        k = len(self.row_shape)
        return arr.reshape((self.n_rows,) + self.row_shape[::-1]).transpose((0,) + tuple(range(k, 0, -1)))

    def as_array(self):
        return self._table(self._flat).copy()

    def grad_as_array(self):
        return self._table(self._grad_flat).copy()

    @property
    def values(self):
        """Writable (rows, row_size) view of the table (each row flat, column-major)."""
        return self._flat.reshape(self.n_rows, self.row_size)

    @property
    def grad(self):
        return self._grad_flat.reshape(self.n_rows, self.row_size)

    def used_rows(self):
        """Rows looked up since the last `clear_used()`, as a sorted int array."""
        return np.flatnonzero(self._used_mask)

    def clear_used(self):
        self._used_mask[:] = 0

    def set_value(self, value):
        """Values of shape (n_rows,) + row shape (row i as lookup(i).npvalue() shows it)."""
        arr = np.asarray(value, dtype=np.float32)
        if arr.shape != self.shape():
            raise ValueError(f"set_value: shape {arr.shape} does not match {self.shape()}")
        self._table(self._flat)[...] = arr

    def init_row(self, int i, row):
        self._row_check(i)
        self._table(self._flat)[i] = np.asarray(row, dtype=np.float32).reshape(self.row_shape)

    def init_from_array(self, arr):
        self.set_value(arr)

    def zero(self):
        self._flat[:] = 0

    def scale(self, float s):
        self._flat *= s

    def scale_gradient(self, float s):
        self._grad_flat *= s

    def name(self):
        return self._name

    def is_updated(self):
        return self._updated

    def set_updated(self, b):
        self._updated = bool(b)

    cdef int _row_check(self, long i) except -1:
        if not 0 <= i < self.n_rows:
            raise IndexError(f"lookup index {i} out of range for a table of {self.n_rows} rows")
        return 0

    def __getitem__(self, i):
        return lookup(self, i)

    def batch(self, ids):
        return lookup_batch(self, ids)

    def expr(self, update=True):
        """The whole table as one expression of shape row shape + (rows,), as in DyNet."""
        cdef bint trained = update and self._updated
        cdef int32_t i = _alias_leaf(self, OP_PARAM, _shape_from("parameter", self.row_shape + (self.n_rows,), 1),
                                     self.vptr, self.gptr if trained else NULL, 0)
        if trained:
            self._used_mask[:] = 1
        return _wrap(i)

    # partial save/load, as DyNet (autobatch.model_files)
    def save(self, fname, key="", append=False, format=None):
        """Write this lookup table to `fname` under the name `key` (default: its full name);
        `append` adds it to an existing file. `format`: None/"autobatch" (ours) or
        "dynet" (DyNet's text format; None when appending: the file's format)."""
        from autobatch import model_files
        model_files.save_one(self, fname, key, append, format)

    def populate(self, fname, key=""):
        """Set the values from the lookup table stored under `key` (default: its own name) in
        `fname`, a file in our format or DyNet's; the shapes must match. From a DyNet
        file the gradient is read too (zero when not stored), as DyNet does."""
        from autobatch import model_files
        model_files.populate_one(self, fname, key)

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
        return self._table(self._flat)[self._row_index(row)].copy()

    def rows_as_array(self, rows):
        """Copy of the rows `rows` (a list of ints): shape (len(rows),) + row shape."""
        idx = [self._row_index(r) for r in rows]
        return self._table(self._flat)[idx].reshape((len(idx),) + self.row_shape)

    def row_grad_as_array(self, row):
        """Copy of the gradient of row `row`."""
        return self._table(self._grad_flat)[self._row_index(row)].copy()

    def rows_grad_as_array(self, rows):
        """Copy of the gradients of the rows `rows`: shape (len(rows),) + row shape."""
        idx = [self._row_index(r) for r in rows]
        return self._table(self._grad_flat)[idx].reshape((len(idx),) + self.row_shape)

    def __repr__(self):
        return f"<LookupParameters {self._name or ''} {self.shape()}>"
