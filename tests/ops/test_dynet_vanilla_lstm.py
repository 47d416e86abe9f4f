"""DyNet's vanilla_lstm_gates, vanilla_lstm_gates_concat, vanilla_lstm_gates_dropout,
vanilla_lstm_gates_dropout_concat, vanilla_lstm_c and vanilla_lstm_h: values and
gradients against DyNet's (tests/data/dynet_vanilla_lstm.npz, made by
tests/data/make_dynet_vanilla_lstm_fixture.py; the cases in
tests/data/dynet_vanilla_lstm_cases.py), DyNet's argument checks, and the batching of
their products. Their gradient checks and batched-against-unbatched runs are the
"vanilla" variants of support/op_cases_nn.py."""
import os
import sys

import numpy as np
import pytest

import autobatch as dy
from autobatch.errors import DimensionError

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "data"))
from dynet_ops_select_linalg_cases import check_case  # noqa: E402
from dynet_vanilla_lstm_cases import CASES  # noqa: E402

FIXTURE = np.load(os.path.join(HERE, "data", "dynet_vanilla_lstm.npz"))


@pytest.mark.parametrize("name,specs,build", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_dynet(name, specs, build):
    """The masks' gradients are DyNet's zeros: they are constants of the gates."""
    check_case(dy, FIXTURE, name, specs, build)


def _args(h=2, ins=(3,), bs=1, masks=False):
    dy.renew_cg()
    x = [dy.inputTensor(np.ones((i, bs)) if bs > 1 else np.ones(i), batched=bs > 1) for i in ins]
    rest = [dy.inputTensor(np.ones(h)), dy.inputTensor(np.ones((4 * h, sum(ins)))),
            dy.inputTensor(np.ones((4 * h, h))), dy.inputTensor(np.ones(4 * h))]
    if masks:
        rest += [dy.inputTensor(np.ones(sum(ins))), dy.inputTensor(np.ones(h))]
    return x, rest


def test_dynet_keywords_and_defaults():
    x, (h, wx, wh, b) = _args()
    g = dy.vanilla_lstm_gates(x_t=x[0], h_tm1=h, Wx=wx, Wh=wh, b=b, weightnoise_std=0.0)
    assert g.dim() == ((8,), 1)
    x, (h, wx, wh, b, mx, mh) = _args(ins=(1, 2), masks=True)
    g = dy.vanilla_lstm_gates_dropout_concat(x_t=x, h_tm1=h, Wx=wx, Wh=wh, b=b,
                                             dropout_mask_x=mx, dropout_mask_h=mh)
    assert g.dim() == ((8,), 1)


@pytest.mark.parametrize("build,match", [
    (lambda x, r: dy.vanilla_lstm_gates(x[0], r[0], r[2], r[2], r[3]), "Wx must be a matrix"),
    (lambda x, r: dy.vanilla_lstm_gates(x[0], r[0], r[1], r[1], r[3]), "Wh must be a matrix"),
    (lambda x, r: dy.vanilla_lstm_gates(x[0], r[0], r[1], r[2], r[0]), "b must be a vector"),
    (lambda x, r: dy.vanilla_lstm_gates(x[0], r[1], r[1], r[2], r[3]), "h_tm1 must be a vector"),
    (lambda x, r: dy.vanilla_lstm_gates(r[1], r[0], r[1], r[2], r[3]), r"x_t\[0\]"),
    (lambda x, r: dy.vanilla_lstm_gates_concat([x[0], x[0]], r[0], r[1], r[2], r[3]),
     "Wx must be a matrix"),
    (lambda x, r: dy.vanilla_lstm_gates_dropout(x[0], r[0], r[1], r[2], r[3], r[0], r[0]),
     "dropout_mask_x"),
    (lambda x, r: dy.vanilla_lstm_gates_dropout(x[0], r[0], r[1], r[2], r[3], x[0], x[0]),
     "dropout_mask_h"),
    (lambda x, r: dy.vanilla_lstm_h(r[0], r[0]), "4 times"),
    (lambda x, r: dy.vanilla_lstm_c(r[0], r[0]), "blocks"),
])
def test_shapes_are_checked_as_dynet_checks_them(build, match):
    x, rest = _args()
    with pytest.raises(DimensionError, match=match):
        build(x, rest)


def test_masks_with_another_batch_size_are_refused():
    x, (h, wx, wh, b) = _args(bs=2)
    mx = dy.inputTensor(np.ones((3, 3)), batched=True)
    with pytest.raises(DimensionError, match="batch size 1 or 2"):
        dy.vanilla_lstm_gates_dropout(x[0], h, wx, wh, b, mx, dy.inputTensor(np.ones(2)))


def test_an_empty_input_list_a_lone_expression_and_bad_weight_noise_are_refused():
    x, (h, wx, wh, b) = _args()
    with pytest.raises(ValueError, match="at least one"):
        dy.vanilla_lstm_gates_concat([], h, wx, wh, b)
    with pytest.raises(TypeError, match="x_t must be a list"):
        dy.vanilla_lstm_gates_concat(x[0], h, wx, wh, b)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="weightnoise_std"):
            dy.vanilla_lstm_gates(x[0], h, wx, wh, b, weightnoise_std=bad)


@pytest.mark.parametrize("variant", ["plain", "dropout_concat"])
def test_weight_noise_perturbs_the_weights_and_bias_with_its_standard_deviation(variant):
    """weightnoise_std adds N(0, std) to Wx, Wh and b, fresh for each node: with zero
    weights, x = e_1 and h = e_1 the g block's pre-activation is the sum of three noises
    (std * sqrt(3)); the weights' gradients are those of the noisy copies."""
    H, I, std, nodes = 32, 3, 0.2, 60
    pc = dy.ParameterCollection()
    Wx, Wh, b = pc.add_parameters((4 * H, I), init=0.0), pc.add_parameters((4 * H, H), init=0.0), \
        pc.add_parameters(4 * H, init=0.0)
    dy.renew_cg()
    x, h = dy.inputVector([1.0] + [0.0] * (I - 1)), dy.inputVector([1.0] + [0.0] * (H - 1))
    ones_x, ones_h = dy.inputVector([1.0] * I), dy.inputVector([1.0] * H)
    gates = []
    for _ in range(nodes):
        if variant == "plain":
            gates.append(dy.vanilla_lstm_gates(x, h, Wx, Wh, b, weightnoise_std=std))
        else:
            gates.append(dy.vanilla_lstm_gates_dropout_concat([x], h, Wx, Wh, b, ones_x, ones_h,
                                                              weightnoise_std=std))
    g_blocks = [dy.pick_range(g, 3 * H, 4 * H) for g in gates]
    loss = dy.esum([dy.sum_elems(g) for g in g_blocks])
    loss.backward()
    g = np.array([gb.npvalue() for gb in g_blocks])           # tanh(pre), nodes x H
    pre = np.arctanh(np.clip(g, -0.999999, 0.999999))
    assert abs(pre.std() / (std * np.sqrt(3)) - 1) < 0.1
    assert abs(pre.mean()) < 0.05
    assert len({tuple(np.round(row, 6)) for row in g}) == nodes      # fresh noise per node
    # d loss / d Wx[3H:, 0] = sum over nodes of (1 - g^2) (x = e_1); other columns zero
    grad = Wx.grad_as_array()
    np.testing.assert_allclose(grad[3 * H:, 0], (1 - g ** 2).sum(axis=0), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(grad[3 * H:, 1:], 0.0)
    np.testing.assert_allclose(b.grad_as_array()[3 * H:], (1 - g ** 2).sum(axis=0),
                               rtol=1e-4, atol=1e-5)


def test_no_weight_noise_is_the_noise_free_gates():
    x, (h, wx, wh, b) = _args()
    np.testing.assert_array_equal(dy.vanilla_lstm_gates(x[0], h, wx, wh, b, 0.0).npvalue(),
                                  dy.vanilla_lstm_gates(x[0], h, wx, wh, b).npvalue())


def test_the_steps_of_many_sequences_batch_into_one_product_per_weight(strategy):
    """As DyNet's node: the gates of every sequence at a step share Wx and Wh, so their
    products run as one gemm per weight; values equal those of one sequence at a time."""
    pc = dy.ParameterCollection()
    Wx, Wh, b = pc.add_parameters((16, 5)), pc.add_parameters((16, 4)), pc.add_parameters((16,))
    rng = np.random.default_rng(0)
    seqs = [[rng.uniform(-1, 1, 5) for _ in range(3)] for _ in range(6)]
    masks = [rng.uniform(0, 2, 5), rng.uniform(0, 2, 4)]

    def final_states(together):
        outs = []
        dy.renew_cg(strategy=strategy if together else "none")
        for seq in seqs:
            h = c = dy.zeros(4)
            mx, mh = dy.inputTensor(masks[0]), dy.inputTensor(masks[1])
            for v in seq:
                g = dy.vanilla_lstm_gates_dropout_concat([dy.inputTensor(v)], h, Wx, Wh, b, mx, mh)
                c = dy.vanilla_lstm_c(c, g)
                h = dy.vanilla_lstm_h(c, g)
            outs.append(h)
        loss = dy.esum([dy.sum_elems(o) for o in outs])
        loss.backward()
        values = [o.npvalue() for o in outs]
        grads = [Wx.grad_as_array().copy(), Wh.grad_as_array().copy()]
        sizes = [len(ids) for op, ids in dy.cg().batches() if op == "affine_transform"]
        for p in (Wx, Wh, b):
            p.scale_gradient(0.0)
        return values, grads, sizes

    alone, grads_alone, _ = final_states(False)
    together, grads_together, sizes = final_states(True)
    np.testing.assert_allclose(np.array(together), np.array(alone), rtol=1e-5, atol=1e-6)
    for a, t in zip(grads_alone, grads_together):
        np.testing.assert_allclose(t, a, rtol=1e-4, atol=1e-6)
    if strategy != "none":
        assert max(sizes) == len(seqs), sizes
