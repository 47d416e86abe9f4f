"""Recurrent and tree builders with DyNet's Python API.

A builder owns parameters; `initial_state()` starts a sequence and every
`add_input(x)` returns a new immutable `RNNState`. Per-instance code calls them as
usual; the engine batches the steps of all instances. The LSTM builders record one
fused node per gate activation, cell update and hidden output (see `lstm_gates`).
"""
from autobatch.api.core import (
    _vanilla_lstm_run, affine_transform, cmult, concatenate, layer_norm, logistic, lstm_cell,
    lstm_gates, lstm_hidden, size_argument, tanh, zeros,
)
from autobatch.io.registry import register_savable
from autobatch.model.rnn_base import (  # noqa: F401 (RNNState, StackedRNNState re-exported)
    RNNState, StackedRNNState, _RNNBuilder, _checked_spec,
)


class SimpleRNNBuilder(_RNNBuilder):
    """h_t = tanh(W_x x_t + W_h h_{t-1} + b)"""
    _name = "simple-rnn-builder"

    def _layer_shapes(self, in_dim):
        H = self.hidden_dim
        return [("x2h", (H, in_dim), None), ("h2h", (H, H), None), ("bh", (H,), 0.0)]

    def _cell(self, p, x, h, c):
        Wx, Wh, b = p
        if h is None:
            return tanh(affine_transform([b, Wx, x])), None
        return tanh(affine_transform([b, Wx, x, Wh, h])), None


class VanillaLSTMBuilder(_RNNBuilder):
    """LSTM without peepholes (DyNet's VanillaLSTMBuilder): gates [i; f; o; g] =
    W_x x + W_h h + b, f gets + forget_bias; c = f*c + i*g; h = o*tanh(c).

    Each step records 5 nodes: the input projection (its own node, so that the
    steps of all sequences share one gemm), the recurrent affine transform, and the
    fused gate, cell and hidden ops.

    `ln_lstm=True`: DyNet's layer-normalised LSTM, gates = b + LN(W_x x; g_x, b_x) +
    LN(W_h h; g_h, b_h) and h = o * tanh(LN(c; g_c, b_c)), with
    LN(v; g, b) = g * (v - mean(v)) / (std(v) + 1e-8) + b (a composite of engine ops).
    Its six layer-norm parameters per layer (g_h, b_h, g_x, b_x of size 4H, g_c, b_c
    of size H; gains 1, biases 0) are in the builder's collection, named "ln_gh",
    "ln_bh", ... ("ln_gh_1" for layer 1): DyNet 2.2 puts them unnamed in the parent
    collection instead; `get_parameters()` gives, as DyNet, the three others."""
    _has_cell = True
    _name = "vanilla-lstm-builder"
    _spec_floats = ("forget_bias",)
    _spec_bools = ("ln_lstm",)
    _LN = (("ln_gh", 4, 1.0), ("ln_bh", 4, 0.0), ("ln_gx", 4, 1.0), ("ln_bx", 4, 0.0),
           ("ln_gc", 1, 1.0), ("ln_bc", 1, 0.0))

    def __init__(self, layers, input_dim, hidden_dim, model, ln_lstm=False, forget_bias=1.0):
        self.forget_bias = float(forget_bias)
        self.ln_lstm = bool(ln_lstm)
        super().__init__(layers, input_dim, hidden_dim, model)

    @property
    def spec(self):
        spec = dict(super().spec, forget_bias=self.forget_bias)
        if self.ln_lstm:
            spec["ln_lstm"] = True
        return spec

    def set_dropouts(self, d, d_r):
        """Dropout on each layer's input (d) and recurrent state (d_r): variational,
        one mask per sequence, scaled by 1/(1-d) (DyNet's keywords)."""
        super().set_dropouts(d, d_r)

    def get_parameters(self):
        """Per layer [W_x, W_h, b] (DyNet's; without the layer-norm parameters)."""
        return [list(ps[:3]) for ps in self._params]

    def get_parameter_expressions(self):
        return [ps[:3] for ps in super().get_parameter_expressions()]

    def _layer_shapes(self, in_dim):
        H = self.hidden_dim
        return [("p_x", (4 * H, in_dim), None), ("p_h", (4 * H, H), None), ("p_bias", (4 * H,), 0.0)]

    def _layer_extras(self, in_dim):
        return [(name, (k * self.hidden_dim,), init) for name, k, init in self._LN] if self.ln_lstm else []

    def _transduce(self, state, xs):
        # the common case, compiled (_vanilla_lstm_run makes the nodes _cell makes, in
        # its order): no layer norm, no dropout masks, unbatched vectors, and neither
        # _cell nor _layer_params overridden by a subclass (SparseLSTMBuilder's masks)
        if self.ln_lstm or state._masks[0] is not None or \
                type(self)._cell is not VanillaLSTMBuilder._cell or \
                type(self)._layer_params is not _RNNBuilder._layer_params:
            return None
        return _vanilla_lstm_run(xs, [self._layer_params(k) for k in range(self.layers)],
                                 state._h, state._c, self.hidden_dim, self.forget_bias)

    def _cell(self, p, x, h, c):
        if self.ln_lstm:
            return self._ln_cell(p, x, h, c)
        Wx, Wh, b = p
        # The input projection is its own node: it depends on x only, so all time
        # steps of all sequences can share one large gemm; only W_h h waits for h.
        pre = affine_transform([b, Wx, x])
        if h is not None:
            pre = affine_transform([pre, Wh, h])
        gates = lstm_gates(pre, self.hidden_dim, self.forget_bias)
        if c is None:
            c = zeros(self.hidden_dim, batch_size=x._batch_size())
        c = lstm_cell(gates, [c])
        return lstm_hidden(c, gates), c

    def _ln_cell(self, p, x, h, c):
        Wx, Wh, b, gh, bh, gx, bx, gc, bc = p
        # DyNet's layer_norm, one engine node each (every step's batch together)
        pre = b + layer_norm(Wx * x, gx, bx)
        if h is not None:
            pre = pre + layer_norm(Wh * h, gh, bh)
        gates = lstm_gates(pre, self.hidden_dim, self.forget_bias)
        if c is None:
            c = zeros(self.hidden_dim, batch_size=x._batch_size())
        c = lstm_cell(gates, [c])
        return lstm_hidden(layer_norm(c, gc, bc), gates), c


LSTMBuilder = VanillaLSTMBuilder


class CoupledLSTMBuilder(_RNNBuilder):
    """LSTM with peephole connections and coupled input/forget gates (f = 1 - i),
    DyNet's CoupledLSTMBuilder."""
    _has_cell = True
    _name = "lstm-builder"           # DyNet's name for its (coupled) LSTMBuilder

    def _layer_shapes(self, in_dim):
        H = self.hidden_dim
        return [("x2i", (H, in_dim), None), ("h2i", (H, H), None), ("c2i", (H, H), None),
                ("bi", (H,), 0.0), ("x2o", (H, in_dim), None), ("h2o", (H, H), None),
                ("c2o", (H, H), None), ("bo", (H,), 0.0), ("x2c", (H, in_dim), None),
                ("h2c", (H, H), None), ("bc", (H,), 0.0)]

    def _cell(self, p, x, h, c):
        x2i, h2i, c2i, bi, x2o, h2o, c2o, bo, x2c, h2c, bc = p
        if h is None:
            i = logistic(affine_transform([bi, x2i, x]))
            w = tanh(affine_transform([bc, x2c, x]))
            c = cmult(i, w)
            o = logistic(affine_transform([bo, x2o, x, c2o, c]))
        else:
            i = logistic(affine_transform([bi, x2i, x, h2i, h, c2i, c]))
            w = tanh(affine_transform([bc, x2c, x, h2c, h]))
            c = cmult(1.0 - i, c) + cmult(i, w)
            o = logistic(affine_transform([bo, x2o, x, h2o, h, c2o, c]))
        return cmult(o, tanh(c)), c


class GRUBuilder(_RNNBuilder):
    """GRU (DyNet's): z = s(W_xz x + W_hz h + b_z), r = s(W_xr x + W_hr h + b_r),
    c = tanh(W_xh x + W_hh (r*h) + b_h), h' = (1 - z)*h + z*c."""
    _name = "gru-builder"

    def _layer_shapes(self, in_dim):
        H = self.hidden_dim
        return [("x2z", (H, in_dim), None), ("h2z", (H, H), None), ("bz", (H,), 0.0),
                ("x2r", (H, in_dim), None), ("h2r", (H, H), None), ("br", (H,), 0.0),
                ("x2h", (H, in_dim), None), ("h2h", (H, H), None), ("bh", (H,), 0.0)]

    def _cell(self, p, x, h, c):
        x2z, h2z, bz, x2r, h2r, br, x2h, h2h, bh = p
        if h is None:
            z = logistic(affine_transform([bz, x2z, x]))
            return cmult(z, tanh(affine_transform([bh, x2h, x]))), None
        z = logistic(affine_transform([bz, x2z, x, h2z, h]))
        r = logistic(affine_transform([br, x2r, x, h2r, h]))
        cand = tanh(affine_transform([bh, x2h, x, h2h, cmult(r, h)]))
        return cmult(1.0 - z, h) + cmult(z, cand), None


class BiRNNBuilder:
    """Stacked bidirectional RNN (DyNet's BiRNNBuilder): each layer runs a forward and
    a backward builder of hidden_dim/2 and concatenates their outputs."""

    def __init__(self, num_layers, input_dim, hidden_dim, model, rnn_builder_factory,
                 builder_layers=None):
        if builder_layers is not None:
            self.builder_layers = list(builder_layers)
            self._pc = self.builder_layers[0][0].param_collection()
            self._spec = None
            return
        num_layers = size_argument(num_layers, "BiRNNBuilder: num_layers", 1)
        input_dim = size_argument(input_dim, "BiRNNBuilder: input_dim")
        hidden_dim = size_argument(hidden_dim, "BiRNNBuilder: hidden_dim", 2)
        if hidden_dim % 2:
            raise ValueError(f"BiRNNBuilder: hidden_dim must be even, got {hidden_dim}")
        half = hidden_dim // 2
        self._pc = model.add_subcollection("birnn")
        self._spec = {"num_layers": num_layers, "input_dim": input_dim, "hidden_dim": hidden_dim,
                      "rnn_builder_factory": rnn_builder_factory}
        self.builder_layers = []
        for layer in range(num_layers):
            in_dim = input_dim if layer == 0 else hidden_dim
            self.builder_layers.append((rnn_builder_factory(1, in_dim, half, self._pc),
                                        rnn_builder_factory(1, in_dim, half, self._pc)))

    @property
    def spec(self):
        """The constructor's arguments (for ``dy.save``/``dy.load``); TypeError for a
        builder made from ``builder_layers``."""
        if self._spec is None:
            raise TypeError("a BiRNNBuilder made from builder_layers has no spec to save")
        return self._spec

    @classmethod
    def from_spec(cls, spec, model):
        """The builder made from a saved ``spec`` with its parameters in ``model``: how ``dy.load``
        rebuilds it (the spec is checked; nothing in it is called or imported).
        """
        spec = _checked_spec(cls, spec, ("num_layers", "input_dim", "hidden_dim"),
                             classes=("rnn_builder_factory",))
        return cls(model=model, **spec)

    def _run_layer(self, fb, bb, es):
        fs = fb.initial_state().add_inputs(es)
        bs = bb.initial_state().add_inputs(reversed(es))
        return fs, list(reversed(bs))

    def add_inputs(self, es):
        """(forward state, backward state) per position of the top layer."""
        es = list(es)
        for fb, bb in self.builder_layers[:-1]:
            fs, bs = self._run_layer(fb, bb, es)
            es = [concatenate([f.output(), b.output()]) for f, b in zip(fs, bs)]
        fs, bs = self._run_layer(*self.builder_layers[-1], es)
        return list(zip(fs, bs))

    def transduce(self, es):
        """Concatenated forward and backward outputs per position."""
        return [concatenate([f.output(), b.output()]) for f, b in self.add_inputs(es)]

    def set_dropout(self, p):
        """Dropout of rate ``p`` in every forward and backward builder (DyNet's
        ``set_dropout``)."""
        for fb, bb in self.builder_layers:
            fb.set_dropout(p)
            bb.set_dropout(p)

    def disable_dropout(self):
        """No dropout in any of the builders from now on (for evaluation)."""
        for fb, bb in self.builder_layers:
            fb.disable_dropout()
            bb.disable_dropout()

    def whoami(self):
        """The name "BiRNNBuilder", as DyNet's whoami answers."""
        return "BiRNNBuilder"

    def param_collection(self):
        """The subcollection holding the parameters of every layer."""
        return self._pc


class TreeState:
    """Hidden and cell state of one tree node (what TreeLSTMBuilder's leaf and compose
    return)."""
    __slots__ = {"h": "The node's hidden state, an Expression (hidden_dim,).",
                 "c": "The node's cell state, an Expression (hidden_dim,)."}

    def __init__(self, h, c):
        self.h, self.c = h, c

    def output(self):
        """The node's hidden state ``h`` (as an RNN state's ``output()``)."""
        return self.h


class TreeLSTMBuilder:
    """Binary Tree-LSTM (Tai et al., 2015).

    Leaf: [i; o; u] = W x + b, c = i*u, h = o*tanh(c).
    Node: [i; f_l; f_r; o; u] = U [h_l; h_r] + b', c = i*u + f_l*c_l + f_r*c_r,
    h = o*tanh(c). Both record fused nodes, so all leaves of a minibatch run as one
    batch and all nodes at the same height as another.
    """

    def __init__(self, input_dim, hidden_dim, model, forget_bias=0.0):
        self.input_dim = size_argument(input_dim, "TreeLSTMBuilder: input_dim")
        self.hidden_dim = size_argument(hidden_dim, "TreeLSTMBuilder: hidden_dim", 1)
        self.forget_bias = float(forget_bias)
        H = self.hidden_dim
        self._pc = model.add_subcollection("tree-lstm-builder")
        self.W_leaf = self._pc.add_parameters((3 * H, self.input_dim), name="W_leaf")
        self.b_leaf = self._pc.add_parameters(3 * H, init=0.0, name="b_leaf")
        self.U = self._pc.add_parameters((5 * H, 2 * H), name="U")
        self.b = self._pc.add_parameters(5 * H, init=0.0, name="b")

    @property
    def spec(self):
        """The constructor's arguments (input_dim, hidden_dim, forget_bias), for
        ``dy.save``/``dy.load``."""
        return {"input_dim": self.input_dim, "hidden_dim": self.hidden_dim, "forget_bias": self.forget_bias}

    @classmethod
    def from_spec(cls, spec, model):
        """The builder made from a saved ``spec`` with its parameters in ``model``: how ``dy.load``
        rebuilds it (the spec is checked; nothing in it is called or imported).
        """
        spec = _checked_spec(cls, spec, ("input_dim", "hidden_dim"), floats=("forget_bias",),
                             optional=("forget_bias",))
        return cls(model=model, **spec)

    def leaf(self, x):
        """The TreeState of a leaf with input ``x`` (input_dim,): [i; o; u] = W x + b, c = i * u,
        h = o * tanh(c). The leaves of every tree of a minibatch run as one batch.
        """
        gates = lstm_gates(affine_transform([self.b_leaf, self.W_leaf, x]), self.hidden_dim)
        c = lstm_cell(gates, [])
        return TreeState(lstm_hidden(c, gates), c)

    def compose(self, left, right):
        """The TreeState of a node with children ``left`` and ``right`` (TreeStates): [i; f_l; f_r;
        o; u] = U [h_l; h_r] + b, c = i * u + f_l * c_l + f_r * c_r, h = o * tanh(c). The nodes
        whose children are ready together (same height) run as one batch across all trees.
        """
        pre = affine_transform([self.b, self.U, concatenate([left.h, right.h])])
        gates = lstm_gates(pre, self.hidden_dim, self.forget_bias)
        c = lstm_cell(gates, [left.c, right.c])
        return TreeState(lstm_hidden(c, gates), c)

    def expr_for_tree(self, tree, leaf_input):
        """State of the root of `tree`: a leaf (anything `leaf_input` turns into an
        input Expression) or a pair (left, right) of trees."""
        if isinstance(tree, tuple) and len(tree) == 2:
            return self.compose(self.expr_for_tree(tree[0], leaf_input),
                                self.expr_for_tree(tree[1], leaf_input))
        return self.leaf(leaf_input(tree))

    def param_collection(self):
        """The builder's subcollection, holding W_leaf, b_leaf, U and b."""
        return self._pc

    def get_parameters(self):
        """The Parameters [W_leaf, b_leaf, U, b]."""
        return [self.W_leaf, self.b_leaf, self.U, self.b]


# registered under the names files have stored since the first format ("module:QualName"
# of the module the builders were first defined in), so files saved then still load
for _cls in (SimpleRNNBuilder, VanillaLSTMBuilder, CoupledLSTMBuilder, GRUBuilder, BiRNNBuilder,
             TreeLSTMBuilder):
    register_savable(_cls, f"autobatch.builders:{_cls.__qualname__}")
del _cls
