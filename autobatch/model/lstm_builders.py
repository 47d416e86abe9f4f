"""DyNet's other LSTM builders: `FastLSTMBuilder` (coupled gates)
and `CompactVanillaLSTMBuilder` (the vanilla LSTM with DyNet's fused-node layout,
variational dropout and weight noise). Their parameters are named and ordered as
DyNet's, and their outputs equal DyNet's for the same parameter values
(tests/data/builders_dynet.json, recorded with dynet38)."""
import numpy as np

from autobatch.api.core import (
    affine_transform, cg_version, cmult, const_parameter, parameter, logistic, lstm_cell, lstm_gates, lstm_hidden, noise, tanh, zeros,
)
from autobatch.io.registry import register_savable
from autobatch.model.builders import VanillaLSTMBuilder
from autobatch.model.rnn_base import _RNNBuilder


class FastLSTMBuilder(_RNNBuilder):
    """DyNet's FastLSTMBuilder: an LSTM with coupled input/forget gates. Per layer
    DyNet's eleven parameters x2i, h2i, c2i (H, 1), bi, x2o, h2o, c2o (H, 1), bo, x2c,
    h2c, bc; the computation is the one dynet38 (DyNet 2.2) performs, measured
    against it (tests/data/builders_dynet.json), in which the peephole vectors c2i and
    c2o take no part (they exist, are saved and loaded, and get no gradient)::

        i = sigmoid(W_xi x + W_hi h + b_i)
        c = (1 - i) * c_prev + i * tanh(W_xc x + W_hc h + b_c)
        o = sigmoid(W_xo x + W_ho h + b_o)
        h = o * tanh(c)

    (at the first step of a sequence without an initial state the h and c_prev terms
    are left out). Inputs (input_dim,), states (hidden_dim,), any batch size."""
    _has_cell = True
    _name = "fast-lstm-builder"

    def _layer_shapes(self, in_dim):
        H = self.hidden_dim
        return [("x2i", (H, in_dim), None), ("h2i", (H, H), None), ("c2i", (H, 1), None),
                ("bi", (H,), 0.0), ("x2o", (H, in_dim), None), ("h2o", (H, H), None),
                ("c2o", (H, 1), None), ("bo", (H,), 0.0), ("x2c", (H, in_dim), None),
                ("h2c", (H, H), None), ("bc", (H,), 0.0)]

    def _cell(self, p, x, h, c):
        x2i, h2i, _, bi, x2o, h2o, _, bo, x2c, h2c, bc = p
        if h is None:
            i = logistic(affine_transform([bi, x2i, x]))
            c = cmult(i, tanh(affine_transform([bc, x2c, x])))
            o = logistic(affine_transform([bo, x2o, x]))
        else:
            i = logistic(affine_transform([bi, x2i, x, h2i, h]))
            w = tanh(affine_transform([bc, x2c, x, h2c, h]))
            c = cmult(1.0 - i, c) + cmult(i, w)
            o = logistic(affine_transform([bo, x2o, x, h2o, h]))
        return cmult(o, tanh(c)), c


class CompactVanillaLSTMBuilder(_RNNBuilder):
    """DyNet's CompactVanillaLSTMBuilder: the vanilla LSTM (no peepholes, gates
    [i; f; o; g] = W_x x + W_h h + b, the forget gate's pre-activation + 1 as in
    DyNet's fused gate node; c = f * c_prev + i * g; h = o * tanh(c)) with
    DyNet's three parameters per layer (W_x (4H, in), W_h (4H, H), b (4H,)),
    variational dropout (`set_dropouts(d, d_r)`) and Gaussian weight noise
    (`set_weightnoise(std)`: W_x, W_h and b get fresh noise at every step, as DyNet's
    fused gate node does). Inputs (input_dim,) of any batch size."""
    _has_cell = True
    _name = "compact-vanilla-lstm-builder"

    def __init__(self, layers, input_dim, hidden_dim, model):
        super().__init__(layers, input_dim, hidden_dim, model)
        self.weightnoise_std = 0.0

    def _layer_shapes(self, in_dim):
        H = self.hidden_dim
        return [("Wx", (4 * H, in_dim), None), ("Wh", (4 * H, H), None), ("b", (4 * H,), 0.0)]

    def set_dropouts(self, d, d_r):
        """Dropout on each layer's input (d) and recurrent state (d_r): variational,
        one mask per sequence, scaled by 1/(1-d) (DyNet's keywords)."""
        super().set_dropouts(d, d_r)

    def set_weightnoise(self, std):
        """Standard deviation of the Gaussian noise added to the weights at each step
        (0 turns it off)."""
        std = float(std)
        if not std >= 0.0:
            raise ValueError(f"set_weightnoise: std must be >= 0, got {std}")
        self.weightnoise_std = std

    def _cell(self, p, x, h, c):
        Wx, Wh, b = p
        if self.weightnoise_std > 0.0:
            Wx, Wh, b = (noise(w, self.weightnoise_std) for w in (Wx, Wh, b))
        batch = x._batch_size()
        if h is None:
            h = zeros(self.hidden_dim, batch_size=batch)
        if c is None:
            c = zeros(self.hidden_dim, batch_size=batch)
        gates = lstm_gates(affine_transform([b, Wx, x, Wh, h]), self.hidden_dim, 1.0)
        c = lstm_cell(gates, [c])
        return lstm_hidden(c, gates), c


class SparseLSTMBuilder(VanillaLSTMBuilder):
    """DyNet's SparseLSTMBuilder: the vanilla LSTM whose weight matrices are pruned
    by magnitude (Narang et al. 2017). Per layer, in DyNet's creation order (and
    names, in "/vanilla-lstm-builder/"): W_x, W_h, mask_x, mask_h, b; the step uses
    W_x * mask_x and W_h * mask_h. The masks start at 1 and take no gradient;
    `set_sparsity(s)` sets them to 0 on the fraction `s` of all masked weights
    (W * mask, of every layer together) smallest in magnitude, as DyNet. `get_parameters()` gives per
    layer [W_x, W_h, b, mask_x, mask_h], as DyNet."""

    def __init__(self, layers, input_dim, hidden_dim, model, ln_lstm=False, forget_bias=1.0):
        if ln_lstm:
            raise NotImplementedError("SparseLSTMBuilder: ln_lstm=True is not supported")
        super().__init__(layers, input_dim, hidden_dim, model, forget_bias=forget_bias)

    def _layer_shapes(self, in_dim):
        H = self.hidden_dim
        return [("p_x", (4 * H, in_dim), None), ("p_h", (4 * H, H), None),
                ("mask_x", (4 * H, in_dim), 1.0), ("mask_h", (4 * H, H), 1.0),
                ("p_bias", (4 * H,), 0.0)]

    def set_sparsity(self, sparsity):
        """Prune the fraction `sparsity` (in [0, 1]) of the weights smallest in
        magnitude (their masks become 0; all others 1)."""
        s = float(sparsity)
        if not 0.0 <= s <= 1.0:
            raise ValueError(f"set_sparsity: sparsity must be in [0, 1], got {sparsity!r}")
        # the magnitudes of the weights as the step sees them (masked): a pruned weight
        # stays pruned when the sparsity grows, as in DyNet
        pairs = [pair for Wx, Wh, mx, mh, _ in self._params for pair in ((Wx, mx), (Wh, mh))]
        magnitudes = np.concatenate([np.abs(w.as_array() * m.as_array()).ravel(order="F")
                                     for w, m in pairs])
        n_pruned = magnitudes.size - int(magnitudes.size * (1.0 - s))
        keep = np.ones(magnitudes.size, dtype=np.float32)
        keep[np.argsort(magnitudes, kind="stable")[:n_pruned]] = 0.0
        start = 0
        for _, _, mx, mh, _ in self._params:
            for m in (mx, mh):
                n = int(np.prod(m.shape()))
                m.set_value(keep[start:start + n].reshape(m.shape(), order="F"))
                start += n

    def get_parameters(self):
        return [[Wx, Wh, b, mx, mh] for Wx, Wh, mx, mh, b in self._params]

    def get_parameter_expressions(self):
        """Per layer [W_x, W_h, b, mask_x, mask_h] as expressions (the masks constant);
        a ValueError before `initial_state()` in this graph, as in DyNet."""
        self._check_started()
        return [[parameter(Wx, update=self._update), parameter(Wh, update=self._update),
                 parameter(b, update=self._update), const_parameter(mx), const_parameter(mh)]
                for Wx, Wh, b, mx, mh in self.get_parameters()]

    def _layer_params(self, layer):
        # the masked weights, made once per graph; the masks are constants
        key = (cg_version(), self._update)
        if self._param_key != key:
            self._param_key, u = key, self._update
            self._param_exprs = [
                [cmult(parameter(Wx, update=u), const_parameter(mx)),
                 cmult(parameter(Wh, update=u), const_parameter(mh)), parameter(b, update=u)]
                for Wx, Wh, mx, mh, b in self._params]
        return self._param_exprs[layer]


# registered under the names files have stored since the first format (see builders.py)
for _cls in (FastLSTMBuilder, CompactVanillaLSTMBuilder, SparseLSTMBuilder):
    register_savable(_cls, f"autobatch.lstm_builders:{_cls.__qualname__}")
del _cls
