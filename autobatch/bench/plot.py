"""Plots of benchmark rows (matplotlib, the optional `bench` extra).

One column per task. When several batch sizes were run: instances/second against
batch size (one line per strategy and baseline, at hidden 256 or the first hidden
size), and batches per step of each strategy against the lower bound. When several
hidden sizes were run: instances/second against hidden size at the largest batch
size. A run of one point draws the batch-size rows.
"""
import json
import sys


def _lines(ax, rows, task, systems, x_key, y_key, fixed):
    """One line per system: y against x over the rows of `task` matching `fixed`."""
    for s in systems:
        pts = sorted((r[x_key], r[y_key]) for r in rows
                     if r["task"] == task and r["system"] == s and y_key in r
                     and all(r[k] == v for k, v in fixed.items()))
        if pts:
            ax.plot(*zip(*pts), marker="o", label=s,
                    linestyle="--" if s.startswith("torch") else "-")


def _axes(ax, title, xlabel, ylabel, log_x):
    if log_x:
        ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    task_names = list(dict.fromkeys(r["task"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    engine = [s for s in systems if not s.startswith("torch")]
    hiddens = sorted({r["hidden"] for r in rows})
    sizes = sorted({r["batch_size"] for r in rows})
    h0 = 256 if 256 in hiddens else hiddens[0]
    panels = []
    if len(sizes) > 1 or len(hiddens) == 1:
        panels += ["throughput-batch", "batches"]
    if len(hiddens) > 1:
        panels += ["throughput-hidden"]
    fig, axes = plt.subplots(len(panels), len(task_names),
                             figsize=(4 * len(task_names), 3.4 * len(panels)), squeeze=False)
    for i, panel in enumerate(panels):
        for j, task in enumerate(task_names):
            ax = axes[i][j]
            if panel == "throughput-batch":
                _lines(ax, rows, task, systems, "batch_size", "instances_per_s", {"hidden": h0})
                _axes(ax, f"{task} (hidden {h0})", "batch size", "instances / s", len(sizes) > 1)
            elif panel == "batches":
                _lines(ax, rows, task, engine, "batch_size", "batches_per_step", {"hidden": h0})
                lb = sorted({(r["batch_size"], r["lower_bound_per_step"]) for r in rows
                             if r["task"] == task and r["hidden"] == h0 and "lower_bound_per_step" in r})
                if lb:
                    ax.plot(*zip(*lb), color="black", linestyle=":", label="lower bound")
                _axes(ax, f"{task}: batches per step", "batch size", "batches (kernel launches)",
                      len(sizes) > 1)
            else:
                b0 = max(r["batch_size"] for r in rows if r["task"] == task)
                _lines(ax, rows, task, systems, "hidden", "instances_per_s", {"batch_size": b0})
                _axes(ax, f"{task} (batch {b0})", "hidden size", "instances / s", True)
        axes[i][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    # python -m autobatch.bench.plot results.json out.png
    with open(sys.argv[1]) as fh:
        plot(json.load(fh)["rows"], sys.argv[2])
