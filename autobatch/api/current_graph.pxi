# The calling thread's current graph: renew_cg, cg, checkpoints and the seed of the
# random ops. Included by api/core.pyx before expression.pxi.

# Each thread builds its own graph (its "current graph"); parameters are shared. A
# C thread-local pointer names the calling thread's graph (a new thread starts with
# none), read in one instruction; a threading.local owns the graph and frees it when
# the thread ends. Graph versions are unique across threads, so an Expression of
# another thread's graph is refused as stale, never read.

cdef extern from *:
    """
    /* initial-exec: read without a call; one pointer fits any static TLS reserve */
    static __thread PyObject* ab_thread_graph __attribute__((tls_model("initial-exec")));
    """
    PyObject* ab_thread_graph

cdef object _thread_graphs = threading.local()
cdef uint64_t _seed_state = 0x5DEECE66D


cdef ComputationGraph _new_thread_graph():
    global ab_thread_graph
    g = ComputationGraph(None)          # a new version, unique in the process (new_version)
    _thread_graphs.graph = g            # owns it while the thread lives
    ab_thread_graph = <PyObject*>g
    return g


cdef inline ComputationGraph _here():
    """The calling thread's current graph."""
    if ab_thread_graph == NULL:
        return _new_thread_graph()
    return <ComputationGraph>ab_thread_graph


_fusion_default = [True]


def set_default_fusion(enabled):
    """Whether graphs created by `renew_cg()` without a `fusion` argument run chains
    of elementwise ops fused (default True; see docs/fusion.md). For comparisons:
    the numbers are the same either way (up to rounding), only the speed differs."""
    _fusion_default[0] = bool(enabled)


def default_fusion():
    """The process default of `renew_cg(fusion=...)` (see set_default_fusion)."""
    return _fusion_default[0]


def renew_cg(immediate_compute=False, check_validity=False, strategy=None, autobatching=None,
             fusion=None):
    """Start a new computation graph (of the calling thread); every earlier Expression
    becomes stale.

    strategy: a strategy name or object (default: the process default, "agenda");
    autobatching=False is the same as strategy="none". DyNet's debugging switches:
    immediate_compute computes every node when it is created, check_validity raises
    FloatingPointError on the first NaN or infinity. fusion=False runs every batch on
    its own instead of running chains of elementwise ops fused (docs/fusion.md); the
    numbers are the same (up to rounding), only the speed differs. None: the process
    default (set_default_fusion, True)."""
    global _seed_state
    if autobatching is not None and not autobatching:
        if strategy not in (None, "none"):
            raise ValueError("autobatching=False and a batching strategy contradict each other")
        strategy = "none"
    cdef ComputationGraph g = _here()
    _seed_state += 1
    g.start(strategy, new_version(), _seed_state, immediate_compute, check_validity,
            _fusion_default[0] if fusion is None else bool(fusion))
    return g


def cg_version():
    """The current graph's version, as DyNet's: the first graph is 0 and every renew_cg
    gives the next number (when no cg_revert came between). cg_revert gives the graph a
    new version too (DyNet's stays; see docs/dynet.md): expressions made before the
    checkpoint stay valid, caches keyed by the version are rebuilt.

    Example::

        v = dy.cg_version(); dy.renew_cg(); assert dy.cg_version() != v
    """
    return _here().version_id


def cg_checkpoint():
    """Remember the current graph as it is (DyNet's cg_checkpoint); checkpoints nest."""
    _here().checkpoint()


def cg_revert():
    """Drop every node made since the last cg_checkpoint() (DyNet's cg_revert):
    their expressions raise StaleExpressionError from then on, older ones stay valid
    with their values. Without a checkpoint it does nothing."""
    _here().revert()


def print_text_graphviz(file=None):
    """Print the current graph in Graphviz's dot language (to standard error, as
    DyNet, or to `file`)."""
    _here().print_graphviz(file)


def dump_cg(filename="", show_values=True, show_gradients=True, nan_check_only=False):
    """DyNet's ``dy.dump_cg(...)``: ``ComputationGraph.dump`` of the current graph."""
    _here().dump(filename, show_values, show_gradients, nan_check_only)


def cg():
    """The current computation graph (of the calling thread)."""
    return _here()


def set_random_seed(uint64_t seed):
    """Seed for dropout/noise/random_normal in later graphs (parameters use numpy's)."""
    global _seed_state
    _seed_state = seed
    rng_seed(&_here().rng, seed)
    _reseed_tensors(seed)           # Tensor.categorical_sample_log_prob's draws
