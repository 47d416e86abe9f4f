"""Trainers: apply accumulated gradients to parameters, then clear them.

The rules, defaults and step order are DyNet's (dynet/training.{h,cc}, python/_dynet.pyx).
One `update()`:

1. clipping: if enabled (default, threshold 5) and the L2 norm ``n`` of all gradients of
   updated parameters (used rows only, for sparse lookup tables) exceeds the threshold,
   gradients are scaled by ``threshold / n`` (a NaN/inf norm raises, as in DyNet);
2. the rule of the trainer, on every parameter with ``is_updated()``; for lookup tables
   with sparse updates (the default) only on the rows marked used since the last update:
   their values *and* their optimizer state rows; other rows are not touched. As in
   DyNet, a backward marks the rows of every trainable lookup of its graph made up to
   the node it starts from, also one off the loss's path (gradient 0, but momentum and
   Adam still move the row); lookups made after that node, dropped by cg_revert or in a
   graph that never ran backward mark nothing;
3. weight decay ``lam = model.get_weight_decay()``: ``theta <- (1 - lam) * theta`` on every
   parameter and every lookup row of the model, updated or not (DyNet's L2WeightDecay,
   see ParameterCollection.set_weight_decay);
4. gradients (used rows) are zeroed and the lookup tables' used rows cleared.

In the rules ``g`` is the clipped gradient, ``lr`` the learning rate, ``t`` the number of
updates done before this one plus 1. State starts at zero.

Each trainer's `rule` below is its numpy reference; `update()` runs the built-in ones as
compiled loops (autobatch/model/update_rules.pyx: steps 1-4 in one pass over each parameter, the
same float32 numbers). A subclass that overrides `rule` in Python gets it called, on
numpy arrays, as before.

A step is all or nothing: a Ctrl-C (any exception of a signal handler) before it
starts stops it, one during it is raised once it is complete (the compiled step runs no
Python code; a Python rule's step is undone on an exception). A graph that computed
with the parameters keeps the values it read: the step writes elsewhere while the
graph lives (autobatch/runtime/param_buffers.pyx).
"""
import math
import operator
import sys
import warnings

import numpy as np

from autobatch.model import update_rules as _update
from autobatch.api.core import LookupParameters


def hyperparameter(name, value, lo=0.0, hi=float("inf"), lo_open=False, hi_open=False):
    """value as a float in [lo, hi] (or the open ends): NaN, infinities and values out
    of range are a ValueError, a non-number a TypeError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v) or v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi):
        raise ValueError(f"{name} must be a finite number in {'(' if lo_open else '['}{lo:g}, "
                         f"{hi:g}{')' if hi_open else ']'}, got {value!r}")
    return v


def chosen_indices(model, updated_params, updated_lookups):
    """The indices `update_subset` got, checked against `model`: two lists of ints, each
    index once, in order. An index is an int (numpy's integers too, anything with
    __index__); floats, strings and bools are a TypeError, as indices everywhere in the
    library, not truncated or parsed (DyNet truncates floats and reads bools as 0, 1)."""
    chosen = []
    for where, indices, n in (("updated_params", updated_params, len(model.parameters_list())),
                              ("updated_lookups", updated_lookups, len(model.lookup_parameters_list()))):
        if isinstance(indices, (str, bytes)) or not hasattr(indices, "__iter__"):
            raise TypeError(f"update_subset: {where} must be a list of ints, got {type(indices).__name__}")
        checked = []
        for i in indices:
            try:
                if isinstance(i, (bool, np.bool_)):
                    raise TypeError
                k = operator.index(i)
            except TypeError:
                raise TypeError(f"update_subset: {where} must be a list of ints, got "
                                f"{type(i).__name__} {i!r}") from None
            if not 0 <= k < n:
                raise IndexError(f"update_subset: {where} index {k} out of range (the model has {n})")
            checked.append(k)
        chosen.append(list(dict.fromkeys(checked)))
    return chosen


# the built-in trainers' rule functions -> their loops in autobatch.model.update_rules
_COMPILED_RULES = {}


def _compiled_as(name):
    """Register a trainer's `rule` as having the compiled loop `name`, which `update()`
    runs in its place (the same numbers in one pass). A `rule` overridden in Python (a
    subclass, a wrapper) is another function: `update()` calls it, on numpy arrays."""
    def register(rule):
        _COMPILED_RULES[rule] = _update.RULES[name]
        return rule
    return register


class Trainer:
    """Common machinery; subclasses give `state_names` and `rule`."""

    state_names = ()

    def __init__(self, m, learning_rate):
        self.model = m
        self.learning_rate = hyperparameter("learning_rate", learning_rate)
        self.clipping_enabled = True
        self.clip_threshold = 5.0
        self.sparse_updates_enabled = True
        self.updates = 0
        self.clips = 0
        self._updates_since_status = 0
        self._clips_since_status = 0
        self._state = {}   # id(parameter) -> (parameter, [state arrays])
        self._model_slots = None    # (key, slots): see _all_slots

    # -------------------------------------------------------- settings ----

    def set_clip_threshold(self, thr):
        """Clip the global gradient norm to `thr`; `thr <= 0` disables clipping."""
        thr = hyperparameter("clip threshold", thr, lo=-float("inf"))
        self.clipping_enabled = thr > 0
        self.clip_threshold = thr if thr > 0 else 0.0

    def get_clip_threshold(self):
        """The gradient clipping threshold (the global L2 norm above which gradients are
        rescaled; 0 or less: no clipping)."""
        return self.clip_threshold

    def set_sparse_updates(self, su):
        """Sparse (default): lookup tables update only the rows a backward marked used
        (see the module docstring) and their state.
        Dense: the whole table, which is exact for momentum-style rules."""
        self.sparse_updates_enabled = bool(su)

    @property
    def learning_rate(self):
        """The global learning rate, DyNet's property: setting it checks the value as
        ``set_learning_rate`` does (a finite number >= 0)."""
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        self._learning_rate = hyperparameter("learning_rate", value)

    def whoami(self):
        """The name of the built-in trainer this is ("SimpleSGDTrainer", "AdamTrainer",
        ...), as DyNet's ``whoami``; a subclass of one gives that one's name."""
        for cls in type(self).__mro__:
            if cls.__module__ == __name__ and cls is not Trainer:
                return cls.__name__
        return type(self).__name__

    def set_learning_rate(self, value):
        """Set the learning rate (a finite number > 0), as DyNet's ``set_learning_rate``."""
        self.learning_rate = hyperparameter("learning_rate", value)

    def restart(self, learning_rate=None):
        """Zero the optimizer state (momenta, averages); optionally set the learning rate."""
        if learning_rate is not None:
            self.learning_rate = hyperparameter("learning_rate", learning_rate)
        for _, slot in self._state.values():
            for s in slot.states:
                s[...] = 0

    def status(self):
        """Print ``[lr=... clips=... updates=...]`` (counts since the last status) to
        stderr, as DyNet does, and reset those counts. (Printing is what it is for: the
        library's other messages go through ``logging.getLogger("autobatch")``.)"""
        sys.stderr.write(f"[lr={self.learning_rate:g} clips={self._clips_since_status} "
                         f"updates={self._updates_since_status}] ")
        self._updates_since_status = self._clips_since_status = 0

    def update_epoch(self, r=1.0):
        """Deprecated in DyNet and a no-op there: set `learning_rate` directly."""
        warnings.warn("Trainer.update_epoch is deprecated (as in DyNet) and does nothing: set "
                      "learning_rate instead", DeprecationWarning, stacklevel=2)

    # ---------------------------------------------------------- update ----

    def _states(self, p):
        """Optimizer state arrays of `p`, shaped like its storage (rows x dim for tables)."""
        return self._slot(p).states

    def _slot(self, p):
        """`p`'s memory and state for the compiled rules (made on first use)."""
        entry = self._state.get(id(p))
        if entry is None or entry[0] is not p:
            if isinstance(p, LookupParameters):
                shape, mask, row_size = (p.n_rows, p.row_size), p._used_mask, p.row_size
            else:
                shape, mask, row_size = (p._buf.n,), None, 0
            states = [np.zeros(shape, dtype=np.float32) for _ in self.state_names]
            entry = (p, _update.Slot(p._buf, p._grad_flat.reshape(shape), states, mask,
                                     row_size, owner=p))
            self._state[id(p)] = entry
        return entry[1]

    def _all_slots(self):
        """(parameter, slot) pairs of the model's parameters and of its lookup tables, in
        model order, kept between steps: they change only when the collection gains or
        loses parameters (appended to, or truncated by a failed load), which the key sees.
        The pairs keep the parameters alive, so an id in the key is never reused."""
        reg = self.model._registry
        key = (len(reg.params), len(reg.lookups), id(reg.params[-1]) if reg.params else 0,
               id(reg.lookups[-1]) if reg.lookups else 0)
        cached = self._model_slots
        if cached is None or cached[0] != key:
            pairs = tuple([(p, self._slot(p)) for p in ps]
                          for ps in (self.model.parameters_list(),
                                     self.model.lookup_parameters_list()))
            cached = self._model_slots = (key, pairs)
        return cached[1]

    def _clip_scale(self, dense, sparse):
        """The clipping factor of the gradients, and whether it clips (1 or 0); changes
        nothing (the counts are the step's, see _update)."""
        if not self.clipping_enabled:
            return 1.0, 0
        # compiled, double sums; never numpy's dot, whose threaded BLAS would wake
        # threads that then spin beside the engine's single-threaded work
        norm = math.sqrt(_update.squared_norm(dense, sparse))
        if not math.isfinite(norm):
            raise RuntimeError(f"Magnitude of gradient is bad: {norm}")
        if norm > self.clip_threshold:
            return self.clip_threshold / norm, 1
        return 1.0, 0

    def update(self):
        """One optimizer step over the model's parameters (see the module docstring).
        All or nothing: a Ctrl-C before the step starts stops it, one during it is
        raised once the step (values, state, decay, counters) is complete."""
        params, lookups = self._all_slots()
        self._update(params, lookups, None if self._scheduled is None else self._scheduled())

    # a method returning the attributes the step sets with its counts (a schedule's
    # next learning rate), or None
    _scheduled = None

    def update_subset(self, updated_params, updated_lookups):
        """One optimizer step over some parameters only: `updated_params` and
        `updated_lookups` are indices into ``model.parameters_list()`` and
        ``model.lookup_parameters_list()``. The others keep their gradients (they
        accumulate until their update); clipping looks at the listed ones; weight
        decay, as every step, applies to the whole model. (DyNet 2.2's update_subset
        changes nothing at all; this does what its documentation says.) Prefer
        ``update=False`` on the expressions of parameters that must not change."""
        ip, il = chosen_indices(self.model, updated_params, updated_lookups)
        params, lookups = self.model.parameters_list(), self.model.lookup_parameters_list()
        self._update([(params[i], self._slot(params[i])) for i in ip],
                   [(lookups[i], self._slot(lookups[i])) for i in il])

    def _update(self, params, lookups, after=None):
        """The step over `params` and `lookups`, (parameter, slot) pairs."""
        dense = [sl for p, sl in params if p._updated]
        if self.sparse_updates_enabled:
            sparse = [sl for lp, sl in lookups if lp._updated]
        else:
            dense += [sl for lp, sl in lookups if lp._updated]
            sparse = []
        # (the step unmarks the tables it updates; the others keep their gradient, no
        # longer marked)
        unmark = []
        for lp, _ in lookups:
            if not lp._updated:
                unmark.append(lp._used_mask)
                lp._grad_off_marks = True
        lookups = [lp for lp, _ in lookups]
        scale, clipped = self._clip_scale(dense, sparse)
        lam = self.model.get_weight_decay()
        keep = np.float32(1.0 - lam) if lam else 1.0
        rule = _COMPILED_RULES.get(getattr(self.rule, "__func__", None))
        if rule is None:
            self._python_step(dense, sparse, lookups, scale, keep, clipped, after)
            return
        decayed = []
        if keep != 1:   # the dense steps decay what they update
            stepped = {id(sl.owner) for sl in dense}
            decayed = [p._buf for p in self.model.parameters_list() + self.model.lookup_parameters_list()
                       if id(p) not in stepped]
        _update.step(self, rule, dense, sparse, decayed, unmark, clipped, after,
                     scale=scale, keep=keep, **self._hyper())

    def _python_step(self, dense, sparse, lookups, scale, keep, clipped, after):
        """The step through `rule` in Python (a subclass that overrides it), all or
        nothing: on any exception (a Ctrl-C included) what it changed is put back."""
        everything = self.model.parameters_list() + self.model.lookup_parameters_list()
        saved = [(a, a.copy()) for p in everything for a in (p._flat, p._grad_flat)]
        saved += [(s, s.copy()) for sl in dense + sparse for s in sl.states]
        saved += [(lp._used_mask, lp._used_mask.copy()) for lp in lookups]
        names = _update.COUNTERS + tuple(after or ())
        counters = {name: getattr(self, name) for name in names}
        try:
            self._python_rules(dense, sparse, scale)
            for lp in lookups:
                lp.clear_used()
            if keep != 1:
                self._weight_decay(keep)
            _update.count_step(self, clipped, after)
        except BaseException:
            _update.restore(saved)
            for name, value in counters.items():
                setattr(self, name, value)
            raise

    def _python_rules(self, dense, sparse, scale):
        """The step through `rule` in Python (a subclass that overrides it)."""
        t = self.updates + 1
        for sl in dense:
            self.rule(sl.values, sl.grad * np.float32(scale), t, *sl.states)
            sl.grad[...] = 0
        for sl in sparse:
            rows = np.flatnonzero(sl.used_mask)
            if rows.size == 0:
                continue
            values, grad = sl.values, sl.grad
            theta, gathered = values[rows], [s[rows] for s in sl.states]
            self.rule(theta, grad[rows] * np.float32(scale), t, *gathered)
            values[rows] = theta
            for s, g in zip(sl.states, gathered):
                s[rows] = g
            grad[rows] = 0

    def _weight_decay(self, keep):
        # DyNet scales the whole collection (one global factor), used or not
        for p in self.model.parameters_list() + self.model.lookup_parameters_list():
            flat = p._flat      # safe to change: a live graph keeps the values it read
            flat *= keep

    def _hyper(self):
        """The hyperparameters of the compiled rule (keyword arguments of _update.apply)."""
        return {"lr": self.learning_rate}

    def rule(self, theta, g, t, *state):
        """Update `theta` and the state arrays in place from the clipped gradient `g`."""
        raise NotImplementedError


class SimpleSGDTrainer(Trainer):
    """``theta -= lr * g``."""

    def __init__(self, m, learning_rate=0.1):
        super().__init__(m, learning_rate)

    @_compiled_as("sgd")
    def rule(self, theta, g, t):
        theta -= np.float32(self.learning_rate) * g


class CyclicalSGDTrainer(SimpleSGDTrainer):
    """SGD whose learning rate follows Smith's triangular cycle (DyNet's formula).

    The first update uses ``learning_rate_min``; after update number ``it`` (0, 1, ...):
    ``cycle = floor(1 + it / (2 * step_size))``, ``x = |it / step_size - 2 * cycle + 1|``,
    ``lr = lr_min + (lr_max - lr_min) * max(0, 1 - x) * gamma ** it``.
    """

    def __init__(self, m, learning_rate_min=0.01, learning_rate_max=0.1, step_size=2000, gamma=1.0):
        super().__init__(m, learning_rate_min)
        self.e_min = hyperparameter("learning_rate_min", learning_rate_min)
        self.e_max = hyperparameter("learning_rate_max", learning_rate_max, lo=self.e_min)
        self.step_size = hyperparameter("step_size", step_size, lo_open=True)
        self.gamma = hyperparameter("gamma", gamma, lo_open=True)
        self.it = 0

    def _scheduled(self):
        # the learning rate after update number `it`, set with the step's counters
        cycle = np.floor(1 + self.it / (2 * self.step_size))
        x = abs(self.it / self.step_size - 2 * cycle + 1)
        lr = self.e_min + ((self.e_max - self.e_min) * (1 - x) * self.gamma ** self.it
                           if 1 - x > 0 else 0.0)
        return {"learning_rate": lr, "it": self.it + 1}


class MomentumSGDTrainer(Trainer):
    """``v = mom * v - lr * g; theta += v``."""

    state_names = ("v",)

    def __init__(self, m, learning_rate=0.01, mom=0.9):
        super().__init__(m, learning_rate)
        self.momentum = hyperparameter("mom", mom, hi=1.0, hi_open=True)

    def _hyper(self):
        return {"lr": self.learning_rate, "mom": self.momentum}

    @_compiled_as("momentum")
    def rule(self, theta, g, t, v):
        v *= np.float32(self.momentum)
        v -= np.float32(self.learning_rate) * g
        theta += v


class AdagradTrainer(Trainer):
    """``G += g**2; theta -= lr * g / sqrt(G + eps)``."""

    state_names = ("G",)

    def __init__(self, m, learning_rate=0.1, eps=1e-20):
        super().__init__(m, learning_rate)
        self.epsilon = hyperparameter("eps", eps, lo_open=True)

    def _hyper(self):
        return {"lr": self.learning_rate, "eps": self.epsilon}

    @_compiled_as("adagrad")
    def rule(self, theta, g, t, G):
        G += g * g
        theta -= np.float32(self.learning_rate) * g / np.sqrt(G + np.float32(self.epsilon))


class AdadeltaTrainer(Trainer):
    """``Eg = rho * Eg + (1 - rho) * g**2;
    d = -g * sqrt(Ed + eps) / sqrt(Eg + eps);
    Ed = rho * Ed + (1 - rho) * d**2; theta += d``  (no learning rate, as in DyNet)."""

    state_names = ("Eg", "Ed")

    def __init__(self, m, eps=1e-6, rho=0.95):
        super().__init__(m, 1.0)
        self.epsilon = hyperparameter("eps", eps, lo_open=True)
        self.rho = hyperparameter("rho", rho, hi=1.0, hi_open=True)

    def _hyper(self):
        return {"rho": self.rho, "eps": self.epsilon}

    @_compiled_as("adadelta")
    def rule(self, theta, g, t, Eg, Ed):
        rho, eps = np.float32(self.rho), np.float32(self.epsilon)
        Eg[...] = rho * Eg + (1 - rho) * g * g
        d = -g * np.sqrt(Ed + eps) / np.sqrt(Eg + eps)
        Ed[...] = rho * Ed + (1 - rho) * d * d
        theta += d


class RMSPropTrainer(Trainer):
    """``Eg = rho * Eg + (1 - rho) * g**2; theta -= lr * g / sqrt(Eg + eps)``."""

    state_names = ("Eg",)

    def __init__(self, m, learning_rate=0.001, eps=1e-8, rho=0.9):
        super().__init__(m, learning_rate)
        self.epsilon = hyperparameter("eps", eps, lo_open=True)
        self.rho = hyperparameter("rho", rho, hi=1.0, hi_open=True)

    def _hyper(self):
        return {"lr": self.learning_rate, "rho": self.rho, "eps": self.epsilon}

    @_compiled_as("rmsprop")
    def rule(self, theta, g, t, Eg):
        rho = np.float32(self.rho)
        Eg[...] = rho * Eg + (1 - rho) * g * g
        theta -= np.float32(self.learning_rate) * g / np.sqrt(Eg + np.float32(self.epsilon))


class AdamTrainer(Trainer):
    """``m = b1 * m + (1 - b1) * g; v = b2 * v + (1 - b2) * g**2;
    theta -= lr * sqrt(1 - b2**t) / (1 - b1**t) * m / (sqrt(v) + eps)``.

    ``t`` counts the trainer's updates, also for sparse lookup rows (as in DyNet)."""

    state_names = ("m", "v")

    def __init__(self, m, alpha=0.001, beta_1=0.9, beta_2=0.999, eps=1e-8):
        super().__init__(m, alpha)
        self.beta_1 = hyperparameter("beta_1", beta_1, hi=1.0, hi_open=True)
        self.beta_2 = hyperparameter("beta_2", beta_2, hi=1.0, hi_open=True)
        self.epsilon = hyperparameter("eps", eps, lo_open=True)

    def _moments(self, g, m, v):
        b1, b2 = np.float32(self.beta_1), np.float32(self.beta_2)
        m[...] = b1 * m + (1 - b1) * g
        v[...] = b2 * v + (1 - b2) * g * g

    def _step(self, t):
        return np.float32(self.learning_rate * np.sqrt(1 - self.beta_2 ** t) / (1 - self.beta_1 ** t))

    def _hyper(self):
        return {"lr": self._step(self.updates + 1), "beta_1": self.beta_1,
                "beta_2": self.beta_2, "eps": self.epsilon}

    @_compiled_as("adam")
    def rule(self, theta, g, t, m, v):
        self._moments(g, m, v)
        theta -= self._step(t) * m / (np.sqrt(v) + np.float32(self.epsilon))


class AmsgradTrainer(AdamTrainer):
    """Adam with ``vhat = max(vhat, v)`` in place of ``v`` in the step."""

    state_names = ("m", "v", "vhat")

    @_compiled_as("amsgrad")
    def rule(self, theta, g, t, m, v, vhat):
        self._moments(g, m, v)
        np.maximum(vhat, v, out=vhat)
        theta -= self._step(t) * m / (np.sqrt(vhat) + np.float32(self.epsilon))
