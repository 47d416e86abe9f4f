"""What every recurrent builder shares: `RNNState`, `StackedRNNState` and the base
class `_RNNBuilder` (DyNet's names).

A builder owns parameters in its own subcollection, named as DyNet names them
("/vanilla-lstm-builder/_0", "_1", ... layer after layer, so that files written by
DyNet and by us use the same keys); `initial_state()` starts a sequence and every
`add_input(x)` returns a new immutable `RNNState`.
"""
import math

from autobatch.api.core import (
    Expression, cg_version, cmult, dropout, inputVector, ones, parameter, size_argument, zeros,
)


_MAX_SPEC_INT = 2 ** 31 - 1


def _checked_spec(cls, spec, ints, floats=(), classes=(), optional=(), bools=()):
    """`spec` as keyword arguments for `cls`, after checking its keys and value types
    (a spec may come from a file: no truncated floats, no strings for numbers)."""
    if not isinstance(spec, dict):
        raise TypeError(f"{cls.__name__}.from_spec: spec must be a dict, got {type(spec).__name__}")
    allowed = set(ints) | set(floats) | set(classes) | set(bools)
    unknown, missing = set(spec) - allowed, (allowed - set(optional)) - set(spec)
    if unknown or missing:
        raise ValueError(f"{cls.__name__}.from_spec: unknown keys {sorted(map(str, unknown))}, "
                         f"missing keys {sorted(missing)}")
    for k, v in spec.items():
        if k in ints:
            ok = type(v) is int and 1 <= v <= _MAX_SPEC_INT
        elif k in floats:
            ok = type(v) in (int, float) and math.isfinite(v)
        elif k in bools:
            ok = type(v) is bool
        else:
            ok = isinstance(v, type)
        if not ok:
            raise ValueError(f"{cls.__name__}.from_spec: bad value {v!r} for {k}")
    return spec


class RNNState:
    """An immutable point in a sequence: per-layer hidden (and cell) states.

    A state of batch size 1 (for example the initial state) fed a batched input
    broadcasts its hidden and cell states over the batch, as DyNet does."""
    __slots__ = ("_builder", "_h", "_c", "_prev", "_masks")

    def __init__(self, builder, h, c, prev, masks):
        # masks: a one-element list shared by all states of a sequence, so that
        # `builder.set_dropout_masks()` after `initial_state()` reaches them (as DyNet)
        self._builder, self._h, self._c, self._prev, self._masks = builder, h, c, prev, masks

    def add_input(self, x):
        """The state after input `x` (an Expression of shape (input_dim,), any batch)."""
        if not isinstance(x, Expression):
            raise TypeError(f"add_input takes an Expression, got {type(x).__name__}")
        h, c = self._builder._step(self, x)
        return RNNState(self._builder, h, c, self, self._masks)

    def add_inputs(self, xs):
        """States after each input, in order."""
        states, s = [], self
        for x in xs:
            s = s.add_input(x)
            states.append(s)
        return states

    def transduce(self, xs):
        """Outputs after each input (cheaper to write than add_inputs + output)."""
        xs = list(xs)
        out = self._builder._transduce(self, xs)
        return out if out is not None else [s.output() for s in self.add_inputs(xs)]

    def output(self):
        """Hidden state of the top layer."""
        return self._h[-1]

    def h(self):
        """Hidden state of each layer."""
        return tuple(self._h)

    def s(self):
        """The full state: cells then hidden states for LSTMs (DyNet's order)."""
        return tuple(self._c) + tuple(self._h) if self._c is not None else tuple(self._h)

    def prev(self):
        """The state before the last input (None for the initial state), as DyNet's
        ``prev()``."""
        return self._prev

    def b(self):
        """The builder this state belongs to (DyNet's ``b()``)."""
        return self._builder

    def set_h(self, es=None):
        """A state with hidden states `es` (one per layer), same cells."""
        es = self._builder._check_layers(es, "set_h")
        return RNNState(self._builder, es, self._c, self, self._masks)

    def set_s(self, es=None):
        """A state from a full state: for LSTMs the cells then the hidden states
        (2 * layers expressions), or only the cells (layers expressions), the hidden
        states then staying this state's (as in DyNet; zero on an initial state)."""
        b = self._builder
        if not b._has_cell:
            return self.set_h(es)
        es = list(es)
        if len(es) == b.layers:       # DyNet keeps the state's own hidden states
            hs = [h if h is not None else zeros(b.hidden_dim, batch_size=c.dim()[1])
                  for h, c in zip(self._h, es)]
            return RNNState(b, hs, es, self, self._masks)
        if len(es) != 2 * b.layers:
            raise ValueError(f"set_s: expected {b.layers} cells or {2 * b.layers} expressions "
                             f"(cells then hidden states), got {len(es)}")
        return RNNState(b, es[b.layers:], es[:b.layers], self, self._masks)


class StackedRNNState:
    """DyNet's StackedRNNState: a stack of RNN states (of builders applied one above
    the other), fed an input at the bottom; each state's output is the next one's
    input. `states`: one RNNState (or StackedRNNState) per level."""

    def __init__(self, states, prev=None):
        self.states = list(states)
        if not self.states:
            raise ValueError("StackedRNNState needs at least one state")
        self._prev = prev

    def add_input(self, x):
        """The stacked state after input ``x`` at the bottom: each state reads the output of the
        one below it. Every instance's step of a layer batches with the others'.
        """
        nxt = []
        for s in self.states:
            s = s.add_input(x)
            nxt.append(s)
            x = s.output()
        return StackedRNNState(nxt, self)

    def add_inputs(self, xs):
        """The stacked states after each input, in order."""
        out, cur = [], self
        for x in xs:
            cur = cur.add_input(x)
            out.append(cur)
        return out

    def output(self):
        """The output of the top state."""
        return self.states[-1].output()

    def prev(self):
        """The stacked state before the last input (None at the start), as DyNet's
        ``prev()``."""
        return self._prev

    def h(self):
        """Per stacked state, its hidden states (``RNNState.h()`` of each), bottom first."""
        return [s.h() for s in self.states]

    def s(self):
        """Per stacked state, its full state (``RNNState.s()`` of each), bottom first."""
        return [s.s() for s in self.states]


class _RNNBuilder:
    """Base class of the recurrent builders (DyNet's `_RNNBuilder`): parameters per
    layer (subclasses give `_layer_shapes` and `_cell`), variational dropout masks,
    initial states."""
    _has_cell = False
    _name = "rnn-builder"

    def __init__(self, layers, input_dim, hidden_dim, model):
        where = type(self).__name__
        # an input_dim of 0 is an empty input, as in DyNet (a switched-off feature); no
        # layers or an empty state has no output (DyNet crashes on both)
        self.layers = size_argument(layers, where + ": layers", 1)
        self.input_dim = size_argument(input_dim, where + ": input_dim")
        self.hidden_dim = size_argument(hidden_dim, where + ": hidden_dim", 1)
        self._pc = model.add_subcollection(self._name)
        # DyNet's names: unnamed parameters "_0", "_1", ... layer after layer
        self._params = []
        for layer in range(self.layers):
            in_dim = self.input_dim if layer == 0 else self.hidden_dim
            self._params.append([self._pc.add_parameters(shape, init=init)
                                 for _, shape, init in self._layer_shapes(in_dim)]
                                + [self._pc.add_parameters(shape, init=init, name=name)
                                   for name, shape, init in self._layer_extras(in_dim)])
        self.dropout_rate = 0.0
        self.dropout_rate_h = 0.0
        self._update = True
        self._param_key = None
        self._sequence_masks = [None]
        self._started = None       # the graph of the last initial_state()

    def _layer_extras(self, in_dim):
        """(name, shape, init) of named parameters a layer has beyond DyNet's unnamed
        ones (created after them, so that those keep DyNet's names)."""
        return []

    @property
    def spec(self):
        """Constructor arguments (for dy.save / dy.load)."""
        return {"layers": self.layers, "input_dim": self.input_dim, "hidden_dim": self.hidden_dim}

    _spec_floats = ()
    _spec_bools = ()

    @classmethod
    def from_spec(cls, spec, model):
        """The builder made from a saved ``spec`` with its parameters in ``model``: how ``dy.load``
        rebuilds it (the spec is checked; nothing in it is called or imported).
        """
        spec = _checked_spec(cls, spec, ("layers", "input_dim", "hidden_dim"),
                             floats=cls._spec_floats, bools=cls._spec_bools,
                             optional=cls._spec_floats + cls._spec_bools)
        return cls(model=model, **spec)

    # --- DyNet's builder API ---

    def initial_state(self, vecs=None, update=True):
        """A new sequence. `vecs`: initial state (for LSTMs the cells then the hidden
        states, or only the cells); zero when omitted. `update=False`: the parameters
        are not updated by this sequence's gradients."""
        self._update = update
        self._started = cg_version()
        self._sequence_masks = [self._dropout_masks(1)]
        state = RNNState(self, [None] * self.layers,
                         [None] * self.layers if self._has_cell else None, None,
                         self._sequence_masks)
        return state if vecs is None else state.set_s(vecs)

    def initial_state_from_raw_vectors(self, vecs=None, update=True):
        """As `initial_state`, from lists or numpy vectors."""
        return self.initial_state(None if vecs is None else [inputVector(v) for v in vecs], update)

    def param_collection(self):
        """The builder's own subcollection (DyNet's name, e.g. "/vanilla-lstm-builder/")."""
        return self._pc

    def whoami(self):
        """The builder's class name, as DyNet's builders answer."""
        return type(self).__name__

    def get_parameters(self):
        """Per layer, the layer's Parameters."""
        return [list(ps) for ps in self._params]

    def get_parameter_expressions(self):
        """Per layer, the expressions of the layer's parameters that the builder uses
        in the current graph. As in DyNet, a ValueError before `initial_state()` has
        been called in this graph."""
        self._check_started()
        return [list(self._layer_params(layer)) for layer in range(self.layers)]

    def _check_started(self):
        if self._started != cg_version():
            raise ValueError("get_parameter_expressions: call initial_state() in this "
                             "computation graph first")

    def set_dropout(self, f):
        """Dropout rate `f` on the inputs and the recurrent states."""
        self.set_dropouts(f, f)

    def set_dropouts(self, d, d_h):
        """Dropout on each layer's input (d) and recurrent input (d_h): variational,
        one mask per sequence (Gal 2016), scaled by 1/(1-d) as in DyNet."""
        for v in (d, d_h):
            if not 0.0 <= v < 1.0:
                raise ValueError(f"dropout rates must be in [0, 1), got {v}")
        self.dropout_rate, self.dropout_rate_h = float(d), float(d_h)

    def disable_dropout(self):
        """No dropout from the next sequence on."""
        self.dropout_rate = self.dropout_rate_h = 0.0

    def set_dropout_masks(self, batch_size=1):
        """New dropout masks for the sequence begun by the last `initial_state()`, one
        per element of a batch of `batch_size` (otherwise one mask is shared by the
        whole batch). Call it after `initial_state()`, as in DyNet."""
        if type(batch_size) is not int or batch_size < 1:
            raise ValueError(f"set_dropout_masks: batch_size must be a positive int, got {batch_size!r}")
        self._sequence_masks[0] = self._dropout_masks(batch_size)

    # --- internals ---

    def _check_layers(self, es, what):
        es = list(es)
        if len(es) != self.layers:
            raise ValueError(f"{what}: expected {self.layers} expressions, got {len(es)}")
        return es

    def _dropout_masks(self, batch_size):
        if self.dropout_rate == 0.0 and self.dropout_rate_h == 0.0:
            return None
        masks = []
        for layer in range(self.layers):
            in_dim = self.input_dim if layer == 0 else self.hidden_dim
            mx = (dropout(ones(in_dim, batch_size=batch_size), self.dropout_rate)
                  if self.dropout_rate else None)
            mh = (dropout(ones(self.hidden_dim, batch_size=batch_size), self.dropout_rate_h)
                  if self.dropout_rate_h else None)
            masks.append((mx, mh))
        return masks

    def _transduce(self, state, xs):
        """The outputs of state.transduce(xs) made without a Python step per input, or
        None: take the general path (a builder that has a compiled one overrides it)."""
        return None

    def _layer_params(self, layer):
        # the expressions of a graph are the same for every step: make them once
        key = (cg_version(), self._update)
        if self._param_key != key:
            self._param_key = key
            self._param_exprs = [[parameter(p, update=self._update) for p in ps] for ps in self._params]
        return self._param_exprs[layer]

    def _step(self, state, x):
        masks, has_cell, layers = state._masks[0], self._has_cell, self.layers
        batch = x._batch_size()
        hs, cs = [], []
        for layer in range(layers):
            h_prev = state._h[layer]
            c_prev = state._c[layer] if has_cell else None
            if batch != 1:          # (unbatched inputs, the common case, skip the calls)
                h_prev = _broadcast(h_prev, batch, self.hidden_dim)
                c_prev = _broadcast(c_prev, batch, self.hidden_dim)
            if masks is not None:
                mx, mh = masks[layer]
                if mx is not None:
                    x = cmult(x, mx)
                if mh is not None and h_prev is not None:
                    h_prev = cmult(h_prev, mh)
            x, c = self._cell(self._layer_params(layer), x, h_prev, c_prev)
            hs.append(x)
            cs.append(c)
            if layer + 1 < layers:
                batch = x._batch_size()
        return hs, (cs if has_cell else None)


def _broadcast(e, batch, dim):
    """`e` (batch size 1) over a batch of `batch`, as DyNet's builders broadcast a
    single initial state over batched inputs."""
    if e is None or batch == 1 or e._batch_size() == batch:
        return e
    return e + zeros(dim, batch_size=batch)
