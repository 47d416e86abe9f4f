"""Benchmarks. `python -m autobatch.bench` runs the five standard tasks (run.py);
`python -m autobatch.bench micro` measures the engine's own overhead (micro.py)."""
