"""Benchmarks. `python -m autobatch.bench micro` measures the engine's own overhead."""
