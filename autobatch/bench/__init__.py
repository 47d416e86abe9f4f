"""Benchmarks. `python -m autobatch.bench` runs the benchmark tasks (run.py:
the five standard ones and the other workloads of the literature, docs/bench.md);
`python -m autobatch.bench micro` measures the engine's own overhead (micro.py)."""
