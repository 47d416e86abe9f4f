# The forward loop: pick a batch, run it, fuse the chains it starts, release what it
# frees, until every needed node has run.
from libc.stdint cimport int64_t
from autobatch.engine.executor cimport BatchLog
from autobatch.engine.scheduler cimport Sched
from autobatch.engine.signatures cimport SigTable
from autobatch.runtime.nodes cimport Batch, NodeView
from autobatch.runtime.pack_cache cimport PackCache

cdef int run_forward(NodeView* v, Batch* ctx, Sched* sched, BatchLog* log, SigTable* sigs,
                     PackCache* packs, int strategy_id, object strategy, int64_t count,
                     bint fusion, bint check_validity, double* t_sched,
                     double* t_run) except -1
