# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The DyNet-style expression API: the current graph, the Expression handle, the
expression functions and the parameter storage that nodes read in place.

User code only appends nodes to the graph (_graph.pyx) behind tiny `Expression`
handles; the engine modules do the rest when a value is needed.
"""
cimport cython
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.math cimport log
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset

from autobatch._nodes cimport *
from autobatch._optable cimport *
from autobatch._random cimport *
from autobatch._graph cimport ComputationGraph, new_version
from autobatch._kernels_conv cimport (ConvGeom, conv_geom, pool_geom, GEOM_OK, GEOM_BAD_ARG,
                                      GEOM_FILTER_TOO_BIG)

import inspect
import operator
import re
import threading

import numpy as np

from autobatch.errors import DimensionError, StaleExpressionError

cdef const OpDef* OPS = op_table()
OP_NAMES = [OPS[i].name.decode() for i in range(n_ops())]


# one module, its parts by job (each names what it uses of the others)
include "_shapes.pxi"
include "_expression.pxi"
include "_parameters.pxi"
include "_ops_inputs.pxi"
include "_ops_math.pxi"
include "_ops_reduce.pxi"
include "_ops_structure.pxi"
include "_ops_lstm.pxi"
include "_ops_conv.pxi"
include "_ops_select.pxi"
include "_ops_linalg.pxi"
include "_ops_stats.pxi"
include "_ops_losses.pxi"
include "_ops_random.pxi"
include "_indexing.pxi"
include "_reuse.pxi"

# The public names, for `from autobatch._core import *` in __init__.py: everything
# defined here, the elementwise functions made from _elementwise.h among them.
__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_")
                 and getattr(value, "__module__", None) in ("autobatch", "autobatch._core"))
