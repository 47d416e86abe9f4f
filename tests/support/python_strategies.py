"""Two strategies written in Python, registered on import (test_batching,
test_fusion, test_scheduler_props and test_checkpoint run under them besides the
built-in ones)."""
import autobatch as dy


class LargestFirst(dy.Strategy):
    """Python strategy: the signature with the most ready nodes."""
    name = "test-largest-first"

    def select(self, frontier):
        return max(frontier.signatures(), key=lambda s: (len(frontier.nodes(s)), -s))


class HalfOfLowest(dy.Strategy):
    """Python strategy returning (signature, nodes): half the ready nodes of the
    lowest signature id, so batches are split."""
    name = "test-half-of-lowest"

    def select(self, frontier):
        s = min(frontier.signatures())
        nodes = frontier.nodes(s)
        return s, nodes[: max(1, len(nodes) // 2)]


dy.register_strategy(LargestFirst())
dy.register_strategy(HalfOfLowest())

PYTHON_STRATEGIES = [LargestFirst.name, HalfOfLowest.name]
