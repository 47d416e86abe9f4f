# Types of autobatch.strategies; checked by stubtest in CI (.ci/stubs).
from typing import ClassVar

from autobatch.engine.strategies import (AGENDA as AGENDA, CRITICAL as CRITICAL, DEPTH as DEPTH,
                                   NONE as NONE, BuiltinStrategy, Frontier as Frontier,
                                   available_strategies as available_strategies,
                                   default_strategy as default_strategy,
                                   register_strategy as register_strategy,
                                   set_default_strategy as set_default_strategy)

BUILTIN: tuple[BuiltinStrategy, ...]

class Strategy:
    name: ClassVar[str | None]
    # a signature, or (signature, node ids) to run part of its ready nodes
    def select(self, frontier: Frontier) -> int | tuple[int, list[int]]: ...
