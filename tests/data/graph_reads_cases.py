"""What a graph's nodes see of parameters and lookups changed after the graph computed
them, for the fixture (make_graph_reads_fixture.py, run with DyNet) and
tests/model/test_graph_reads.py (run with autobatch): the same code, given `dy`,
returns the numbers.

DyNet's parameter node copies the parameter's values when it is computed, a lookup node
copies its row: after `value()`, a `set_value`, `init_row`, `scale` ... or
`trainer.update()` changes neither that graph's backward nor the nodes made later on
those nodes; a new lookup reads the table as it is when it is computed, and
`forward()` (recalculate) reads everything again.
"""
import numpy as np

TRAINERS = {
    "sgd": lambda dy, pc: dy.SimpleSGDTrainer(pc, 0.1),
    "cyclical": lambda dy, pc: dy.CyclicalSGDTrainer(pc, 0.01, 0.1, 2, 0.9),
    "momentum": lambda dy, pc: dy.MomentumSGDTrainer(pc, 0.1, 0.9),
    "adagrad": lambda dy, pc: dy.AdagradTrainer(pc, 0.1),
    "adadelta": lambda dy, pc: dy.AdadeltaTrainer(pc),
    "rmsprop": lambda dy, pc: dy.RMSPropTrainer(pc, 0.05),
    "adam": lambda dy, pc: dy.AdamTrainer(pc, 0.05),
    "amsgrad": lambda dy, pc: dy.AmsgradTrainer(pc, 0.05),
}

E_INIT = (np.arange(15, dtype=np.float64).reshape(5, 3) - 7.0) / 5.0
W_INIT = np.array([[0.5, -0.25, 1.0], [0.75, 0.5, -1.5]])
B_INIT = np.array([0.1, -0.2])


def _tolist(a):
    return np.asarray(a, dtype=np.float64).tolist()


def _matvec(dy):
    """The example that showed the live reads: y = sum(square(W * X)), W = I, X = [1, 2] (y = 5); then
    W = 3 I and X = [5, 7] before y's backward and before a new node W * X."""
    pc = dy.ParameterCollection()
    W = pc.parameters_from_numpy(np.eye(2))
    X = pc.parameters_from_numpy(np.array([1.0, 2.0]))
    dy.renew_cg()
    y = dy.sum_elems(dy.square(W * X))
    first = y.value()
    W.set_value(3 * np.eye(2))
    X.set_value(np.array([5.0, 7.0]))
    y.backward()
    later = dy.sum_elems(W * X).value()
    again = y.value(recalculate=True)
    return {"first": first, "grad_W": _tolist(W.grad_as_array()),
            "grad_X": _tolist(X.grad_as_array()), "later": later, "recalculated": again}


def _mutators(dy):
    """Each mutator after the graph computed: set_value, zero, scale, clip_inplace on a
    Parameters; init_row, scale, zero, init_from_array on a table. The graph's backward
    and its later nodes on the computed nodes see the old values; a new lookup the new."""
    out = {}
    for name in ("set_value", "zero", "scale", "clip", "init_row", "table_scale",
                 "table_zero", "init_from_array"):
        pc = dy.ParameterCollection()
        W = pc.parameters_from_numpy(W_INIT)
        E = pc.lookup_parameters_from_numpy(E_INIT)
        dy.renew_cg()
        x = dy.lookup(E, 2)
        h = W * x
        y = dy.sum_elems(dy.square(h))
        y.value()
        if name == "set_value":
            W.set_value(W_INIT * -2.0)
        elif name == "zero":
            W.zero()
        elif name == "scale":
            W.scale(3.0)
        elif name == "clip":
            W.clip_inplace(-0.3, 0.3)
        elif name == "init_row":
            E.init_row(2, [9.0, -8.0, 7.0])
        elif name == "table_scale":
            E.scale(-2.0)
        elif name == "table_zero":
            E.zero()
        else:
            E.init_from_array(E_INIT * 4.0)
        y.backward()
        out[name] = {
            "grad_W": _tolist(W.grad_as_array()),
            "grad_E2": _tolist(E.row_grad_as_array(2)),
            "old_nodes": _tolist((h * 2.0).npvalue()),
            "new_lookup": _tolist(dy.lookup(E, 2).npvalue()),
            "new_product": _tolist((W * dy.lookup(E, 2)).npvalue()),
            "as_array_W": _tolist(W.as_array()),
        }
    return out


def _repeated(dy, trainer, sparse, decay):
    """The idiom of several `loss.backward(); trainer.update()` on one graph, then
    new nodes in it (a new lookup of a stepped row, the loss's parameters again)."""
    pc = dy.ParameterCollection()
    W = pc.parameters_from_numpy(W_INIT)
    b = pc.parameters_from_numpy(B_INIT)
    E = pc.lookup_parameters_from_numpy(E_INIT)
    if decay:
        pc.set_weight_decay(decay)
    tr = TRAINERS[trainer](dy, pc)
    tr.set_sparse_updates(sparse)
    out = []
    for step in range(2):
        dy.renew_cg()
        xs = [dy.lookup(E, (step + k) % 5) for k in range(3)]
        hs = [dy.tanh(W * x + b) for x in xs]
        loss = dy.sum_elems(dy.square(dy.esum(hs) - dy.inputVector([0.5, -0.5])))
        values = [loss.value()]
        for _ in range(3):
            loss.backward()
            tr.update()
            values.append(loss.value())
        after = dy.sum_elems(dy.square(W * dy.lookup(E, step % 5) + b)).value()
        cached = dy.sum_elems(hs[0]).value()
        out.append({"loss": values, "after": after, "cached": cached, **_seen(dy, E, W, b)})
    return out


def _seen(dy, E, W, b):
    """The values a new graph sees (with weight decay DyNet's as_array() does not)."""
    dy.renew_cg()
    return {"E": [_tolist(dy.lookup(E, i).npvalue()) for i in range(5)],
            "W": _tolist(dy.parameter(W).npvalue()), "b": _tolist(dy.parameter(b).npvalue())}


def _two_graphs_read(dy):
    """A value computed, then a step, then a forward of new nodes made before the step:
    they read the values of when they are computed (DyNet's forward copies)."""
    pc = dy.ParameterCollection()
    W = pc.parameters_from_numpy(W_INIT)
    E = pc.lookup_parameters_from_numpy(E_INIT)
    dy.renew_cg()
    pending = dy.lookup(E, 1)                 # made, not computed
    y = dy.sum_elems(W * dy.lookup(E, 0))
    y.value()
    E.init_row(1, [1.0, 2.0, 3.0])
    return {"pending": _tolist(pending.npvalue()), "y": y.value()}


def run(dy):
    out = {"matvec": _matvec(dy), "mutators": _mutators(dy), "pending": _two_graphs_read(dy)}
    for trainer in TRAINERS:
        for sparse in (True, False):
            for decay in (0.0, 0.1):
                out[f"repeated/{trainer}/{int(sparse)}/{decay}"] = _repeated(dy, trainer, sparse, decay)
    return out
