# The learned strategy's Python side: options, statistics, pickling (included by
# engine/learned.pyx).

cdef int32_t* empty_table(int64_t size) except NULL:
    cdef int32_t* t = <int32_t*>resize(NULL, size, sizeof(int32_t))
    memset(t, 0xff, size * sizeof(int32_t))
    return t


cdef class LearnedStrategy(BuiltinStrategy):
    """A batching policy learned per model by tabular Q-learning, then replayed at the
    cost of a table lookup per batch (ED-Batch's finite-state-machine policy).

    The state is the set of *kinds* on the ready frontier (a kind: a signature whose
    weights are named by the parameter, not by the graph's node, so it is the same in
    every graph of a model); the action is the kind that runs next. A model learns on
    its first graph: before the forward runs, ``episodes`` simulated passes over its
    frontier (no kernel runs) train the table, and the greedy policy is kept when it
    needs fewer batches than the one kept before. It learns again on a later graph (up
    to ``graphs`` in all) when a forward met unknown states in more than 2% of its
    batches; an unknown state runs the ``fallback`` strategy's choice. Deterministic for
    a ``seed`` and a sequence of graphs. Every choice gives the same numbers.

    Example::

        learned = dy.LearnedStrategy(episodes=40, seed=1)
        for batch in data:
            dy.renew_cg(strategy=learned)      # or strategy="learned": the shared one
            ...
        print(learned.info())
    """

    def __cinit__(self, *args, **kwargs):
        self.kind_table_size = self.st_table_size = self.md_table_size = 64
        self.kind_table = empty_table(64)
        self.st_table = empty_table(64)
        self.md_table = empty_table(64)

    def __init__(self, str name="learned", int episodes=40, int graphs=2, seed=0,
                 str fallback="lookahead"):
        if episodes < 1 or graphs < 1:
            raise ValueError("LearnedStrategy: episodes and graphs must be at least 1")
        if fallback not in FALLBACKS:
            raise ValueError(f"LearnedStrategy: fallback must be one of {sorted(FALLBACKS)}, "
                             f"not {fallback!r}")
        BuiltinStrategy.__init__(
            self, S_LEARNED, name,
            "a policy learned per model by Q-learning on simulations of its first graphs "
            "(state: the kinds of op on the frontier; action: the kind to run), replayed "
            "by a table lookup per batch (ED-Batch)")
        self.episodes = episodes
        self.graphs = graphs
        self.seed = <uint64_t>seed
        self.fallback = fallback
        self.fallback_sid = FALLBACKS[fallback]
        self.reads_heights, self.reads_feeders = FALLBACK_READS[fallback]
        self.rng = mix64(self.seed ^ <uint64_t>0x5DEECE66D)

    def __dealloc__(self):
        free(self.kind_hash); free(self.kind_table); free(self.kind_seen)
        free(self.present)
        free(self.st_key); free(self.st_head); free(self.st_best); free(self.st_best_q)
        free(self.st_pol); free(self.st_table)
        free(self.ac_kind); free(self.ac_next); free(self.ac_q)
        free(self.md_key); free(self.md_graphs); free(self.md_miss); free(self.md_fallback)
        free(self.md_table)
        free(self.tr_state); free(self.tr_kind); free(self.tr_cost); free(self.stage)

    def reset(self):
        """Forget everything learned (kinds, states, models); the random stream starts
        again from the seed."""
        self.n_kinds = self.n_states = self.n_actions = self.n_models = 0
        memset(self.kind_table, 0xff, self.kind_table_size * sizeof(int32_t))
        memset(self.st_table, 0xff, self.st_table_size * sizeof(int32_t))
        memset(self.md_table, 0xff, self.md_table_size * sizeof(int32_t))
        if self.cap_kinds:
            memset(self.kind_seen, 0, self.cap_kinds * sizeof(uint64_t))
        self.tick = 0
        self.graphs_learned = self.episodes_run = 0
        self.seconds_learning = 0
        self.last_planned = 0
        self.rng = mix64(self.seed ^ <uint64_t>0x5DEECE66D)

    def info(self):
        """What was learned: ``kinds``, ``states`` (frontiers seen), ``policy_states``
        (those the replay knows), ``actions`` (Q entries), ``models``, ``graphs_learned``,
        ``episodes`` (simulated passes), ``seconds_learning``, ``planned_batches`` (the
        batches its replay of the last graph it learned on needs), and per model the share
        of batches of its last forward whose state the policy did not know
        (``last_miss_rate``, a list) and the share its fallback chose, there and in the
        states where the policy leaves the choice to it (``last_fallback_rate``)."""
        cdef int64_t i
        return {"kinds": self.n_kinds, "states": self.n_states,
                "policy_states": sum(1 for i in range(self.n_states) if self.st_pol[i] != -1),
                "actions": self.n_actions, "models": self.n_models,
                "graphs_learned": self.graphs_learned, "episodes": self.episodes_run,
                "seconds_learning": self.seconds_learning,
                "planned_batches": self.last_planned,
                "last_miss_rate": [self.md_miss[i] for i in range(self.n_models)],
                "last_fallback_rate": [self.md_fallback[i] for i in range(self.n_models)]}

    def __reduce__(self):
        # the options only: kinds name parameters by their memory in this process
        return (LearnedStrategy, (self.name, self.episodes, self.graphs, self.seed,
                                  self.fallback))

    def __repr__(self):
        return (f"<strategy {self.name!r} (built in, learned: {self.n_states} states, "
                f"{self.graphs_learned} graphs)>")


LEARNED = register_strategy(LearnedStrategy())
