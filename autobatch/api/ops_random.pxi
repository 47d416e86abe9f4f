# DyNet's random functions beyond dropout and noise (api/ops_math.pxi): dropout with a mask
# shared along dimensions, and random leaves. Every number comes from the counter-based
# stream of its node (the graph's seed, the node's id, the element), so values do not
# depend on the strategy or the order in which batches run. Included by api/core.pyx.

cdef Expression _dropout_shared(Expression x, float p, int shared, bint allow_one, str name):
    cdef Node* n = _check(x)
    if p != p or not (0.0 <= p < 1.0 or (allow_one and p == 1.0)):
        raise ValueError(f"{name}: p must be in [0, {'1]' if allow_one else '1)'}, got {p}")
    cdef Attrs at
    memset(&at, 0, sizeof(Attrs))
    at.drop.p = p
    at.drop.shared = shared
    return _wrap(_here().add_node(OP_DROPOUT_DIM, 1, &x.idx, _like(n, n.bs), 0, &at))


def dropout_dim(x, d, float p):
    """Dropout whose mask is the same along dimension d (DyNet's dropout_dim): whole
    slices along d are dropped with probability p, the rest scaled by 1/(1-p). For a
    matrix, d=0 drops columns and d=1 rows. The shape and batch are kept (each batch
    element draws its own mask). The numbers come from the node's counter-based stream,
    so nodes of one shape, d and p batch together and every strategy gives the same
    ones.

        h = dy.dropout_dim(H, 1, 0.3)    # H (hidden, time): drop whole hidden units
    """
    cdef Expression e = _as_expr(x)
    cdef Node* n = _check(e)
    return _dropout_shared(e, p, 1 << _dim_index("dropout_dim", n, d), False, "dropout_dim")


def dropout_batch(x, float p):
    """Dropout of whole batch elements (DyNet's dropout_batch): each is zeroed with
    probability p, the rest scaled by 1/(1-p)."""
    return _dropout_shared(_as_expr(x), p, (1 << MAX_DIMS) - 1, False, "dropout_batch")


def block_dropout(x, float p):
    """Drops all of x (every batch element) with probability p, else scales it by
    1/(1-p) (DyNet's block_dropout); p may be 1 (always 0)."""
    return _dropout_shared(_as_expr(x), p, (1 << (MAX_DIMS + 1)) - 1, True, "block_dropout")


cdef Expression _random_leaf(object dim, object batch_size, str name, int kind, double a,
                             double c):
    """A leaf of random numbers from its node's stream: kind 0 Bernoulli (c with
    probability a, else 0), kind 1 Gumbel (location a, scale c)."""
    cdef Expression e = _filled_leaf(dim, _as_size(batch_size, name, 1), name)
    cdef ComputationGraph g = _here()
    cdef float* v = g.nodes[e.idx].val
    cdef uint64_t stream = node_stream(&g.rng, e.idx)
    cdef int64_t k
    cdef double u
    for k in range(g.nodes[e.idx].size):
        u = stream_uniform(stream, k)
        if kind == 0:
            v[k] = <float>c if u < a else 0.0
        else:       # u in (0, 1): never log(0)
            u += 0.5 / 9007199254740992.0
            v[k] = <float>(a - c * log(-log(u)))
    return e


def random_bernoulli(dim, p, scale=1.0, batch_size=1):
    """A constant of shape dim (batch batch_size) whose elements are `scale` with
    probability p and 0 otherwise (DyNet's random_bernoulli)."""
    cdef double pp = _finite("random_bernoulli", "p", p)
    if not 0.0 <= pp <= 1.0:
        raise ValueError(f"random_bernoulli: p must be in [0, 1], got {p}")
    return _random_leaf(dim, batch_size, "random_bernoulli", 0, pp,
                        _finite("random_bernoulli", "scale", scale))


def random_gumbel(dim, mu=0.0, beta=1.0, batch_size=1):
    """A constant of shape dim (batch batch_size) of Gumbel(mu, beta) samples
    mu - beta log(-log u) (DyNet's random_gumbel, which allows only mu=0, beta=1)."""
    cdef double b = _finite("random_gumbel", "beta", beta)
    if b <= 0:
        raise ValueError(f"random_gumbel: beta must be > 0, got {beta}")
    return _random_leaf(dim, batch_size, "random_gumbel", 1, _finite("random_gumbel", "mu", mu), b)
