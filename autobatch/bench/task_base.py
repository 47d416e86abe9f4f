"""What every benchmark task shares: the `Task` base class (parameters, variant), the
FLOP counting rules and the module the model code runs on (``use``).

The task families (``tasks.py``: the five standard tasks; ``tree_tasks.py``,
``lattice_tasks.py``, ``sequence_tasks.py``: the other workloads of the autobatching
literature) each bind ``dy`` at module level; ``tasks.use`` rebinds all of them.
"""
import autobatch as dy

VARIANTS = ("builder", "ops")


def use(module):
    """Run the model code on `module` (``autobatch`` or ``dynet``)."""
    global dy
    dy = module


def set_lookup(table, values):
    """Give a lookup table `values` (rows x entry shape). DyNet 2.2's ``init_from_array``
    takes vector entries only; a matrix entry goes row by row, flattened column-major
    (DyNet's layout)."""
    if values.ndim <= 2 or getattr(dy, "__name__", "") != "dynet":
        table.init_from_array(values)
        return
    for k, entry in enumerate(values):
        table.init_row(k, entry.T.reshape(-1).tolist())


def mv(rows, cols):
    """Forward + backward FLOPs of one matrix-vector product."""
    return 3 * 2 * rows * cols


def lstm_flops(n, in_dim, hid):
    """A one-layer LSTM over n inputs (the first step has no recurrent product)."""
    return n * mv(4 * hid, in_dim) + max(n - 1, 0) * mv(4 * hid, hid) if n else 0


class Task:
    name = None

    def __init__(self, hidden=256, seed=0, meta=None, variant="builder"):
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r} (choose from {', '.join(VARIANTS)})")
        self.H = hidden
        self.variant = variant
        self.pc = dy.ParameterCollection() if seed is None else dy.ParameterCollection(seed=seed)
        self.meta = meta
        self.build()

    def build(self):
        raise NotImplementedError

    def loss(self, inst):
        raise NotImplementedError

    def flops(self, inst):
        raise NotImplementedError


def count_leaves(t):
    return count_leaves(t[0]) + count_leaves(t[1]) if isinstance(t, tuple) else 1
