# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The engine: node arrays, signatures, scheduling strategies, executor, and the
DyNet-style expression API that records nodes.

User code only appends nodes (C structs) behind tiny `Expression` handles. When a
value is needed, the ancestors that are not computed yet are grouped into batches by
a strategy and every batch runs as one kernel call (see _kernels.pyx).
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport malloc, free, realloc, qsort
from libc.string cimport memcpy, memset
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from cpython.object cimport PyObject

from autobatch._kernels cimport *

import operator

import numpy as np

cdef const OpDef* OPS = op_table()
OP_NAMES = [OPS[i].name.decode() for i in range(<int>N_OPS)]


class DimensionError(ValueError):
    """Arguments of an op have shapes that do not fit together."""


class StaleExpressionError(RuntimeError):
    """An Expression from a computation graph that has been renewed."""


cdef inline double now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef void* grow(void* p, int64_t* cap, int64_t need, size_t item) except NULL:
    """Make room for `need` items, doubling; raises MemoryError instead of crashing."""
    cdef int64_t c = cap[0]
    if need <= c and p != NULL:
        return p
    if c < 16:
        c = 16
    while c < need:
        c *= 2
    cdef void* q = realloc(p, c * item)
    if q == NULL:
        raise MemoryError("autobatch: cannot grow graph arrays")
    cap[0] = c
    return q


cdef int cmp_int32(const void* a, const void* b) noexcept nogil:
    return (<int32_t*>a)[0] - (<int32_t*>b)[0]


cdef inline uint64_t mix(uint64_t h, uint64_t v) noexcept nogil:
    h ^= v + <uint64_t>0x9E3779B97F4A7C15 + (h << 6) + (h >> 2)
    return h * <uint64_t>0xBF58476D1CE4E5B9


# a signature key: op, nargs, the shape (3 words), the attributes (4 words), then
# 3 words per argument (its shape, or its node id when it is shared by identity)
cdef enum:
    KEY_HEAD = 9
    KEY_PER_ARG = 3


cdef inline void shape_words(const Node* n, int64_t* out) noexcept nogil:
    """A node's full shape in three words (each size is a positive int32)."""
    out[0] = (<int64_t>n.d[0]) | ((<int64_t>n.d[1]) << 32)
    out[1] = (<int64_t>n.d[2]) | ((<int64_t>n.d[3]) << 32)
    out[2] = (<int64_t>n.nd) | ((<int64_t>n.bs) << 32)


# strategy ids of the built-in (Cython) strategies; anything else is a Python object
cdef enum:
    S_NONE, S_DEPTH, S_AGENDA, S_CRITICAL, S_PYTHON


include "_graph.pxi"
include "_strategies.pxi"
include "_expression.pxi"
include "_parameters.pxi"
include "_ops.pxi"
