"""A batching strategy written in Python: critical path first, with a one-step lookahead.

Importing this file registers the strategy "lookahead-py" (see docs/strategies.md), so
the benchmark can compare it with the built-in ones (the built-in "lookahead" is the
same rule in Cython, over feeder lists the scheduler keeps):

    python -m autobatch.bench --import examples/strategy_lookahead.py \\
        --strategy agenda,critical,lookahead,lookahead-py --no-torch

Running it as a script compares it with the built-in strategies on the five benchmark
tasks at small sizes (batches per step, batches / lower bound, instances/s):

    python examples/strategy_lookahead.py [--batch-size 16] [--hidden 64] [--steps 3]

The idea. 'critical' runs the ready signature whose pending nodes have the longest
path still to go. It misses one kind of batch: two ready signatures A and B that both
feed a third one C (a forward and a backward LSTM have their own weights, so their
gate pre-activations are computed in separate batches, but the gate nonlinearities
have one signature). If the strategy picks A and then C, C runs with A's nodes only
and B's gates run later in a batch of their own. The lookahead rule: before running
the chosen signature C, if another ready signature B has a node that feeds a node of
signature C, run B first, so that C's batch grows. It looks one step ahead and never
recurses, so every call still returns a ready signature: the strategy cannot stall.

Which signatures a node feeds is not part of the Frontier (it shows the ready nodes
only), so the strategy reads the graph itself once, with `cg().node_info(i)` for
every node: a per-graph cost in Python, linear in the number of nodes, paid on the
first `select` that needs it and extended when the graph grows (a parser calling
`value()` while it builds).

What it gives (one shared 2-CPU machine, noisy): it reaches the lower bound on the
number of batches on all five tasks (b/LB 1.00, against 1.18 for 'critical' on the
taggers and the parser; both already reach it on treelstm and lm). But the batches
it saves are elementwise gate batches, which are cheap: at batch 64, hidden 256 the
forward and backward times do not move, and reading the graph in Python (28-59 ms a
step) makes it 12-17 % slower than 'critical'. Worth it only in Cython, or with the
consumer information exposed by the engine: the built-in "lookahead" is that.
"""
import argparse
import os
import sys

if __name__ == "__main__":              # one BLAS thread, as the benchmark uses
    for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_v, "1")

from typing import IO, Any

import autobatch as dy


class Lookahead(dy.Strategy):
    """Critical path first; but first run a ready signature that feeds the chosen one."""
    name = "lookahead-py"

    def __init__(self) -> None:
        self._version: int | None = None          # graph this cache belongs to (dy.cg_version())
        self._feeds: list[set[int]] = []   # node id -> set of signatures of its consumers
        self._seen = 0                # nodes of the graph read so far

    def _consumers(self) -> list[set[int]]:
        """Per node, the signatures of the nodes that use it (cached per graph)."""
        g = dy.cg()
        if dy.cg_version() != self._version:
            self._version, self._feeds, self._seen = dy.cg_version(), [], 0
        feeds, info = self._feeds, g.node_info
        n = g.num_nodes
        for i in range(self._seen, n):
            _op, _shape, _bs, sig, args = info(i)
            feeds.append(set())
            for a in args:
                feeds[a].add(sig)
        self._seen = n
        return feeds

    def select(self, frontier: dy.Frontier) -> int:
        sigs = frontier.signatures()
        for s in sigs:                  # ops that never batch: nothing to wait for
            if not frontier.batchable(s):
                return s
        if len(sigs) == 1:              # the only choice: never stall
            return sigs[0]
        # 'critical': the longest way still to go; ties to the lower average depth
        best = max(sigs, key=lambda s: (frontier.average_height(s), -frontier.average_depth(s), -s))
        feeds = self._consumers()
        for r in sigs:                  # one step of lookahead: grow best's batch first
            if r != best and any(best in feeds[i] for i in frontier.nodes(r)):
                return r
        return best


LOOKAHEAD = dy.register_strategy(Lookahead())


# ------------------------------------------------------------- comparison ----

def compare(strategies: list[str], task_names: list[str], batch_size: int, hidden: int, steps: int,
            seed: int = 0, out: IO[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark's training steps (autobatch.bench.run) and print a table."""
    from autobatch.bench import run
    out = out or sys.stdout
    rows: list[dict[str, Any]] = []
    for t in task_names:
        rows += run.run_task(t, strategies, batch_size, hidden, steps, torch_modes=[], seed=seed)
    fmt = "{:<12s} {:<10s} {:>9s} {:>7s} {:>6s} {:>10s} {:>9s}"
    print(fmt.format("task", "strategy", "batches", "LB", "b/LB", "sched ms", "inst/s"), file=out)
    for r in rows:
        print(fmt.format(r["task"], r["system"], f"{r['batches_per_step']:.0f}",
                         f"{r['lower_bound_per_step']:.0f}", f"{r['batches_over_lower_bound']:.2f}",
                         f"{r['split_s']['schedule'] * 1e3:.1f}", f"{r['instances_per_s']:.0f}"),
              file=out)
    print(f"batch {batch_size}, hidden {hidden}, median of {steps} training steps after a warm-up; "
          "LB = lower bound on batches (cg().batch_lower_bound()); sched = time choosing batches",
          file=out)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    from autobatch.bench import tasks
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--task", default="all", help="all or a comma list of " + ",".join(tasks.TASKS))
    ap.add_argument("--strategy", default="none,depth,agenda,critical,lookahead,lookahead-py")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    task_names = list(tasks.TASKS) if a.task == "all" else a.task.split(",")
    return compare(a.strategy.split(","), task_names, a.batch_size, a.hidden, a.steps, a.seed)


if __name__ == "__main__":
    main()
