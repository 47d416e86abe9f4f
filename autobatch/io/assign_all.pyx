"""Assigning a loaded file's values to a collection all at once: a Ctrl-C (any signal
whose handler raises) either stops `populate` before the first value is written or is
raised after the last one.

Python runs signal handlers between bytecodes, so a loop of numpy assignments can be
interrupted after any parameter: 4 of 50 interrupted `pc.populate` calls left a
collection partly assigned. Here the signals are checked once before anything is
written, every target and source is checked next, and then the copies run as C with no
Python in between, so no handler can run until every value is in place."""
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from cpython.exc cimport PyErr_CheckSignals


def assign_all(targets, sources):
    """Copy each of `sources` (float32 arrays, or None for zeros) into the target at
    the same position (contiguous, writable float32 arrays of the same size: a
    parameter's values or gradient). A signal pending on entry is raised before
    anything is written; one that arrives during the copies, after the last one."""
    cdef Py_ssize_t n = len(targets), i
    if len(sources) != n:
        raise ValueError(f"assign_all: {n} targets, {len(sources)} sources")
    PyErr_CheckSignals()           # a pending Ctrl-C is raised here: nothing written
    cdef float** dst = <float**> malloc(max(n, 1) * sizeof(float*))
    cdef const float** src = <const float**> malloc(max(n, 1) * sizeof(float*))
    cdef int64_t* size = <int64_t*> malloc(max(n, 1) * sizeof(int64_t))
    cdef float[::1] d
    cdef const float[::1] s
    if dst == NULL or src == NULL or size == NULL:
        free(dst); free(src); free(size)
        raise MemoryError("assign_all")
    try:
        # every pointer first: a bad pair raises here, before any copy. The lists hold
        # the arrays, so the pointers stay valid until the copies are done.
        for i in range(n):
            d = targets[i]
            size[i] = d.shape[0]
            dst[i] = &d[0] if size[i] > 0 else NULL
            src[i] = NULL
            if sources[i] is not None:
                s = sources[i]
                if s.shape[0] != size[i]:
                    raise ValueError(f"assign_all: {s.shape[0]} values for a target of {size[i]}")
                src[i] = &s[0] if size[i] > 0 else NULL
        # the copies: C only, and with the GIL held, so no other thread sees a half-assigned collection
        for i in range(n):
            if size[i] == 0:
                continue
            if src[i] == NULL:
                memset(dst[i], 0, size[i] * sizeof(float))
            else:
                memcpy(dst[i], src[i], size[i] * sizeof(float))
    finally:
        free(dst); free(src); free(size)
