# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The trainers' update rules as compiled loops over raw float32 memory.

One pass per parameter does all a rule does to an element: scale the gradient by the
clipping factor, update the optimizer state, step the value, apply the weight-decay
factor and zero the gradient. A lookup table with sparse updates runs the same loop on
each row its used-row mask marks. The arithmetic is float32 in the order of the numpy
expressions in autobatch/model/trainers.py (which stay the rules' reference and the path of
Python subclasses that override `rule`), so the numbers are the same; this module is
built with -ffp-contract=off so that no FMA changes a rounding.
"""
from libc.math cimport sqrtf
from libc.stdint cimport uint8_t
from libc.string cimport memset

import numpy as np

from autobatch.runtime.threads cimport pool_run, pool_threads
from autobatch.runtime.param_buffers cimport ValueBuffers

cdef enum:
    MAX_STATES = 3
    SPLIT_MIN = 1 << 16     # elements of a parameter from which its update is split
                            # over the engine's threads (dy.set_num_threads)

cdef float ONE = 1          # 1 - rho in float32, as numpy's 1 - np.float32(rho)


cdef struct Hyper:
    float lr          # learning rate (Adam, AMSGrad: the bias-corrected step)
    float mom         # momentum
    float rho         # decay of the running averages (Adadelta, RMSProp)
    float beta_1      # Adam's moment decays
    float beta_2
    float eps
    float scale       # clipping factor of the gradient
    float keep        # weight-decay factor of the values after the step


ctypedef void (*rule_fn)(float* theta, const float* old, float* grad, float** s,
                         Py_ssize_t n, const Hyper* h) noexcept nogil


# Each rule: theta (new values) from old (the values before: theta itself, or the other
# buffer when a live graph reads the values, runtime/param_buffers.pyx), grad (read,
# then zeroed), s (its state arrays), n elements. Hyperparameters are copied to locals:
# stores through the float pointers could alias *h.

cdef void sgd(float* theta, const float* old, float* grad, float** s, Py_ssize_t n,
              const Hyper* h) noexcept nogil:
    cdef float lr = h.lr, scale = h.scale, keep = h.keep, g
    cdef Py_ssize_t i
    for i in range(n):
        g = grad[i] * scale
        grad[i] = 0
        theta[i] = (old[i] - lr * g) * keep


cdef void momentum(float* theta, const float* old, float* grad, float** s, Py_ssize_t n,
              const Hyper* h) noexcept nogil:
    cdef float lr = h.lr, mom = h.mom, scale = h.scale, keep = h.keep, g
    cdef float* v = s[0]
    cdef Py_ssize_t i
    for i in range(n):
        g = grad[i] * scale
        grad[i] = 0
        v[i] = v[i] * mom - lr * g
        theta[i] = (old[i] + v[i]) * keep


cdef void adagrad(float* theta, const float* old, float* grad, float** s, Py_ssize_t n,
              const Hyper* h) noexcept nogil:
    cdef float lr = h.lr, eps = h.eps, scale = h.scale, keep = h.keep, g
    cdef float* G = s[0]
    cdef Py_ssize_t i
    for i in range(n):
        g = grad[i] * scale
        grad[i] = 0
        G[i] = G[i] + g * g
        theta[i] = (old[i] - lr * g / sqrtf(G[i] + eps)) * keep


cdef void adadelta(float* theta, const float* old, float* grad, float** s, Py_ssize_t n,
              const Hyper* h) noexcept nogil:
    cdef float rho = h.rho, rest = ONE - h.rho, eps = h.eps, scale = h.scale, keep = h.keep, g, d
    cdef float* Eg = s[0]
    cdef float* Ed = s[1]
    cdef Py_ssize_t i
    for i in range(n):
        g = grad[i] * scale
        grad[i] = 0
        Eg[i] = rho * Eg[i] + rest * g * g
        d = -g * sqrtf(Ed[i] + eps) / sqrtf(Eg[i] + eps)
        Ed[i] = rho * Ed[i] + rest * d * d
        theta[i] = (old[i] + d) * keep


cdef void rmsprop(float* theta, const float* old, float* grad, float** s, Py_ssize_t n,
              const Hyper* h) noexcept nogil:
    cdef float lr = h.lr, rho = h.rho, rest = ONE - h.rho, eps = h.eps
    cdef float scale = h.scale, keep = h.keep, g
    cdef float* Eg = s[0]
    cdef Py_ssize_t i
    for i in range(n):
        g = grad[i] * scale
        grad[i] = 0
        Eg[i] = rho * Eg[i] + rest * g * g
        theta[i] = (old[i] - lr * g / sqrtf(Eg[i] + eps)) * keep


cdef void adam(float* theta, const float* old, float* grad, float** s, Py_ssize_t n,
              const Hyper* h) noexcept nogil:
    cdef float lr = h.lr, b1 = h.beta_1, b2 = h.beta_2, rest1 = ONE - h.beta_1, rest2 = ONE - h.beta_2
    cdef float eps = h.eps, scale = h.scale, keep = h.keep, g
    cdef float* m = s[0]
    cdef float* v = s[1]
    cdef Py_ssize_t i
    for i in range(n):
        g = grad[i] * scale
        grad[i] = 0
        m[i] = b1 * m[i] + rest1 * g
        v[i] = b2 * v[i] + rest2 * g * g
        theta[i] = (old[i] - lr * m[i] / (sqrtf(v[i]) + eps)) * keep


cdef void amsgrad(float* theta, const float* old, float* grad, float** s, Py_ssize_t n,
              const Hyper* h) noexcept nogil:
    cdef float lr = h.lr, b1 = h.beta_1, b2 = h.beta_2, rest1 = ONE - h.beta_1, rest2 = ONE - h.beta_2
    cdef float eps = h.eps, scale = h.scale, keep = h.keep, g
    cdef float* m = s[0]
    cdef float* v = s[1]
    cdef float* vhat = s[2]
    cdef Py_ssize_t i
    for i in range(n):
        g = grad[i] * scale
        grad[i] = 0
        m[i] = b1 * m[i] + rest1 * g
        v[i] = b2 * v[i] + rest2 * g * g
        # np.maximum: a NaN on either side wins
        vhat[i] = vhat[i] if (vhat[i] >= v[i] or vhat[i] != vhat[i]) else v[i]
        theta[i] = (old[i] - lr * m[i] / (sqrtf(vhat[i]) + eps)) * keep


cdef struct Rule:
    rule_fn loop
    int n_states          # state arrays the loop reads

cdef enum:
    N_RULES = 7

# one record per rule, its index its id; RULES (name -> id) is what model/trainers.py names
cdef Rule RULE_TABLE[N_RULES]
RULES = {}


cdef _add_rule(str name, rule_fn loop, int n_states):
    RULE_TABLE[len(RULES)] = Rule(loop=loop, n_states=n_states)
    RULES[name] = len(RULES)


_add_rule("sgd", sgd, 0)
_add_rule("momentum", momentum, 1)
_add_rule("adagrad", adagrad, 1)
_add_rule("adadelta", adadelta, 2)
_add_rule("rmsprop", rmsprop, 1)
_add_rule("adam", adam, 2)
_add_rule("amsgrad", amsgrad, 3)
assert len(RULES) == N_RULES


cdef float* _data(object arr) except? NULL:
    """The first element of a C-contiguous float32 array (NULL when it is empty)."""
    if not arr.flags.c_contiguous:       # reshape would copy: the pointer must be arr's
        raise ValueError("a compiled rule needs C-contiguous arrays")
    cdef float[::1] view = arr.reshape(-1)
    return &view[0] if view.shape[0] > 0 else NULL


cdef class Slot:
    """One parameter's memory as the rules see it: values, gradient and optimizer state
    (of one size), and for a lookup table its row size and used-row mask. The arrays
    are kept (their pointers stay valid); the trainer makes one per parameter, its
    `owner`. `values` is a fixed float32 array (stepped in place) or the parameter's
    ValueBuffers (stepped out of place when a live graph reads them)."""
    cdef readonly object grad, states, used_mask, owner
    cdef object fixed                 # the values array, when not a ValueBuffers
    cdef ValueBuffers buf             # ... else the parameter's buffers
    cdef uint8_t[::1] mask
    cdef float* theta                 # the values before the step
    cdef float* out                   # where the step writes them (set by _prepare)
    cdef float* g
    cdef float* s[MAX_STATES]
    cdef int n_states
    cdef Py_ssize_t n, row_size, n_rows
    cdef uint8_t* used

    def __init__(self, values, grad, states, used_mask=None, Py_ssize_t row_size=0, owner=None):
        states = list(states)
        self.owner = owner
        if isinstance(values, ValueBuffers):
            self.buf = values
            self.fixed = None
            values = self.buf.current
        else:
            self.buf = None
            self.fixed = values
        self.grad, self.states, self.used_mask = grad, states, used_mask
        self.n = values.size
        for a in [grad] + states:
            if a.size != self.n or a.dtype != values.dtype:
                raise ValueError("values, gradient and state must be float32 of one size")
        self.theta = self.out = _data(values)
        self.g = _data(grad)
        # a rule written in Python may keep more state than any compiled one reads
        self.n_states = min(len(states), MAX_STATES)
        for k in range(self.n_states):
            self.s[k] = _data(states[k])
        self.row_size, self.n_rows, self.used = self.n, 1, NULL
        if used_mask is not None:
            if row_size < 0 or self.n != row_size * used_mask.size:   # (rows of 0: empty)
                raise ValueError("a table's size must be its rows times the row size")
            self.row_size, self.n_rows = row_size, used_mask.size
            if self.n_rows:
                self.mask = used_mask     # a uint8 array: one byte per row
                self.used = &self.mask[0]

    @property
    def values(self):
        """The values array, shaped as the gradient, safe to change in place (a live
        graph keeps what it read)."""
        return self.buf.values().reshape(self.grad.shape) if self.buf is not None else self.fixed

    cdef int _prepare(self, bint whole) except -1:
        """Choose the buffers of the step: whole (every element read and written): into
        the other buffer when a live graph reads the values; else (some rows) in place,
        the values copied first when a live graph reads them."""
        if self.buf is None:
            return 0
        if whole:
            self.theta = self.buf.src.values
            self.out = self.buf.step_target()
        else:
            self.theta = self.out = self.buf.writable()
        return 0

    cdef void _done(self) noexcept:
        if self.buf is not None:
            self.buf.step_done(self.out)
            self.theta = self.out = self.buf.src.values


cdef void run_rows(rule_fn rule, Slot sl, const Hyper* h) noexcept nogil:
    """The rule on each used row of a table (in place), then the rows are unmarked."""
    cdef float* st[MAX_STATES]
    cdef Py_ssize_t r, off, k
    for r in range(sl.n_rows):
        if sl.used[r]:
            off = r * sl.row_size
            for k in range(sl.n_states):
                st[k] = sl.s[k] + off
            rule(sl.out + off, sl.theta + off, sl.g + off, st, sl.row_size, h)
    if sl.n_rows:
        memset(sl.used, 0, sl.n_rows)


ctypedef struct DenseJob:
    rule_fn loop
    float* theta             # written
    const float* old         # read (theta itself, or the other buffer)
    float* g
    float* s[MAX_STATES]     # (an array: Cython copies the Slot's array into it)
    int n_states
    Py_ssize_t n, part       # elements, and per part (a multiple of 16)
    const Hyper* h


cdef void dense_part(void* ctx, int c) noexcept nogil:
    cdef DenseJob* job = <DenseJob*>ctx
    cdef Py_ssize_t at = c * job.part, k
    cdef float* st[MAX_STATES]
    for k in range(job.n_states):
        st[k] = job.s[k] + at
    job.loop(job.theta + at, job.old + at, job.g + at, st, min(job.part, job.n - at), job.h)


cdef void run_dense(rule_fn loop, Slot sl, const Hyper* h) noexcept nogil:
    """The rule on all of a parameter, in ranges over the engine's threads when it is
    large (every element on its own: the numbers do not change)."""
    cdef int threads = pool_threads()
    cdef DenseJob job = DenseJob(loop=loop, theta=sl.out, old=sl.theta, g=sl.g, s=sl.s,
                                 n_states=sl.n_states, n=sl.n, part=sl.n, h=h)
    if threads > 1 and sl.n >= SPLIT_MIN:
        job.part = ((sl.n + threads - 1) // threads + 15) // 16 * 16
    pool_run(dense_part, &job, <int>((sl.n + job.part - 1) // job.part) if sl.n else 0)


cdef void scale_values(float* out, const float* old, Py_ssize_t n, float keep) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        out[i] = old[i] * keep


cdef class _Decay:
    """A parameter only weight decay steps: its buffers and where the step writes."""
    cdef ValueBuffers buf
    cdef float* old
    cdef float* out


def apply(int rule, list dense, list sparse, double lr=0, double mom=0, double rho=0,
          double beta_1=0, double beta_2=0, double eps=0, double scale=1, double keep=1):
    """Rule `rule` (a value of RULES) on every Slot of `dense` (all elements; `keep`
    applies) and on the used rows of every table Slot of `sparse` (with no weight decay:
    the caller decays whole tables). Gradients read are zeroed, the used rows of every
    table unmarked. Hyperparameters are rounded to float32, as np.float32() does."""
    step(None, rule, dense, sparse, [], [], 0, None, lr=lr, mom=mom, rho=rho, beta_1=beta_1,
         beta_2=beta_2, eps=eps, scale=scale, keep=keep)


# a trainer's counts of steps and clips (and since its last status())
COUNTERS = ("updates", "_updates_since_status", "clips", "_clips_since_status")


def count_step(object trainer, int clipped, dict after):
    """Count one step (clipped: whether it clipped) on `trainer` and set the attributes
    of `after` (None: none), with no Python code run."""
    _count_step(trainer, clipped, after)


cdef int _count_step(object trainer, int clipped, dict after) except -1:
    if trainer is None:
        return 0
    trainer.updates += 1
    trainer._updates_since_status += 1
    if clipped:
        trainer.clips += 1
        trainer._clips_since_status += 1
    if after:
        for name, value in after.items():
            setattr(trainer, name, value)
    return 0


def step(object trainer, int rule, list dense, list sparse, list decayed, list unmark,
         int clipped, dict after, double lr=0, double mom=0, double rho=0, double beta_1=0,
         double beta_2=0, double eps=0, double scale=1, double keep=1):
    """One trainer step, all or nothing: everything that can fail (checks, a second
    buffer to allocate) is done before the first value changes, and from then on no
    Python code runs, so a signal (Ctrl-C) is handled after the step is complete.

    `rule` on `dense` and `sparse` as `apply`; then every ValueBuffers of `decayed`
    (the parameters no dense step decayed) is multiplied by `keep`, every used-row mask
    of `unmark` zeroed, and the step counted on `trainer` (count_step; None: none)."""
    if not 0 <= rule < N_RULES:
        raise ValueError(f"unknown rule {rule}")
    cdef rule_fn loop = RULE_TABLE[rule].loop
    cdef int needs = RULE_TABLE[rule].n_states
    cdef Hyper h = Hyper(lr=<float>lr, mom=<float>mom, rho=<float>rho, beta_1=<float>beta_1,
                         beta_2=<float>beta_2, eps=<float>eps, scale=<float>scale,
                         keep=<float>keep)
    cdef Slot sl
    cdef _Decay d
    cdef uint8_t[::1] m
    # the checks, and the buffers each step writes (choosing them changes no value:
    # allocating a second buffer may fail, so it is done before any change)
    for sl in dense:
        if sl.n_states < needs:
            raise ValueError(f"rule {rule} needs {needs} state arrays")
        sl._prepare(True)
    for sl in sparse:
        if sl.n_states < needs:
            raise ValueError(f"rule {rule} needs {needs} state arrays")
        if sl.used == NULL and sl.n_rows != 0:
            raise ValueError("a sparse update needs a lookup table's slot")
        if sl.used != NULL:
            sl._prepare(False)
    cdef list masks = []
    for a in unmark:
        m = a           # a C-contiguous uint8 array, else an error before any change
        masks.append(m)
    decays = []
    for buf in decayed:
        d = _Decay()
        d.buf = buf
        decays.append(d)
    for d in decays:
        d.old = d.buf.src.values
        d.out = d.buf.step_target()
    # from here on, no Python code: the step completes before a signal is handled
    for sl in dense:
        run_dense(loop, sl, &h)
        sl._done()
        if sl.used != NULL:
            memset(sl.used, 0, sl.n_rows)
    h.keep = 1
    for sl in sparse:
        if sl.used != NULL:
            run_rows(loop, sl, &h)
    for d in decays:
        scale_values(d.out, d.old, d.buf.n, <float>keep)
        d.buf.step_done(d.out)
    for m in masks:
        if m.shape[0]:
            memset(&m[0], 0, m.shape[0])
    _count_step(trainer, clipped, after)


def restore(list saved):
    """Copy each (array, copy) pair's copy back, with no Python code in between (a
    Python rule's step interrupted: trainers.Trainer._python_step)."""
    cdef float[::1] f, f_from
    cdef uint8_t[::1] u, u_from
    for dst, src in saved:
        if dst.dtype == np.uint8:
            u, u_from = dst.reshape(-1), src.reshape(-1)
            u[:] = u_from
        else:
            f, f_from = dst.reshape(-1), src.reshape(-1)
            f[:] = f_from


cdef double sum_squares(const float* x, Py_ssize_t n) noexcept nogil:
    # eight double accumulators: independent chains the compiler can vectorise
    cdef double acc[8]
    cdef Py_ssize_t i, k, n8 = n - n % 8
    cdef double total = 0
    for k in range(8):
        acc[k] = 0
    for i in range(0, n8, 8):
        for k in range(8):
            acc[k] += <double>x[i + k] * <double>x[i + k]
    for i in range(n8, n):
        total += <double>x[i] * <double>x[i]
    for k in range(8):
        total += acc[k]
    return total


def sum_of_squares(const float[::1] x):
    """The sum of the squares of a 1-d float32 array, in double."""
    return sum_squares(&x[0], x.shape[0]) if x.shape[0] else 0.0


def squared_norm(list dense, list sparse):
    """Sum of the squared gradients (in double) of every Slot of `dense`, and of the used
    rows of every table Slot of `sparse`: the square of the clipping norm."""
    cdef double total = 0
    cdef Slot sl
    cdef Py_ssize_t r
    for sl in dense:
        total += sum_squares(sl.g, sl.n)
    for sl in sparse:
        if sl.used == NULL:
            continue
        for r in range(sl.n_rows):
            if sl.used[r]:
                total += sum_squares(sl.g + r * sl.row_size, sl.row_size)
    return total
