# Python indexing of expressions (Expression.__getitem__): x[i], x[-1], x[a:b:s],
# M[:, 1:3], M[1, 2]. Built from pick, the strided pick_range and pick_batch_elems.
# Included by api/core.pyx; uses api/expression.pxi and api/ops_structure.pxi.

cdef Expression _getitem(Expression x, object index):
    """x[index]: an int picks along dimension 0 (negative counts from the end, as in
    DyNet); a slice takes a strided range of dimension 0 (step > 0); a tuple indexes
    dimensions 0, 1, ... in turn, and one entry more than x has dimensions indexes
    the batch (as npvalue() shows it: the batch is its last axis)."""
    cdef Node* n = _check(x)
    if type(index) is int:              # the common case: x[i]
        return pick(x, _wrap_index(index, n.d[0], "index"), 0)
    entries = index if isinstance(index, tuple) else (index,)
    if len(entries) > n.nd + 1:
        raise IndexError(f"{len(entries)} indices for an expression of {n.nd} dimension(s) "
                         f"(and the batch): {_dimstr(n)}")
    # x's sizes copied out: the slices and picks below append nodes, which may move the
    # node array under n (indices, not pointers, across appends: docs/architecture.md)
    cdef int nd = n.nd
    sizes = [n.d[k] for k in range(nd)] + [n.bs]
    n = NULL
    cdef int k
    for k in range(len(entries)):       # check everything before building anything
        if not isinstance(entries[k], slice):
            entries = entries[:k] + (_wrap_index(_as_index(entries[k], "x[...]"), sizes[k],
                                                 "index"),) + entries[k + 1:]
    cdef Expression out = x
    for k in range(min(len(entries), nd)):      # ranges keep their dimension
        if isinstance(entries[k], slice):
            out = _slice_dim(out, k, entries[k], sizes[k])
    if len(entries) == nd + 1:                  # the batch
        out = _index_batch(out, entries[nd], sizes[nd])
    for k in range(min(len(entries), nd) - 1, -1, -1):     # picks remove theirs, last first
        if not isinstance(entries[k], slice):
            out = pick(out, entries[k], k)
    return out


cdef object _wrap_index(object i, int size, str what):
    """i in [-size, size) as an index in [0, size) (IndexError otherwise)."""
    if i >= size:
        raise IndexError(f"{what} too large: {i} > {size - 1}")
    if i < -size:
        raise IndexError(f"{what} too small: {i} < {-size}")
    return i + size if i < 0 else i


cdef tuple _slice_bounds(object sl, int size):
    """(start, stop, step) of a slice of a dimension of `size`: step > 0, negative
    bounds count from the end, the range is not empty and lies inside (as DyNet checks;
    no clamping)."""
    step = 1 if sl.step is None else _as_index(sl.step, "x[a:b:s]")
    if step <= 0:
        raise ValueError(f"slices of expressions need a step > 0, got {step}")
    start = 0 if sl.start is None else _as_index(sl.start, "x[a:b:s]")
    stop = size if sl.stop is None else _as_index(sl.stop, "x[a:b:s]")
    start = _wrap_index(start, size, "start index")
    if stop > size or stop < -size:
        raise IndexError(f"stop index {stop} out of range for a dimension of {size}")
    if stop < 0:
        stop += size
    if start >= stop:
        raise ValueError(f"empty slice [{sl.start}:{sl.stop}] of a dimension of {size}: "
                         f"expressions cannot be empty")
    return start, stop, step


cdef Expression _slice_dim(Expression x, int k, object sl, int size):
    start, stop, step = _slice_bounds(sl, size)
    if start == 0 and stop == size and step == 1:
        return x
    return _pick_range(x, start, stop, k, step)


cdef Expression _index_batch(Expression x, object entry, int bs):
    if not isinstance(entry, slice):
        return pick_batch_elem(x, entry)
    start, stop, step = _slice_bounds(entry, bs)
    if start == 0 and stop == bs and step == 1:
        return x
    return pick_batch_elems(x, list(range(start, stop, step)))
