# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The trainers' update rules as compiled loops over raw float32 memory.

One pass per parameter does all a rule does to an element: scale the gradient by the
clipping factor, update the optimizer state, step the value, apply the weight-decay
factor and zero the gradient. A lookup table with sparse updates runs the same loop on
each row its used-row mask marks. A table with dense updates whose gradient only
backward wrote (backward marks every row it adds into) has a +0 gradient on the rows
not marked: there the rule's `zero` loop runs, which neither reads nor zeroes that
gradient (a fourth less memory traffic for Adam) and gives the same numbers. The
loops are in update_rules.h, one per rule, each compiled for AVX-512, AVX2 and the
baseline; the level is the best this processor runs, or the one AUTOBATCH_UPDATE_SIMD
(avx512f, avx2, default or auto) or set_simd_level chooses. The arithmetic is float32 in the order of the numpy expressions in
autobatch/model/trainers.py (which stay the rules' reference and the path of Python
subclasses that override `rule`), so the numbers are the same at every level; this
module is built with -ffp-contract=off so that no FMA changes a rounding.
"""
import os

from libc.stdint cimport uint8_t, uintptr_t
from libc.string cimport memset
from cpython.pyport cimport PY_SSIZE_T_MAX

import numpy as np

from autobatch.runtime.threads cimport pool_run, pool_threads
from autobatch.runtime.param_buffers cimport ValueBuffers

cdef extern from "update_rules.h" nogil:
    ctypedef struct Hyper "ab_hyper":
        float lr, mom, rho, beta_1, beta_2, eps, scale, keep
    ctypedef void (*rule_fn "ab_rule_fn")(float* theta, const float* old, float* grad,
                                          float* s0, float* s1, float* s2, Py_ssize_t n,
                                          const Hyper* h) noexcept
    ctypedef void (*scale_fn "ab_scale_fn")(float* out, const float* old, Py_ssize_t n,
                                            float keep) noexcept
    ctypedef double (*sum_squares_fn "ab_sum_squares_fn")(const float* x, Py_ssize_t n) noexcept
    ctypedef double (*sum_squares_rows_fn "ab_sum_squares_rows_fn")(
        const float* x, const uint8_t* used, Py_ssize_t n_rows, Py_ssize_t row_size) noexcept
    enum:
        N_RULES "AB_N_RULES"
        N_LEVELS "AB_N_LEVELS"
    const char* ab_rule_names[]
    const int ab_rule_states[]
    const char* ab_level_names[]
    const rule_fn ab_rule_table[][N_RULES]
    const rule_fn ab_zero_rule_table[][N_RULES]
    const scale_fn ab_scale_table[]
    const sum_squares_fn ab_sum_squares_table[]
    const sum_squares_rows_fn ab_sum_squares_rows_table[]
    int ab_level_runs(int level)

cdef enum:
    MAX_STATES = 3
    LINE = 16               # floats in 64 bytes: the threads' parts start on a line

# elements of a parameter from which its update is split over the engine's threads
# (dy.set_num_threads); by default never: an update streams its arrays once, one core
# already saturates the memory bandwidth, and splitting Adam over 2 threads measured
# slower from 64K to 4M elements (benchmarks/update_bandwidth.py --split); see set_split_min
cdef Py_ssize_t SPLIT_MIN = PY_SSIZE_T_MAX

# one record per rule in update_rules.h, its index its id; RULES (name -> id) is what
# model/trainers.py names
RULES = {ab_rule_names[k].decode(): k for k in range(N_RULES)}


# ---------------------------------------------------------------- SIMD level ----

cdef int LEVEL = N_LEVELS - 1        # the row of the tables the steps call


def simd_levels():
    """The SIMD levels of the rules this processor runs, best first: a subset of
    "avx512f", "avx2", "default" (the baseline, SSE2 on x86-64)."""
    return [ab_level_names[k].decode() for k in range(N_LEVELS) if ab_level_runs(k)]


def simd_level():
    """The SIMD level the rules run at now (one of simd_levels())."""
    return ab_level_names[LEVEL].decode()


def set_simd_level(str name):
    """Run the rules at level `name` (one of simd_levels(), or "auto": the best);
    returns the previous one. Every level gives the same numbers; for tests and
    measurements. Also set at import from AUTOBATCH_UPDATE_SIMD. ValueError for a level
    this processor does not run."""
    global LEVEL
    old = simd_level()
    runs = simd_levels()
    if name == "auto":
        name = runs[0]
    if name not in runs:
        raise ValueError(f"update rule SIMD level must be auto or one of {', '.join(runs)} "
                         f"(what this processor runs), got {name!r}")
    LEVEL = [ab_level_names[k].decode() for k in range(N_LEVELS)].index(name)
    return old


set_simd_level(os.environ.get("AUTOBATCH_UPDATE_SIMD", "auto") or "auto")


def set_split_min(Py_ssize_t n):
    """Split a dense update over the engine's threads from `n` elements of a parameter
    on (1: always, when there are several threads); returns the previous size. The
    default is never (sys.maxsize): one core saturates the memory bandwidth that an
    update needs. For tests and measurements (benchmarks/update_bandwidth.py --split)."""
    global SPLIT_MIN
    if n < 1:
        raise ValueError(f"the split size must be at least 1, got {n}")
    old, SPLIT_MIN = SPLIT_MIN, n
    return old


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
    cdef bint by_rows                 # this step: the gradient is +0 off the marked rows

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

    cdef bint _zero_off_marks(self):
        """Whether the gradient is known to be +0 on the rows the mask does not mark: a
        table whose owner says nothing else wrote it (`_grad_off_marks` false; see
        LookupParameters)."""
        return (self.used != NULL and self.owner is not None
                and not getattr(self.owner, "_grad_off_marks", True))

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
            for k in range(MAX_STATES):
                st[k] = sl.s[k] + off if k < sl.n_states else NULL
            rule(sl.out + off, sl.theta + off, sl.g + off, st[0], st[1], st[2], sl.row_size, h)
    if sl.n_rows:
        memset(sl.used, 0, sl.n_rows)


ctypedef struct DenseJob:
    rule_fn loop
    float* theta             # written
    const float* old         # read (theta itself, or the other buffer)
    float* g
    float* s[MAX_STATES]     # (NULL: a state array the rule has not)
    Py_ssize_t n, part       # elements, and per part (a multiple of LINE)
    Py_ssize_t head          # floats theta starts past a 64-byte line
    const Hyper* h


cdef inline Py_ssize_t part_start(const DenseJob* job, int c) noexcept nogil:
    """Where part c starts: parts after the first start where theta (written) is on a
    64-byte line, so that two threads never write one line of it."""
    return 0 if c == 0 else min(job.n, c * job.part - job.head)


cdef inline int parts(const DenseJob* job) noexcept nogil:
    """How many parts the job has."""
    return <int>((job.n + job.part - 1) // job.part) if job.n else 0


cdef void dense_part(void* ctx, int c) noexcept nogil:
    cdef DenseJob* job = <DenseJob*>ctx
    cdef Py_ssize_t at = part_start(job, c)
    cdef Py_ssize_t n = part_start(job, c + 1) if c + 1 < parts(job) else job.n
    job.loop(job.theta + at, job.old + at, job.g + at,
             job.s[0] + at if job.s[0] != NULL else NULL,
             job.s[1] + at if job.s[1] != NULL else NULL,
             job.s[2] + at if job.s[2] != NULL else NULL, n - at, job.h)


cdef void run_dense(rule_fn loop, float* theta, const float* old, float* g, float* const* s,
                    int n_states, Py_ssize_t n, const Hyper* h) noexcept nogil:
    """The rule on all n elements of a parameter, in ranges over the engine's threads
    when it is large (every element on its own: the numbers do not change)."""
    cdef int threads = pool_threads(), k
    cdef DenseJob job
    job.loop, job.theta, job.old, job.g, job.h = loop, theta, old, g, h
    job.n, job.part, job.head = n, n, 0
    for k in range(MAX_STATES):
        job.s[k] = s[k] if k < n_states else NULL
    if threads > 1 and n >= SPLIT_MIN:
        job.part = ((n + threads - 1) // threads + LINE - 1) // LINE * LINE
        job.head = (<uintptr_t>theta // sizeof(float)) % LINE
    pool_run(dense_part, &job, parts(&job))


cdef void run_slot(rule_fn loop, rule_fn zero, Slot sl, const Hyper* h) noexcept nogil:
    """A dense step of every element; of a table by runs of rows when its gradient is
    +0 off the marked rows (sl.by_rows): the marked ones through the rule, the others
    through its zero loop. Each element is stepped on its own, so the runs give the
    numbers of one pass."""
    if not sl.by_rows:
        run_dense(loop, sl.out, sl.theta, sl.g, sl.s, sl.n_states, sl.n, h)
        return
    cdef float* st[MAX_STATES]
    cdef Py_ssize_t r = 0, r1, off
    cdef bint marked
    cdef int k
    while r < sl.n_rows:
        marked = sl.used[r] != 0
        r1 = r + 1
        while r1 < sl.n_rows and (sl.used[r1] != 0) == marked:
            r1 += 1
        off = r * sl.row_size
        for k in range(MAX_STATES):
            st[k] = sl.s[k] + off if k < sl.n_states else NULL
        run_dense(loop if marked else zero, sl.out + off, sl.theta + off, sl.g + off, st,
                  sl.n_states, (r1 - r) * sl.row_size, h)
        r = r1


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


def rule_on_arrays(int rule, out, old, grad, list states, double lr=0, double mom=0,
                   double rho=0, double beta_1=0, double beta_2=0, double eps=0,
                   double scale=1, double keep=1):
    """Rule `rule` on whole 1-d float32 arrays, as a parameter's dense step runs it
    (split over the engine's threads when large): new values into `out` from `old`
    (the same array: in place; else arrays that do not overlap), `grad` read then
    zeroed, `states` the rule's state arrays. For tests and measurements."""
    if not 0 <= rule < N_RULES:
        raise ValueError(f"unknown rule {rule}")
    arrays = [out, old, grad] + states
    if any(not isinstance(a, np.ndarray) or a.dtype != np.float32 or a.ndim != 1
           or a.size != out.size for a in arrays):
        raise ValueError("rule_on_arrays: 1-d float32 arrays of one size")
    if len(states) < ab_rule_states[rule]:
        raise ValueError(f"rule {rule} needs {ab_rule_states[rule]} state arrays")
    distinct = [old] + arrays[2:] if out is old else arrays
    if any(np.may_share_memory(a, b) for k, a in enumerate(distinct) for b in distinct[k + 1:]):
        raise ValueError("rule_on_arrays: the arrays overlap (out may only be old itself)")
    cdef float* s[MAX_STATES]
    cdef int k, n_states = min(len(states), MAX_STATES)
    for k in range(MAX_STATES):
        s[k] = _data(states[k]) if k < n_states else NULL
    cdef Hyper h = Hyper(lr=<float>lr, mom=<float>mom, rho=<float>rho, beta_1=<float>beta_1,
                         beta_2=<float>beta_2, eps=<float>eps, scale=<float>scale,
                         keep=<float>keep)
    cdef float* theta = _data(out)
    cdef const float* before = _data(old)
    cdef float* g = _data(grad)
    cdef rule_fn loop = ab_rule_table[LEVEL][rule]
    cdef Py_ssize_t n = out.size
    with nogil:
        run_dense(loop, theta, before, g, s, n_states, n, &h)


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
    cdef rule_fn loop = ab_rule_table[LEVEL][rule]
    cdef rule_fn zero = ab_zero_rule_table[LEVEL][rule]
    cdef int needs = ab_rule_states[rule]
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
        sl.by_rows = sl._zero_off_marks()
    # the tables whose gradient is all +0 after the step, off their (cleared) marks too
    zeroed = [sl.owner for sl in dense if sl.used != NULL
              and hasattr(sl.owner, "_grad_off_marks")]
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
        run_slot(loop, zero, sl, &h)
        sl._done()
        if sl.used != NULL:
            memset(sl.used, 0, sl.n_rows)
    for owner in zeroed:
        owner._grad_off_marks = False
    h.keep = 1
    for sl in sparse:
        if sl.used != NULL:
            run_rows(loop, sl, &h)
    for d in decays:
        ab_scale_table[LEVEL](d.out, d.old, d.buf.n, <float>keep)
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


cdef inline double sum_squares(const float* x, Py_ssize_t n) noexcept nogil:
    # eight double accumulators in update_rules.h: independent chains that vectorise
    return ab_sum_squares_table[LEVEL](x, n)


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
        if sl._zero_off_marks():
            total += ab_sum_squares_rows_table[LEVEL](sl.g, sl.used, sl.n_rows, sl.row_size)
        else:
            total += sum_squares(sl.g, sl.n)
    for sl in sparse:
        if sl.used == NULL:
            continue
        for r in range(sl.n_rows):
            if sl.used[r]:
                total += sum_squares(sl.g + r * sl.row_size, sl.row_size)
    return total
