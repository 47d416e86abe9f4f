"""ParameterCollection: creates, names and groups parameters (DyNet's `Model`).

Naming follows DyNet: the root collection is "/"; a parameter added with name "W" is
"/W", a second "W" is "/W_1", an unnamed one "/_0", "/_1", ...; a subcollection "enc"
is "/enc/" (a second one "/enc_1/", an unnamed one "/_0/") and its parameters are
"/enc/W", ... User names may not contain "/" nor end in "_" or "_<digits>" (DyNet
forbids "_" altogether). A collection's
`parameters_list()` / `lookup_parameters_list()` hold its own parameters and those of
all its subcollections, in creation order.
"""
import math
import re

import numpy as np

from autobatch.api.core import LookupParameters, Parameters, size_argument
from autobatch.errors import ModelFileError
from autobatch.io import parameter_files
from autobatch.model import update_rules
from autobatch.settings import default_weight_decay, init_rng
from autobatch.model.initializers import (  # noqa: F401  (re-exported)
    ConstInitializer, FromFileInitializer, GlorotInitializer, IdentityInitializer,
    NormalInitializer, NumpyInitializer, SaxeInitializer, UniformInitializer,
    resolve_initializer,
)

class _Registry:
    """The root's ordered record of every parameter in the tree."""

    def __init__(self):
        self.params = []
        self.lookups = []
        # While `dy.load` rebuilds an object from a file, the number of values its
        # parameters may still take (the file's records under its name): a small file
        # cannot make the loader allocate more than the file holds. None: no limit.
        self.load_budget = None

    def reserve(self, shape):
        if self.load_budget is None:
            return
        n = math.prod(shape)
        if n > self.load_budget:
            raise ModelFileError(
                f"the object being loaded creates a parameter of shape {shape}, more values "
                f"than the file has left for it ({self.load_budget})")
        self.load_budget -= n


def _int_shape(dim, where):
    """A shape from a size or a sequence of sizes, each checked by the API's size rule
    (size_argument: an int >= 0, or a float that is a whole number; 2.5 or a bool is a
    TypeError, never truncated)."""
    if isinstance(dim, str) or not hasattr(dim, "__iter__"):
        return (size_argument(dim, where),)          # one size (or an error saying why not)
    return tuple([size_argument(d, where) for d in dim])


def _cpu_only(device, where):
    if device not in (None, "", "CPU", "cpu"):
        raise ValueError(f"{where}: device {device!r}: autobatch runs on the CPU only")


class ParameterCollection:
    """Owns parameters and lookup parameters; see the module docstring for naming.

    `seed` gives the collection (and its subcollections) its own random generator, so
    initial values are reproducible; without it the process-level generator seeded by
    `reset_random_seed` is used.
    """

    def __init__(self, seed=None):
        self._init(name="/", parent=None,
                   rng=None if seed is None else np.random.default_rng(seed))

    def _init(self, name, parent, rng):
        self._name = name
        self._parent = parent
        self._own_rng = rng
        self._registry = parent._registry if parent is not None else _Registry()
        self._name_counts = {}        # parameter / lookup names -> next index
        self._collection_counts = {}  # subcollection names -> next index
        # a root starts with the process default (--dynet-weight-decay, DynetParams)
        self._weight_decay = None if parent is not None else default_weight_decay()

    # ------------------------------------------------------------ naming ----

    def name(self):
        """Full name of the collection: "/" for a root, "/outer/inner/" for a sub."""
        return self._name

    @staticmethod
    def _check_name(name):
        # DyNet forbids "_" altogether; we only forbid what could clash with the
        # "_<index>" suffix, so names such as "W_leaf" stay usable.
        if not isinstance(name, str) or "/" in name or re.search(r"_\d+$", name) or name.endswith("_"):
            raise ValueError("parameter and collection names may not contain '/' nor end "
                             f"in '_' or '_<digits>': {name!r}")

    def _next_name(self, counts, name, suffix=""):
        self._check_name(name)
        idx = counts.get(name, 0)
        counts[name] = idx + 1
        tail = f"_{idx}" if idx > 0 or not name else ""
        return f"{self._name}{name}{tail}{suffix}"

    @property
    def _rng(self):
        c = self
        while c._own_rng is None and c._parent is not None:
            c = c._parent
        return c._own_rng if c._own_rng is not None else init_rng()

    # ---------------------------------------------------------- creation ----

    def add_subcollection(self, name=None):
        """A child collection; its parameters also belong to this one."""
        sub = ParameterCollection.__new__(ParameterCollection)
        sub._init(self._next_name(self._collection_counts, name or "", "/"), self, None)
        return sub

    def add_parameters(self, dim, init=None, name="", device="", scale=1.0, mean=0.0, std=1.0):
        """A new parameter of shape `dim` (int or tuple of 1 to 4 ints).

        `init`: None (GlorotInitializer), a number (constant), an initializer, a numpy
        array (its values), or 'glorot' / 'identity' / 'saxe' / 'uniform' (uses
        `scale`) / 'normal' (uses `mean`, `std`) / 'he', as in DyNet."""
        _cpu_only(device, "add_parameters")
        shape = _int_shape(dim, "add_parameters")
        if isinstance(init, np.ndarray):
            if init.shape != shape:
                raise ValueError(f"add_parameters: array of shape {init.shape} for shape {shape}")
            init = NumpyInitializer(init)
        self._registry.reserve(shape)
        initializer = resolve_initializer(init, shape, scale, mean, std)
        p = Parameters(shape, owner=self)          # checks the shape before any values are made
        p.set_value(np.asarray(initializer(shape, self._rng), dtype=np.float32))
        p._name = self._next_name(self._name_counts, name)
        self._registry.params.append(p)
        return p

    def add_lookup_parameters(self, dim, init=None, name="", device="", scale=1.0, mean=0.0, std=1.0):
        """A new lookup table of shape `(n_rows, dim)` (an int n means `(n, 1)`), or
        `(n_rows, d0, d1 ...)` for rows of up to 4 dimensions (matrices, 3-D ...).

        `init` as in `add_parameters`; a numpy array of the table's shape gives the
        values (row i as `lookup(i).npvalue()` shows it). The default is DyNet Python's
        `GlorotInitializer()`."""
        _cpu_only(device, "add_lookup_parameters")
        shape = _int_shape(dim, "add_lookup_parameters")
        if len(shape) == 1:
            shape = (shape[0], 1)
        if len(shape) < 2:
            raise ValueError(f"add_lookup_parameters: shape must be (rows, dims...), got {shape}")
        self._registry.reserve(shape)
        lp = LookupParameters(shape, owner=self)   # checks the shape before any values are made
        if isinstance(init, np.ndarray):
            if init.shape != shape:
                raise ValueError(f"add_lookup_parameters: array of shape {init.shape} for shape {shape}")
            values = init
        else:
            if isinstance(init, NumpyInitializer):
                raise ValueError("add_lookup_parameters: pass the numpy array itself as init "
                                 "(or use lookup_parameters_from_numpy), not a NumpyInitializer")
            values = resolve_initializer(init, shape, scale, mean, std)(shape, self._rng, lookup=True)
        lp.set_value(np.asarray(values, dtype=np.float32).reshape(shape))
        lp._name = self._next_name(self._name_counts, name)
        self._registry.lookups.append(lp)
        return lp

    def parameters_from_numpy(self, array, name="", device=""):
        """New Parameters holding a copy of ``array`` (its shape, as float32), as DyNet's
        ``parameters_from_numpy(array, name="", device="")``.
        """
        array = np.asarray(array)
        return self.add_parameters(array.shape, init=array, name=name, device=device)

    def lookup_parameters_from_numpy(self, array, name="", device=""):
        """A new lookup table from ``array`` of shape (rows, ...): row i is ``array[i]`` (DyNet's
        ``lookup_parameters_from_numpy(array, name="", device="")``).
        """
        array = np.asarray(array)
        return self.add_lookup_parameters(array.shape, init=array, name=name, device=device)

    # ------------------------------------------------------------ access ----

    def _mine(self, p):
        return p._name.startswith(self._name)

    def parameters_list(self):
        """Parameters of this collection and its subcollections, in creation order."""
        prefix = self._name         # _mine inlined: trainers call this on every update
        return [p for p in self._registry.params if p._name.startswith(prefix)]

    def lookup_parameters_list(self):
        """Lookup parameters of this collection and its subcollections."""
        prefix = self._name
        return [p for p in self._registry.lookups if p._name.startswith(prefix)]

    def parameter_count(self):
        """The number of scalar values in all the collection's parameters and lookup
        tables."""
        return sum(p._buf.n for p in self.parameters_list() + self.lookup_parameters_list())

    def gradient_l2_norm(self):
        """L2 norm of all gradients in the collection."""
        # double sums, and not np.dot: numpy's BLAS would wake its threads, which then
        # spin for a while beside the engine's work
        total = sum(update_rules.sum_of_squares(p._grad_flat)
                    for p in self.parameters_list() + self.lookup_parameters_list())
        return float(np.sqrt(total))

    def reset_gradient(self):
        """Zero every accumulated gradient of the collection and forget which lookup rows
        were used (DyNet's ``reset_gradient()``)."""
        for p in self.parameters_list() + self.lookup_parameters_list():
            p._grad_flat[:] = 0
        for lp in self.lookup_parameters_list():
            lp.clear_used()
            lp._grad_off_marks = False          # all +0 now

    # ------------------------------------------------------ weight decay ----

    def set_weight_decay(self, lam):
        """L2 weight decay applied by trainers built on this collection (DyNet's
        L2WeightDecay).

        After each trainer step (rule applied to the updated parameters), *every*
        parameter of the trainer's collection, and every row of its lookup tables,
        becomes ``theta <- (1 - lam) * theta``: also the parameters and rows the step
        did not use or update, as in DyNet, which keeps one global scale factor for
        the whole collection. (DyNet's `as_array()` then shows the unscaled storage;
        here values always are the decayed ones that expressions see.) A
        subcollection without its own setting uses its parent's; a new root collection
        starts with the process default (0, or ``--dynet-weight-decay``). Costs one
        pass over the collection's values per update when lam > 0."""
        lam = float(lam)
        if not 0.0 <= lam < 1.0:
            raise ValueError(f"weight decay must be in [0, 1), got {lam}")
        self._weight_decay = lam

    set_weight_decay_lambda = set_weight_decay

    def get_weight_decay(self):
        """The L2 weight decay that trainers apply to this collection (its own, else its
        parent's)."""
        c = self
        while c._weight_decay is None:
            c = c._parent
        return c._weight_decay

    # -------------------------------------------------------- save / load ----

    def save(self, fname, name="", append=False, format=None):
        """Write every parameter of the collection to `fname`, a path or a binary file
        object. `name` replaces the collection's own name as the prefix of the stored
        names; `append` (paths only) adds the records to an existing file.

        `format`: None or "autobatch" (ours: binary, checksummed; see
        autobatch.io.autobatch_data) or "dynet" (DyNet's text format, which DyNet's
        `populate` reads; see autobatch.io.dynet_text). When appending, None means the
        existing file's format."""
        parameter_files.save_collection(self, fname, key=name, append=append, format=format)

    def populate(self, fname, key=""):
        """Set every parameter of the collection from `fname` (a path or a binary file
        object; never an int), in our format or DyNet's (told apart by the file).

        Our format: the file's parameters under `key` (default: this collection's name)
        must match this collection's exactly (names, kinds, shapes). A DyNet file: as
        DyNet, the records whose names start with `key` (all of them when it is empty)
        are matched in order with the collection's parameters, and separately with its
        lookup parameters; counts and shapes must agree, names need not, and gradients
        are read too. Either way, on any mismatch or damage nothing is changed and
        ModelFileError is raised."""
        parameter_files.populate_collection(self, fname, key=key)

    def populate_from_textfile(self, fname, key=""):
        """DyNet's name for `populate` (either format is read)."""
        parameter_files.populate_collection(self, fname, key=key)

    def write_to_textfile(self, fname, key="", append=False, format="dynet"):
        """DyNet's `write_to_textfile`: `save` in DyNet's text format by default."""
        parameter_files.save_collection(self, fname, key=key, append=append, format=format)

    def load_param(self, fname, key):
        """A new Parameters of this collection with the values of the parameter stored
        under the full name `key` in `fname` (either format). Its name is this
        collection's name + the key's last part ("/enc/W" loaded into "/" is "/W")."""
        return parameter_files.load_one(self, fname, key, "param")

    def load_lookup_param(self, fname, key):
        """As `load_param`, for a lookup table."""
        return parameter_files.load_one(self, fname, key, "lookup")

    def _snapshot(self):
        reg = self._registry
        return (len(reg.params), len(reg.lookups), dict(self._name_counts),
                dict(self._collection_counts))

    def _rollback(self, snap):
        """Forget everything added since `_snapshot()` (used by a failed `dy.load`)."""
        n_params, n_lookups, names, collections = snap
        del self._registry.params[n_params:]
        del self._registry.lookups[n_lookups:]
        self._name_counts, self._collection_counts = names, collections

    def __repr__(self):
        return f"<ParameterCollection {self._name}>"


Model = ParameterCollection
