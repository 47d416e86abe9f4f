"""The strategy experiment: every strategy on every workload, fusion on and off, in one
command (`python -m autobatch.bench strategies`).

For each workload (the five standard tasks and the literature's, `--task`) every
strategy trains on the same minibatches, each with fusion on and off (`NAME:unfused`),
interleaved step by step (autobatch/bench/run.py); DyNet's agenda joins as a baseline
with `--dynet-python`. The tables give, per workload and strategy:

- batches per step over the graph's lower bound (`batch_lower_bound()`), fused and
  unfused: the autobatching literature's metric; and kernel passes (batches that are
  not a fused stage) over their own bound (`batch_lower_bound(passes=True)`);
- the median step time over that of `agenda` with fusion on (the default), and the
  share of the step spent choosing batches: the user's metric;

and, per strategy, the geometric means over the workloads, the workloads on which it
is fastest and the number it is within 5 % of the lower bound. `--markdown FILE` writes
the tables as Markdown, `--json FILE` every row, `--plot FILE` a figure of both
metrics (matplotlib).

    python -m autobatch.bench strategies --batch-size 64 --hidden 256 --steps 5
    python -m autobatch.bench strategies --task literature --batch-size 32 --hidden 128
"""
import argparse
import json
import math
import sys

import autobatch as dy
from autobatch.bench import options, run, tasks
from autobatch.progress import progress as progress_bar

BASE = "agenda"                      # DyNet's strategy, fused: the time reference
UNFUSED = ":unfused"
NEAR_BOUND = 1.05                    # "reaches the lower bound": within 5 %


def parser():
    ap = argparse.ArgumentParser(prog="python -m autobatch.bench strategies",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="all", help="all, standard, literature or a comma list")
    ap.add_argument("--strategy", default="all",
                    help="all (every registered strategy but 'none') or a comma list")
    ap.add_argument("--import", dest="imports", action="append", default=[],
                    metavar="MODULE_OR_FILE", help="import this first (a strategy plug-in)")
    ap.add_argument("--fusion", default="on,off", help="on, off or on,off")
    ap.add_argument("--variant", default="ops", help="builder or ops")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5, help="timed minibatches after one warm-up")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dynet-python", metavar="PATH",
                    help="an interpreter with DyNet (dynet38): its agenda as a baseline")
    ap.add_argument("--dynet-mem", default="2048",
                    help="DyNet's memory pool in MB (its autobatching cannot grow it)")
    ap.add_argument("--json", help="write every row here")
    ap.add_argument("--markdown", help="write the tables here as Markdown")
    ap.add_argument("--plot", help="write a figure here (needs matplotlib)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def systems(strategies, fusion):
    """The system specs run.py takes: each strategy fused and/or unfused."""
    out = []
    for s in strategies:
        out += [s] if "on" in fusion else []
        out += [s + UNFUSED] if "off" in fusion else []
    return out


def run_all(a, strategies, fusion, task_names):
    rows = []
    dynet = None
    if a.dynet_python:
        dynet, why = run.find_dynet_python(a.dynet_python)
        if dynet is None:
            print(f"DyNet baseline skipped: {why}", file=sys.stderr)
    specs = systems(strategies, fusion)
    with progress_bar(total=len(task_names) * (a.steps + 1), desc="strategies", unit="step",
                      disable=a.quiet) as bar:
        for t in task_names:
            rows += run.run_task(t, specs, a.batch_size, a.hidden, a.steps, [], a.seed,
                                 progress=bar, variants=(a.variant,), dynet=dynet,
                                 dynet_mem=a.dynet_mem)
    return rows


def summarise(rows):
    """{task: {system: (batches / LB, step time / agenda's, schedule share, passes /
    their LB)}} and the per-system summary {system: (geomean b/LB, geomean time,
    fastest on, near the bound)}."""
    cells = {}
    for t in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == t]
        base = next((r for r in mine if r["system"] == BASE), None)
        ref = base["median_step_s"] if base else min(r["median_step_s"] for r in mine)
        cells[t] = {r["system"]: (r.get("batches_over_lower_bound"), r["median_step_s"] / ref,
                                  r["split_s"]["schedule"] / r["median_step_s"],
                                  r.get("passes_over_lower_bound")) for r in mine}
    names = list(dict.fromkeys(r["system"] for r in rows))
    summary = {}
    for s in names:
        per = [c[s] for c in cells.values() if s in c]
        blb = [p[0] for p in per if p[0] is not None]
        fastest = sum(1 for c in cells.values()
                      if s in c and c[s][1] == min(v[1] for v in c.values()))
        summary[s] = (_geomean(blb), _geomean([p[1] for p in per]), fastest,
                      sum(1 for b in blb if b <= NEAR_BOUND) if blb else None)
    return cells, summary


def _geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def tables(cells, summary, markdown=False):
    """The experiment's tables as lines of text (aligned, or Markdown)."""
    names = list(summary)
    lines = []

    def table(title, head, body):
        lines.append(title)
        if markdown:
            lines.append("")
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
            lines.extend("| " + " | ".join(r) + " |" for r in body)
        else:
            width = [max(len(x) for x in col) for col in zip(head, *body)]
            lines.extend(" ".join(x.ljust(w) if i == 0 else x.rjust(w)
                                  for i, (x, w) in enumerate(zip(r, width))) for r in [head] + body)
        lines.append("")

    table("Batches per step / lower bound", ["workload"] + names,
          [[t] + [_f(c.get(s, (None,))[0], ".2f") for s in names] for t, c in cells.items()])
    table("Kernel passes per step / their lower bound (a fused stage is no pass)",
          ["workload"] + names,
          [[t] + [_f(c[s][3], ".2f") if s in c else "-" for s in names] for t, c in cells.items()])
    table(f"Step time / {BASE}'s (fused); in brackets the share spent scheduling",
          ["workload"] + names,
          [[t] + [f"{c[s][1]:.2f} ({100 * c[s][2]:.0f}%)" if s in c else "-" for s in names]
           for t, c in cells.items()])
    table("Over all workloads", ["system", "b/LB (geomean)", "time (geomean)", "fastest on",
                                 f"b/LB <= {NEAR_BOUND}"],
          [[s, _f(v[0], ".2f"), _f(v[1], ".2f"), str(v[2]), _f(v[3], "d")]
           for s, v in summary.items()])
    return lines


def plot(cells, summary, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s for s in summary if not s.startswith("dynet")]
    work = list(cells)
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.1 * len(work)), 7), squeeze=False)
    width = 0.8 / len(names)
    colours = plt.get_cmap("tab20").colors
    for k, (metric, label) in enumerate(((0, "batches / lower bound"), (1, f"step time / {BASE}"))):
        ax = axes[k][0]
        for i, s in enumerate(names):
            ys = [cells[t].get(s, (None, None))[metric] or 0 for t in work]
            ax.bar([j + i * width for j in range(len(work))], ys, width, label=s,
                   color=colours[i % len(colours)])
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(work))], work, rotation=20)
        ax.set_ylabel(label)
    axes[0][0].legend(fontsize=7, ncol=min(len(names), 6))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    a = parser().parse_args(argv)
    for spec in a.imports:
        run.import_plugin(spec)
    fusion = options.parse_list(a.fusion, ("on", "off"), "--fusion value")
    task_names = tasks.expand(options.parse_list(a.task, tasks.TASKS + tuple(tasks.GROUPS), "task"))
    if a.strategy == "all":          # the reference first, then the others as registered
        strategies = [BASE] + [s for s in dy.available_strategies() if s not in ("none", BASE)]
    else:
        strategies = options.parse_list(a.strategy, list(dy.available_strategies()), "strategy")
    if a.steps < 1:
        raise SystemExit("--steps must be at least 1")
    print(f"machine: {run.machine()['cpu']}; batch {a.batch_size}, hidden {a.hidden}, "
          f"{a.variant} variant, {a.steps} timed steps")
    rows = run_all(a, strategies, fusion, task_names)
    cells, summary = summarise(rows)
    print("\n".join(tables(cells, summary)))
    if a.markdown:
        with open(a.markdown, "w") as fh:
            fh.write("\n".join(tables(cells, summary, markdown=True)))
        print(f"wrote {a.markdown}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"argv": sys.argv[1:] if argv is None else argv, "rows": rows}, fh, indent=1)
        print(f"wrote {a.json}")
    if a.plot:
        plot(cells, summary, a.plot)
        print(f"wrote {a.plot}")
    return rows
