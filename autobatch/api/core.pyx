# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The DyNet-style expression API: the current graph, the Expression handle, the
expression functions and the parameter storage that nodes read in place.

User code only appends nodes to the graph (engine/graph.pyx) behind tiny `Expression`
handles; the engine modules do the rest when a value is needed.
"""
cimport cython
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.math cimport isfinite, log
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset

from autobatch.runtime.nodes cimport *
from autobatch.engine.optable cimport *
from autobatch.kernels.elementwise cimport AB_UNARY_API_COUNT, ab_unary_api, ab_unary_info
from autobatch.runtime.rng cimport *
from autobatch.engine.graph cimport EngineGraph, new_version
from autobatch.engine.strategies cimport S_NONE
from autobatch.engine.stats cimport (batch_stats, fusion_stats, batch_list, print_batch_list,
                                     print_graphviz, lower_bound, operand_stats, profile_stats)
from autobatch.runtime.memory cimport arena_capacity
from autobatch.runtime.param_buffers cimport ValueBuffers, ValueSource
from autobatch.kernels.conv cimport (ConvGeom, conv_geom, pool_geom, GEOM_OK, GEOM_BAD_ARG,
                                      GEOM_FILTER_TOO_BIG)

import inspect
import operator
import os
import re
import sys
import threading

import numpy as np

from autobatch.errors import DimensionError, StaleExpressionError
from autobatch.api.tensor import Tensor, reseed as _reseed_tensors

cdef const OpDef* OPS = op_table()
OP_NAMES = [OPS[i].name.decode() for i in range(n_ops())]


# one module, its parts by job (each names what it uses of the others)
include "shapes.pxi"
include "computation_graph.pxi"
include "current_graph.pxi"
include "expression.pxi"
include "parameters.pxi"
include "ops_inputs.pxi"
include "ops_math.pxi"
include "ops_reduce.pxi"
include "ops_structure.pxi"
include "ops_lstm.pxi"
include "ops_conv.pxi"
include "ops_select.pxi"
include "ops_linalg.pxi"
include "ops_stats.pxi"
include "ops_losses.pxi"
include "ops_random.pxi"
include "indexing.pxi"
include "static_graphs.pxi"

# The public names, for `from autobatch.api.core import *` in __init__.py: everything
# defined here, the elementwise functions made from kernels/elementwise.h among them.
__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_")
                 and getattr(value, "__module__", None) in ("autobatch", "autobatch.api.core"))
