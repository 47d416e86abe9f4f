"""The cases of tests/data/dynet_vanilla_lstm.npz: DyNet's vanilla_lstm_gates,
vanilla_lstm_gates_concat, vanilla_lstm_gates_dropout, vanilla_lstm_gates_dropout_concat,
vanilla_lstm_c and vanilla_lstm_h, shared by the script that runs them in DyNet
(make_dynet_vanilla_lstm_fixture.py) and the test that runs them here
(tests/ops/test_dynet_vanilla_lstm.py). A case: its name, its inputs as (shape, batched)
and the expression it builds from them with the module `dy` (DyNet's or ours); inputs
and gradients as in dynet_ops_select_linalg_cases.py (whose `inputs` and `run` these
use)."""
H, I = 3, 4


def _weights(i=I, h=H):
    return [((4 * h, i), False), ((4 * h, h), False), ((4 * h,), False)]


def _gates(dy, x):
    return dy.vanilla_lstm_gates(x[0], x[1], x[2], x[3], x[4])


def _concat(dy, x):
    return dy.vanilla_lstm_gates_concat([x[0], x[1]], x[2], x[3], x[4], x[5])


def _dropout(dy, x):
    return dy.vanilla_lstm_gates_dropout(x[0], x[1], x[2], x[3], x[4], x[5], x[6])


def _dropout_concat(dy, x):
    return dy.vanilla_lstm_gates_dropout_concat([x[0], x[1]], x[2], x[3], x[4], x[5], x[6], x[7])


def _dropout_concat_one(dy, x):
    return dy.vanilla_lstm_gates_dropout_concat([x[0]], x[1], x[2], x[3], x[4], x[5], x[6])


def _step(dy, x):
    """One LSTM step from the gates to the hidden output, as xnmt writes it."""
    gates = dy.vanilla_lstm_gates_dropout_concat([x[0]], x[1], x[2], x[3], x[4], x[5], x[6])
    c = dy.vanilla_lstm_c(x[7], gates)
    return dy.vanilla_lstm_h(c, gates)


CASES = [
    ("vanilla_lstm_gates", [((I,), False), ((H,), False)] + _weights(), _gates),
    ("vanilla_lstm_gates_batched", [((I, 2), True), ((H, 2), True)] + _weights(), _gates),
    ("vanilla_lstm_gates_concat", [((1,), False), ((I - 1,), False), ((H,), False)] + _weights(),
     _concat),
    ("vanilla_lstm_gates_concat_batched", [((2, 3), True), ((2, 3), True), ((H, 3), True)]
     + _weights(), _concat),
    ("vanilla_lstm_gates_dropout", [((I,), False), ((H,), False)] + _weights()
     + [((I,), False), ((H,), False)], _dropout),
    ("vanilla_lstm_gates_dropout_batched_masks", [((I, 2), True), ((H, 2), True)] + _weights()
     + [((I, 2), True), ((H, 2), True)], _dropout),
    ("vanilla_lstm_gates_dropout_one_mask", [((I, 2), True), ((H, 2), True)] + _weights()
     + [((I,), False), ((H,), False)], _dropout),
    ("vanilla_lstm_gates_dropout_concat", [((3,), False), ((1,), False), ((H,), False)]
     + _weights() + [((I,), False), ((H,), False)], _dropout_concat),
    ("vanilla_lstm_gates_dropout_concat_one_input", [((I, 2), True), ((H, 2), True)]
     + _weights() + [((I,), False), ((H,), False)], _dropout_concat_one),
    ("vanilla_lstm_c", [((H,), False), ((4 * H,), False)],
     lambda dy, x: dy.vanilla_lstm_c(x[0], dy.logistic(x[1]))),
    ("vanilla_lstm_c_batched", [((H, 2), True), ((4 * H, 2), True)],
     lambda dy, x: dy.vanilla_lstm_c(x[0], dy.logistic(x[1]))),
    ("vanilla_lstm_h", [((H,), False), ((4 * H,), False)],
     lambda dy, x: dy.vanilla_lstm_h(x[0], dy.logistic(x[1]))),
    ("vanilla_lstm_h_batched", [((H, 2), True), ((4 * H, 2), True)],
     lambda dy, x: dy.vanilla_lstm_h(x[0], dy.logistic(x[1]))),
    ("vanilla_lstm_step", [((I, 2), True), ((H, 2), True)] + _weights()
     + [((I,), False), ((H,), False), ((H, 2), True)], _step),
]
