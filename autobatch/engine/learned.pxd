# The learned strategy: a batching policy learned per model by tabular Q-learning on
# simulations of the ready frontier, then replayed by a table lookup per batch.
from libc.stdint cimport int32_t, int64_t, uint64_t
from autobatch.runtime.nodes cimport NodeView
from autobatch.engine.scheduler cimport Sched
from autobatch.engine.signatures cimport SigTable
from autobatch.engine.strategies cimport BuiltinStrategy

cdef class LearnedStrategy(BuiltinStrategy):
    # options
    cdef readonly int episodes
    """Simulated Q-learning episodes on each graph it learns on."""
    cdef readonly int graphs
    """The most graphs of one model it learns on."""
    cdef readonly uint64_t seed
    """The seed of its exploration."""
    cdef readonly str fallback
    """The built-in strategy that chooses in a state the policy does not know."""
    cdef int fallback_sid
    # what a forward's frontier is prepared with: what the fallback reads (learning
    # prepares both for the heuristics it learns from)
    cdef bint reads_heights, reads_feeders
    cdef uint64_t rng
    # kinds: a signature with its weights named by identity, not by node id
    cdef uint64_t* kind_hash
    cdef int32_t* kind_table            # open addressing: kind id or -1
    cdef int64_t n_kinds, cap_kinds, kind_table_size
    # per kind, a mark (== tick: seen by the current pass) and the kinds a pass found
    cdef uint64_t* kind_seen
    cdef int32_t* present
    cdef uint64_t tick
    # states: a frontier's set of kinds (its hash); per state its Q list and policy
    cdef uint64_t* st_key
    cdef int32_t* st_head               # first action entry of the state, -1: none
    cdef int32_t* st_best               # greedy kind by Q, -1: none
    cdef double* st_best_q
    cdef int32_t* st_pol                # the kind the replay runs, -1: fall back
    cdef int32_t* st_table
    cdef int64_t n_states, cap_states, st_table_size
    # actions: (state, kind) -> Q, chained per state
    cdef int32_t* ac_kind
    cdef int32_t* ac_next
    cdef double* ac_q
    cdef int64_t n_actions, cap_actions
    # models: the hash of a forward's set of kinds -> graphs learned, the shares of its
    # last forward's batches in unknown states and chosen by the fallback
    cdef uint64_t* md_key
    cdef int32_t* md_graphs
    cdef double* md_miss
    cdef double* md_fallback
    cdef int32_t* md_table
    cdef int64_t n_models, cap_models, md_table_size
    # an episode's trajectory and fused stages
    cdef int32_t* tr_state
    cdef int32_t* tr_kind
    cdef int32_t* tr_cost               # batches run: 1 + the fused stages
    cdef int64_t ep_batches             # batches of the last episode (its steps: returned)
    cdef int64_t cap_tr
    cdef int32_t* stage
    cdef int64_t cap_stage
    # statistics
    cdef readonly int64_t graphs_learned
    """Graphs it learned on so far."""
    cdef readonly int64_t episodes_run
    """Simulated episodes so far."""
    cdef readonly double seconds_learning
    """Time spent learning so far (part of the graphs' schedule time)."""
    cdef int64_t last_planned           # batches of the kept replay of the last learning graph

cdef int learned_begin(LearnedStrategy st, Sched* s, const NodeView* v, const SigTable* sigs,
                       int64_t count, bint fusion) except -1
cdef int learned_pick(LearnedStrategy st, Sched* s, const NodeView* v,
                      const SigTable* sigs) except -1
cdef void learned_end(LearnedStrategy st, Sched* s) noexcept
