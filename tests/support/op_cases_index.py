"""Op cases (see op_cases.py) of the softmaxes, the losses with an index and the
selection and shape ops: softmax, log_softmax, pickneglogsoftmax, hinge, pick,
pick_range (slices and strides), pick_batch_elems, transpose, reshape, lookup_batch.
Imported by op_cases.py, so the generated tests cover them."""
import numpy as np

import autobatch as dy
from autobatch.testing import MAX_DIMS, from_full

from op_cases import _unary_case, full_shape, variant

# ------------------------------------------------- softmax and losses ----


def _log_softmax(v, d=0):
    m = v.max(axis=d, keepdims=True)
    return v - m - np.log(np.exp(v - m).sum(axis=d, keepdims=True))


for _sname, (_shape, _bs) in {"vec": ((4,), 1), "matrix_columns": ((4, 3), 1),
                              "batched": ((3,), 3), "batched_mat": ((3, 2), 2),
                              "3d": ((3, 2, 2), 1), "4d_batched": ((2, 3, 1, 2), 2)}.items():
    variant("softmax", _sname)(_unary_case(dy.softmax, lambda v: np.exp(_log_softmax(v)),
                                           _shape, _bs, {"lo": -2, "hi": 2}))
    variant("log_softmax", _sname)(_unary_case(dy.log_softmax, _log_softmax, _shape, _bs,
                                               {"lo": -2, "hi": 2}))
for _sname, (_shape, _bs, _d) in {"d1_rows": ((3, 4), 1, 1), "d1_batched": ((2, 3), 2, 1),
                                  "d1_col": ((3, 1), 1, 1), "d2_3d": ((2, 3, 3), 1, 2),
                                  "d3_4d_batched": ((2, 1, 2, 3), 2, 3)}.items():
    variant("softmax", _sname)(_unary_case(lambda x, d=_d: dy.softmax(x, d),
                                           lambda v, d=_d: np.exp(_log_softmax(v, d)),
                                           _shape, _bs, {"lo": -2, "hi": 2}))


def _index_variant(op, name, f, ref, shape, bs, index, distinct=False, nd=1):
    """Ops with an index (or list of indices) attribute; `index(c)` picks it; ref
    maps the full value and the index to the full result, of rank nd."""
    def fn(c):
        x = c.distinct(shape, bs) if distinct else c.arg(shape, bs=bs)
        v = index(c)
        return (lambda: f(x.expr(), v)), (lambda: from_full(ref(x.value(), v), nd))
    variant(op, name)(fn)


def _per_batch(v, bs):
    return list(v) if isinstance(v, list) else [v] * bs


def _out_bs(x, v):
    """Batch size of an op taking an index or a list of indices: a list over an
    unbatched argument makes a batch."""
    return max(x.shape[MAX_DIMS], len(v) if isinstance(v, list) else 1)


def _column(x, k):
    """Batch element k of a full value (repeated when the value is not batched)."""
    return x[..., 0 if x.shape[MAX_DIMS] == 1 else k]


def _scalars(values):
    """A full (1, 1, 1, 1, bs) result from one number per batch element."""
    return np.array(values, dtype=np.float64).reshape(1, 1, 1, 1, -1)


def _pnls_ref(x, v):
    ls = _log_softmax(x)
    return _scalars([-_column(ls, k)[i, 0, 0, 0] for k, i in enumerate(_per_batch(v, _out_bs(x, v)))])


_index_variant("pickneglogsoftmax", "int", dy.pickneglogsoftmax, _pnls_ref, (4,), 1,
               lambda c: c.instance % 4)
_index_variant("pickneglogsoftmax", "batched_list", dy.pickneglogsoftmax_batch, _pnls_ref, (4,), 3,
               lambda c: [(c.instance + k) % 4 for k in range(3)])
_index_variant("pickneglogsoftmax", "batched_int", dy.pickneglogsoftmax, _pnls_ref, (3,), 2,
               lambda c: 2 - c.instance % 3)
_index_variant("pickneglogsoftmax", "list_over_unbatched", dy.pickneglogsoftmax, _pnls_ref, (4,), 1,
               lambda c: [3, c.instance % 4])


def _hinge_ref(m):
    def ref(x, v):
        out = []
        for k, g in enumerate(_per_batch(v, _out_bs(x, v))):
            col = _column(x, k)[:, 0, 0, 0]
            out.append(sum(max(0.0, m - col[g] + col[i]) for i in range(len(col)) if i != g))
        return _scalars(out)
    return ref


# distinct values 0.25 apart: margins m - x_g + x_i avoid 0 for m = 1.0 and 0.6
_index_variant("hinge", "int", dy.hinge, _hinge_ref(1.0), (5,), 1, lambda c: c.instance % 5,
               distinct=True)
_index_variant("hinge", "margin0.6", lambda x, v: dy.hinge(x, v, 0.6), _hinge_ref(0.6), (5,), 1,
               lambda c: (c.instance + 2) % 5, distinct=True)
_index_variant("hinge", "batched_list", dy.hinge_batch, _hinge_ref(1.0), (4,), 2,
               lambda c: [c.instance % 4, 3], distinct=True)


def _pick_ref(d):
    """Element v along dimension d, that dimension removed (the rest move up)."""
    def ref(x, v):
        cols = [np.take(_column(x, k), i, axis=d) for k, i in enumerate(_per_batch(v, _out_bs(x, v)))]
        return np.stack(cols, axis=-1)[:, :, :, None, :]     # the dimensions after d move up
    return ref


_index_variant("pick", "d0_vec", dy.pick, _pick_ref(0), (4,), 1, lambda c: c.instance % 4)
_index_variant("pick", "d0_mat_row", dy.pick, _pick_ref(0), (3, 2), 1, lambda c: c.instance % 3)
_index_variant("pick", "d1_mat_col", lambda x, v: dy.pick(x, v, 1), _pick_ref(1), (3, 2), 1,
               lambda c: c.instance % 2)
_index_variant("pick", "batched_list", dy.pick_batch, _pick_ref(0), (3,), 3,
               lambda c: [c.instance % 3, 0, 2])
_index_variant("pick", "list_over_unbatched", dy.pick, _pick_ref(0), (4,), 1,
               lambda c: [1, c.instance % 4])
_index_variant("pick", "index_operator", lambda x, v: x[v], _pick_ref(0), (4,), 1,
               lambda c: 3 - c.instance % 4)
_index_variant("pick", "keywords_dim2_3d", lambda x, v: dy.pick(x, index=v, dim=2), _pick_ref(2),
               (2, 3, 3), 1, lambda c: c.instance % 3, nd=2)
_index_variant("pick", "dim1_3d_batched", lambda x, v: dy.pick(x, v, dim=1), _pick_ref(1),
               (2, 3, 2), 2, lambda c: 2 - c.instance % 3, nd=2)
_index_variant("pick", "pick_batch_dim3_4d", lambda x, v: dy.pick_batch(x, v, dim=3), _pick_ref(3),
               (2, 1, 2, 3), 2, lambda c: [c.instance % 3, 1], nd=3)
_index_variant("pick", "dim0_col", dy.pick, _pick_ref(0), (3, 1), 1, lambda c: c.instance % 3)
_index_variant("pick", "pick_batch_over_unbatched_matrix", lambda x, v: dy.pick_batch(x, v, dim=1),
               _pick_ref(1), (2, 3), 1, lambda c: [0, c.instance % 3])


def _pick_range_variant(name, shape, bs, d, s, e, kw=False):
    def fn(c):
        x = c.arg(shape, bs=bs)
        return (lambda: dy.pick_range(x.expr(), s, e, d=d) if kw else dy.pick_range(x.expr(), s, e, d)), \
            (lambda: from_full(np.take(x.value(), range(s, e), axis=d), len(shape)))
    variant("pick_range", name)(fn)


_pick_range_variant("d0_vec", (5,), 1, 0, 1, 4)
_pick_range_variant("d0_mat", (4, 2), 1, 0, 0, 2)
_pick_range_variant("d1_mat", (2, 4), 1, 1, 1, 3)
_pick_range_variant("d0_batched", (4,), 2, 0, 2, 4)
_pick_range_variant("d1_batched_mat", (2, 3), 2, 1, 0, 1)
_pick_range_variant("d2_3d", (2, 3, 4), 1, 2, 1, 3, kw=True)
_pick_range_variant("d1_3d_batched", (2, 3, 2), 2, 1, 1, 2)
_pick_range_variant("d3_4d", (2, 1, 2, 3), 1, 3, 0, 2)
_pick_range_variant("d0_col", (4, 1), 1, 0, 0, 1)


def _slice_case(c):
    x = c.arg((5,))
    return (lambda: x.expr()[1:3]), (lambda: from_full(x.value()[1:3], 1))


variant("pick_range", "slice_operator")(_slice_case)


def _strided_variant(name, shape, bs, index):
    """x[index] with steps (a strided pick_range per sliced dimension)."""
    def fn(c):
        x = c.arg(shape, bs=bs)
        return (lambda: x.expr()[index]), (lambda: from_full(x.value()[index], len(shape)))
    variant("pick_range", name)(fn)


_strided_variant("step2_vec", (5,), 1, np.s_[::2])
_strided_variant("step3_from1_batched", (7,), 2, np.s_[1::3])
_strided_variant("step2_d1_mat", (2, 5), 1, np.s_[:, 0:5:2])
_strided_variant("steps_3d_batched", (4, 3, 2), 2, np.s_[1::2, ::2])
_strided_variant("step2_d3_4d", (2, 1, 2, 5), 1, np.s_[:, :, :, 1::2])
_strided_variant("negative_bounds_mat", (4, 3), 1, np.s_[-3:-1, -2:])


def _pbe_variant(name, shape, bs, idx):
    def fn(c):
        x = c.arg(shape, bs=bs)
        return (lambda: dy.pick_batch_elems(x.expr(), idx)), \
            (lambda: from_full(x.value()[..., idx], len(shape)))
    variant("pick_batch_elems", name)(fn)


_pbe_variant("vec", (3,), 4, [2, 0])
_pbe_variant("repeated", (2, 2), 3, [1, 1, 2])
_pbe_variant("one", (3,), 2, [1])
_pbe_variant("4d", (2, 1, 2, 2), 3, [2, 0])

def _transpose_variant(name, shape, bs, dims=None):
    perm = [1, 0] if dims is None else dims
    f = dy.transpose if dims is None else (lambda x: dy.transpose(x, dims))
    variant("transpose", name)(_unary_case(
        f, lambda v: v.transpose(perm + list(range(len(perm), MAX_DIMS + 1))), shape, bs, {},
        nd=len(perm)))


_transpose_variant("mat", (3, 2), 1)
_transpose_variant("vec", (3,), 1)
_transpose_variant("batched", (2, 3), 2)
_transpose_variant("row", (1, 3), 1)
_transpose_variant("3d_102", (2, 3, 2), 1, [1, 0, 2])
_transpose_variant("3d_201_batched", (2, 3, 4), 2, [2, 0, 1])
_transpose_variant("4d_3120", (2, 3, 1, 2), 1, [3, 1, 2, 0])
_transpose_variant("4d_0213_batched", (2, 1, 3, 2), 2, [0, 2, 1, 3])
_transpose_variant("vec_to_3d", (3,), 1, [2, 1, 0])
_transpose_variant("identity", (2, 3), 1, [0, 1])


def _reshape_variant(name, shape, bs, new):
    def fn(c):
        x = c.arg(shape, bs=bs)

        def ref():
            v = x.value()
            return from_full(np.stack([v[..., k].reshape(full_shape(new)[:MAX_DIMS], order="F")
                                       for k in range(bs)], axis=-1), len(new))
        return (lambda: dy.reshape(x.expr(), new)), ref
    variant("reshape", name)(fn)


_reshape_variant("vec_to_mat", (6,), 1, (2, 3))
_reshape_variant("mat_to_mat", (2, 3), 1, (3, 2))
_reshape_variant("mat_to_vec", (2, 2), 1, (4,))
_reshape_variant("batched", (6,), 2, (3, 2))
_reshape_variant("3d_to_4d", (2, 3, 2), 1, (3, 1, 2, 2))
_reshape_variant("4d_to_col_batched", (2, 1, 2, 2), 2, (8, 1))


def _rebatch_variant(name, shape, bs, new, new_bs):
    """reshape over the batch: all elements, column-major with the batch slowest."""
    def fn(c):
        x = c.arg(shape, bs=bs)

        def ref():
            flat = x.value().reshape(-1, order="F")
            return from_full(flat.reshape(full_shape(new, new_bs), order="F"), len(new))
        kw = {} if new_bs == 1 else {"batch_size": new_bs}
        return (lambda: dy.reshape(x.expr(), new, **kw)), ref
    variant("reshape", name)(fn)


_rebatch_variant("merge_batch_by_default", (2,), 3, (6,), 1)
_rebatch_variant("merge_batch_to_matrix", (2, 2), 2, (4, 2), 1)
_rebatch_variant("spread_over_batch", (6,), 1, (2,), 3)
_rebatch_variant("columns_to_batch", (2, 3), 1, (2,), 3)
_rebatch_variant("regroup_batch", (2, 2), 3, (1,), 12)


def _lookup_batch_variant(name, ids, f=dy.lookup_batch):
    def fn(c):
        lp = c.lookup(5, 3)
        v = ids(c)
        return (lambda: f(lp, v)), \
            (lambda: from_full(lp.as_array().astype(np.float64)[v].T[:, None, None, None, :], 1))
    variant("lookup_batch", name)(fn)


_lookup_batch_variant("distinct", lambda c: [1, 3, (c.instance + 2) % 5])
_lookup_batch_variant("repeated_rows", lambda c: [c.instance % 5, c.instance % 5, 0])
_lookup_batch_variant("one", lambda c: [4])
_lookup_batch_variant("batch_method", lambda c: [2, 0], lambda lp, v: lp.batch(v))
