"""Batching strategies: how ready nodes are grouped into batches.

Built in (Cython, over C arrays): ``"none"``, ``"depth"``, ``"agenda"``, ``"critical"``
and ``"lookahead"``. A new strategy is any object with a name and a
``select(frontier)`` method; register it and choose it by name::

    class Biggest(autobatch.Strategy):
        name = "biggest"
        def select(self, frontier):
            return max(frontier.signatures(), key=lambda s: len(frontier.nodes(s)))

    autobatch.register_strategy(Biggest())
    dy.renew_cg(strategy="biggest")

``select`` is called once per batch (not per node) with a `Frontier`: the nodes whose
arguments are all computed, grouped by signature. It returns a signature id (run all
its ready nodes as one batch) or ``(signature, node_ids)`` (run only those).
"""
from autobatch.engine.strategies import (AGENDA, CRITICAL, DEPTH, NONE, Frontier, available_strategies,
                                   default_strategy, register_strategy, set_default_strategy)


class Strategy:
    """Base class for strategies written in Python."""
    name = None

    def select(self, frontier):
        """Choose what runs next: given the ``frontier`` (the ready nodes grouped by signature, a
        ``dy.Frontier``), return a signature (every ready node of it runs as one batch) or
        ``(signature, node_ids)`` to run part of the group. Called once per batch.
        """
        raise NotImplementedError

    def __repr__(self):
        return f"<strategy {self.name!r}>"


BUILTIN = (NONE, DEPTH, AGENDA, CRITICAL)
