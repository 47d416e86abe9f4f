"""Probes of DyNet's inputs and expressions: building a graph once and re-setting its
inputs (set, set_index), Parameters used as Expressions, indexing and slicing, the
formats of value(), inputTensor of lists and batches, sparse_inputTensor, pow.

Each probe is a line of code; its result is recorded as {"dim", "value"} (an
expression), {"value"} (anything else) or {"error"} (the exception's class).
`python dynet_inputs.py out.json` with DyNet installed records DyNet's results
(tests/data/dynet_inputs.json); tests/dynet/test_dynet_inputs.py runs the same probes with
`import autobatch as dy` and compares. Probes are only those where DyNet's behaviour
is defined (no reads past buffers, no crashes).
"""
import json
import sys

import numpy as np

PROBES = [
    # --- one graph, inputs set again (the static-graph style) ---
    ("vecInput_zeros", "x = dy.vecInput(3); t = dy.tanh(x); r = t"),
    ("vecInput_set", "x = dy.vecInput(3); t = dy.tanh(x * 2); t.value(); x.set([0.1, -0.2, 0.3]); r = t"),
    ("vecInput_set_twice", "x = dy.vecInput(2); s = dy.sum_elems(dy.cmult(x, x)); s.value(); x.set([1, 2]); s.value(); x.set([3, 4]); r = s"),
    ("vecInput_set_numpy", "x = dy.vecInput(2); s = dy.sum_elems(x); s.value(); x.set(np.array([1.5, 2.5])); r = s"),
    ("inputVector_set", "x = dy.inputVector([1, 2, 3]); y = dy.logistic(x); y.value(); x.set([3, 2, 1]); r = y"),
    ("scalarInput_set", "x = dy.scalarInput(2.0); y = x * 3 + 1; y.value(); x.set(5); r = y"),
    ("matInput_set", "x = dy.inputTensor(np.zeros((2, 3)), reusable_expr=True); y = dy.transpose(x); y.value(); x.set([1, 2, 3, 4, 5, 6]); r = y"),
    ("reusable_batched_set", "x = dy.inputTensor(np.zeros((2, 3)), batched=True, reusable_expr=True); y = dy.sum_batches(x * 2); y.value(); x.set([1, 2, 3, 4, 5, 6]); r = y"),
    ("nonreusable_set", "x = dy.inputTensor(np.zeros((2, 2))); x.set([1, 2, 3, 4]); r = x"),
    ("lookup_set", "e = lp[1]; y = W * e; y.value(); e.set(2); r = y"),
    ("lookup_set_grad", "e = lp[1]; l = dy.sum_elems(W * e); l.value(); e.set(3); l.backward(); r = lp.grad_as_array()"),
    ("lookup_batch_set", "b = dy.lookup_batch(lp, [0, 1]); s = dy.sum_batches(dy.sum_elems(b)); s.value(); b.set([2, 3]); r = s"),
    ("lookup_batch_set_grad", "b = dy.lookup_batch(lp, [0, 1]); s = dy.sum_batches(dy.sum_elems(b * 2)); s.value(); b.set([3, 3]); s.backward(); r = lp.grad_as_array()"),
    ("pick_set_index", "x = dy.inputVector([1, 2, 3]); p = dy.pick(x, 1); p.value(); p.set_index(2); r = p"),
    ("pick_batch_set_index", "x = dy.inputVector([1, 2, 3]); p = dy.pick_batch(x, [0, 1]); p.value(); p.set_index([2, 0]); r = p"),
    ("set_then_backward", "x = dy.vecInput(3); l = dy.sum_elems(dy.cmult(W * x, W * x)); x.set([1, 0, 0]); l.value(); l.backward(); x.set([0, 1, 0]); l.value(); l.backward(); r = W.grad_as_array()"),
    ("gradient_after_set", "x = dy.vecInput(3); l = dy.sum_elems(W * x); l.backward(); x.set([1, 1, 1]); r = l.gradient()"),
    # --- Parameters and LookupParameters are Expressions ---
    ("param_is_expression", "r = (isinstance(W, dy.Expression), isinstance(lp, dy.Expression))"),
    ("param_value", "r = W.value()"),
    ("param_npvalue", "r = v.npvalue()"),
    ("param_dim", "r = W.dim()"),
    ("param_vec_value", "r = W.vec_value()"),
    ("param_index", "r = W[1]"),
    ("param_negative_index", "r = v[-1]"),
    ("param_slice", "r = v[0:2]"),
    ("param_tanh", "r = dy.tanh(v)"),
    ("param_pow", "r = v ** 2"),
    ("param_arith", "r = (v + v) * 2 - v / 2"),
    ("param_neg", "r = -v"),
    ("param_matmul", "r = W * v"),
    ("param_affine", "r = dy.affine_transform([dy.inputVector([1, 1]), W, v])"),
    ("param_esum", "r = dy.esum([v, v])"),
    ("param_concat", "r = dy.concatenate([v, v])"),
    ("param_dot", "r = dy.dot_product(v, v)"),
    ("param_transpose", "r = dy.transpose(W)"),
    ("param_reshape", "r = dy.reshape(W, (6,))"),
    ("param_softmax", "r = dy.softmax(v)"),
    ("param_pnls", "r = dy.pickneglogsoftmax(v, 1)"),
    ("param_grad", "l = dy.sum_elems(dy.cmult(v, v)); l.backward(); r = (v.gradient(), v.grad_as_array())"),
    ("param_after_renew", "dy.renew_cg(); r = dy.tanh(v)"),
    ("param_twice_after_renew", "(W * v).value(); dy.renew_cg(); r = W * v + W * v"),
    ("param_gradient_before_backward", "r = v.gradient()"),
    ("param_backward_nonscalar", "r = v.backward()"),
    ("parameter_is_p", "r = dy.parameter(v) is v"),
    ("lookup_value", "r = lp.value()"),
    ("lookup_dim", "r = lp.dim()"),
    ("lookup_tanh", "r = dy.tanh(lp)"),
    ("lookup_arith", "r = lp * 2 + lp"),
    ("lookup_as_expr_grad", "dy.sum_elems(lp).backward(); r = lp.grad_as_array()"),
    ("lookup_row", "r = lp[1]"),
    ("lookup_batch_method", "r = lp.batch([2, 0])"),
    # --- indexing and slicing ---
    ("index_neg1", "r = x5[-1]"),
    ("index_neg5", "r = x5[-5]"),
    ("index_neg6", "r = x5[-6]"),
    ("index_5", "r = x5[5]"),
    ("index_step2", "r = x5[::2]"),
    ("index_1_step2", "r = x5[1::2]"),
    ("index_step_neg", "r = x5[::-1]"),
    ("index_step0", "r = x5[0:3:0]"),
    ("index_range", "r = x5[1:3]"),
    ("index_range_step_big", "r = x5[0:5:10]"),
    ("index_tail", "r = x5[4:]"),
    ("index_stop_big", "r = x5[0:10]"),
    ("matrix_row", "r = M[1]"),
    ("matrix_last_row", "r = M[-1]"),
    ("matrix_rows", "r = M[1:3]"),
    ("matrix_rows_step", "r = M[1:3:2]"),
    ("matrix_cols", "r = M[:, 1:3]"),
    ("matrix_cols_step", "r = M[:, ::2]"),
    ("matrix_both", "r = M[::2, 1:3]"),
    ("matrix_all", "r = M[:, :]"),
    ("tensor_3d", "r = T[:, 1:3, ::2]"),
    ("tensor_row", "r = T[1]"),
    ("batched_row", "r = B[1]"),
    ("batched_rows", "r = B[0:2]"),
    ("batched_batch_slice", "r = B[:, 0:2]"),
    ("pick_dim", "r = dy.pick(M, 1, dim=1)"),
    ("pick_keywords", "r = dy.pick(M, index=2, dim=1)"),
    ("pick_batch_dim", "r = dy.pick_batch(M, [0, 1], dim=1)"),
    # --- pow ---
    ("pow_number", "r = x5 ** 2"),
    ("pow_float", "r = x5 ** 0.5"),
    ("pow_expr", "r = x5 ** dy.scalarInput(2)"),
    ("pow_function", "r = dy.pow(x5, dy.scalarInput(3))"),
    ("pow_batched", "r = B ** 2"),
    # --- formats of value() and shapes of inputs ---
    ("value_1x1", "r = dy.inputTensor(np.ones((1, 1))).value()"),
    ("value_3x1", "r = dy.inputTensor(np.arange(3.0).reshape(3, 1)).value()"),
    ("value_1_b3", "r = dy.inputTensor(np.arange(3.0).reshape(1, 3), batched=True).value()"),
    ("value_3_b2", "r = dy.inputTensor(np.arange(6.0).reshape(3, 2), batched=True).value()"),
    ("value_1x1_b3", "r = dy.inputTensor(np.ones((1, 1, 3)), batched=True).value()"),
    ("value_2x3_b2", "r = dy.inputTensor(np.arange(12.0).reshape(2, 3, 2), batched=True).value()"),
    ("vec_value_batched", "r = dy.inputTensor(np.arange(12.0).reshape(2, 3, 2), batched=True).vec_value()"),
    ("list_of_arrays", "r = dy.inputTensor([np.array([1.0, 2, 3]), np.array([4.0, 5, 6])])"),
    ("list_of_2d_arrays", "r = dy.inputTensor([np.ones((2, 3)), np.zeros((2, 3))])"),
    ("list_of_floats", "r = dy.inputTensor([[1.0, 2], [3, 4]])"),
    ("batched_3", "r = dy.inputTensor(np.arange(3.0), batched=True)"),
    ("batched_2x3x4", "r = dy.inputTensor(np.arange(24.0).reshape(2, 3, 4), batched=True)"),
    ("batched_3x1x1", "r = dy.inputTensor(np.ones((3, 1, 1)), batched=True)"),
    ("input_3x1", "r = dy.inputTensor(np.arange(3.0).reshape(3, 1))"),
    ("inputVector_2d", "r = dy.inputVector(np.ones((2, 2)))"),
    ("inputTensor_keywords", "r = dy.inputTensor(arr=np.ones(2), batched=False, device='', reusable_expr=False)"),
    ("scalarInput_keywords", "r = dy.scalarInput(s=2.0, device='')"),
    ("vecInput_keywords", "r = dy.vecInput(dim=2, device='')"),
    ("set_value_transposed", "W.set_value(np.zeros((3, 2))); r = W.as_array()"),
    ("set_value_flat", "W.set_value(np.zeros(6)); r = W.as_array()"),
    ("set_value_list", "W.set_value([[1, 2, 3], [4, 5, 6]]); r = W.as_array()"),
    ("set_value_keyword", "W.set_value(arr=np.ones((2, 3))); r = W.as_array()"),
    ("gradient_before_backward", "x = dy.inputVector([1, 2, 3]); y = dy.sum_elems(x * 2); y.value(); r = x.gradient()"),
    ("gradient_after_backward", "x = dy.inputVector([1, 2, 3]); y = dy.sum_elems(x * 2); y.backward(); r = (x.gradient(), y.gradient())"),
    ("gradient_full", "x = dy.inputVector([1, 2, 3]); y = dy.sum_elems(x * 2); y.backward(full=True); r = x.gradient()"),
    ("gradient_created_after", "y = dy.sum_elems(v * 2); z = dy.tanh(v); y.backward(); r = z.gradient()"),
    ("identity_lookup", "r = pc.add_lookup_parameters((3, 3), init='identity').as_array()"),
    ("identity_lookup_rect", "r = pc.add_lookup_parameters((3, 4), init='identity').as_array()"),
    # --- sparse_inputTensor, forward, to_device, the graph ---
    ("sparse_2d", "r = dy.sparse_inputTensor(([0, 1, 2], [1, 0, 2]), [1.0, 2, 3], (3, 3))"),
    ("sparse_defval", "r = dy.sparse_inputTensor(([0, 1], [1, 0]), [1.0, 2], (2, 2), defval=5)"),
    ("sparse_batched", "r = dy.sparse_inputTensor(([0, 1], [1, 0]), [1.0, 2], (2, 2), batched=True)"),
    ("sparse_repeat", "r = dy.sparse_inputTensor(([0, 0], [1, 1]), [1.0, 2], (2, 2))"),
    ("sparse_1d", "r = dy.sparse_inputTensor((np.array([0, 3]),), np.array([1.0, 2]), (5,))"),
    ("sparse_wrong_ndims", "r = dy.sparse_inputTensor(([0, 1],), [1.0, 2], (2, 2))"),
    ("sparse_out_of_range", "r = dy.sparse_inputTensor(([0, 5], [0, 0]), [1.0, 2], (2, 2))"),
    ("sparse_length", "r = dy.sparse_inputTensor(([0, 1], [0, 0]), [1.0, 2, 3], (2, 2))"),
    ("forward_list", "y = dy.tanh(x5); z = dy.sum_elems(y); dy.forward([y, z]); r = (y.value(), z.value())"),
    ("forward_recalculate", "x = dy.vecInput(2); z = dy.sum_elems(x); dy.forward([z], recalculate=True); r = z"),
    ("to_device_cpu", "r = dy.to_device(x5, 'CPU').dim()"),     # DyNet's values are garbage
    ("to_device_gpu", "r = dy.to_device(x5, 'GPU:0')"),
    ("cg_renew", "g = dy.cg(); r = (g.renew() is g, g.version() == dy.cg_version())"),
    ("colwise_add_keywords", "r = dy.colwise_add(x=M, y=dy.inputVector([1, 2, 3]))"),
    ("pick_batch_elems_keywords", "r = dy.pick_batch_elems(x=B, vs=[3, 1])"),
    ("pick_batch_elem_keywords", "r = dy.pick_batch_elem(x=B, v=2)"),
    ("affine_keywords", "r = dy.affine_transform(exprs=[dy.inputVector([1, 1]), W, v])"),
    ("pnls_batch_keywords", "r = dy.pickneglogsoftmax_batch(x=B, vs=[0, 1, 2, 0])"),
    ("hinge_batch_keywords", "r = dy.hinge_batch(x=B, vs=[0, 1, 2, 0], m=0.5)"),
]


def env(dy):
    """The names every probe sees, in a new graph."""
    pc = dy.ParameterCollection()
    W = pc.add_parameters((2, 3), init=dy.NumpyInitializer(np.arange(6.0).reshape(2, 3)))
    v = pc.add_parameters((3,), init=dy.NumpyInitializer(np.array([1.0, -2.0, 3.0])))
    lp = pc.add_lookup_parameters((4, 3), init=np.arange(12.0).reshape(4, 3) / 10)
    dy.renew_cg()
    return {"dy": dy, "np": np, "pc": pc, "W": W, "v": v, "lp": lp,
            "x5": dy.inputVector([1.0, 2, 3, 4, 5]),
            "M": dy.inputTensor(np.arange(12.0).reshape(3, 4)),
            "T": dy.inputTensor(np.arange(24.0).reshape(2, 3, 4)),
            "B": dy.inputTensor(np.arange(12.0).reshape(3, 4), batched=True)}


def plain(value):
    if isinstance(value, np.ndarray):
        return {"array": value.astype(np.float64).tolist(), "shape": list(value.shape)}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.floating)):
        return float(value)
    return value


def run(dy, code):
    names = env(dy)
    try:
        exec(code, names)
        r = names["r"]
        if isinstance(r, dy.Expression) and not isinstance(r, (dy.Parameters, dy.LookupParameters)):
            return {"dim": plain(r.dim()), "value": plain(r.value())}
        return {"value": plain(r)}
    except Exception as e:       # noqa: BLE001 (the class is the result)
        return {"error": type(e).__name__}


if __name__ == "__main__":
    import dynet
    out = {name: run(dynet, code) for name, code in PROBES}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
