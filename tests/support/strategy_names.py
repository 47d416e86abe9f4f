"""The strategy names the tests run under, defined once.

BUILTIN_STRATEGIES: every strategy built into the engine, "none" first, then by name (`dy.available_strategies()`
holds these and whatever a test module registers; only the built-in ones are taken,
so the list does not depend on which test modules were imported first).
BATCHING_STRATEGIES: the built-in ones that batch (all but "none", the unbatched
reference that check_batching_invariance compares against).

tests/conftest.py makes fixtures of them: `strategy` (a test runs once per built-in
strategy) and `strategies` (the whole list)."""
import autobatch as dy
from autobatch.engine.strategies import BuiltinStrategy

BUILTIN_STRATEGIES = sorted((name for name, s in dy.available_strategies().items()
                             if isinstance(s, BuiltinStrategy)),
                            key=lambda name: (name != "none", name))     # "none" first
BATCHING_STRATEGIES = [s for s in BUILTIN_STRATEGIES if s != "none"]
