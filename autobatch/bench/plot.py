"""Plots of benchmark rows (matplotlib, the optional `bench` extra).

Top row: instances/second against batch size, one line per strategy and baseline,
one panel per task (log-log, at hidden 256 or the first hidden size run). Middle
row: batches per step of each strategy against the lower bound on batches. When
several hidden sizes were run, a bottom row shows throughput against hidden size
at the largest batch size.
"""
import json
import sys


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    task_names = list(dict.fromkeys(r["task"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    hiddens = sorted({r["hidden"] for r in rows})
    h0 = 256 if 256 in hiddens else hiddens[0]
    n_rows = 3 if len(hiddens) > 1 else 2
    fig, axes = plt.subplots(n_rows, len(task_names), figsize=(4 * len(task_names), 3.4 * n_rows),
                             squeeze=False)
    for j, task in enumerate(task_names):
        ax = axes[0][j]
        for s in systems:
            pts = sorted((r["batch_size"], r["instances_per_s"]) for r in rows
                         if r["task"] == task and r["system"] == s and r["hidden"] == h0)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=s,
                        linestyle="--" if s.startswith("torch") else "-")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{task} (hidden {h0})")
        ax.set_xlabel("batch size")
        ax.set_ylabel("instances / s")
        ax.grid(True, which="both", alpha=0.3)

        ax = axes[1][j]
        ab = [s for s in systems if not s.startswith("torch")]
        sizes = sorted({r["batch_size"] for r in rows if r["task"] == task and r["hidden"] == h0})
        for s in ab:
            pts = sorted((r["batch_size"], r["batches_per_step"]) for r in rows
                         if r["task"] == task and r["system"] == s and r["hidden"] == h0
                         and "batches_per_step" in r)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=s)
        lb = sorted({(r["batch_size"], r["lower_bound_per_step"]) for r in rows
                     if r["task"] == task and r["hidden"] == h0 and "lower_bound_per_step" in r})
        if lb:
            ax.plot(*zip(*lb), color="black", linestyle=":", label="lower bound")
        if len(sizes) > 1:
            ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{task}: batches per step")
        ax.set_xlabel("batch size")
        ax.set_ylabel("batches (kernel launches)")
        ax.grid(True, which="both", alpha=0.3)

        if n_rows == 3:
            ax = axes[2][j]
            b0 = max(r["batch_size"] for r in rows if r["task"] == task)
            for s in systems:
                pts = sorted((r["hidden"], r["instances_per_s"]) for r in rows
                             if r["task"] == task and r["system"] == s and r["batch_size"] == b0)
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=s,
                            linestyle="--" if s.startswith("torch") else "-")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{task} (batch {b0})")
            ax.set_xlabel("hidden size")
            ax.set_ylabel("instances / s")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    axes[1][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    # python -m autobatch.bench.plot results.json out.png
    with open(sys.argv[1]) as fh:
        plot(json.load(fh)["rows"], sys.argv[2])
