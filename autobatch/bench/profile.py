"""The bench's --profile view: where a step's time goes, from the engine's own timers
(dy.set_profiling, cg().stats()["profile"]), not from sampling."""
import sys

# the parts of a step in the --profile view (cg().stats()["profile"]), then the update
PROFILE_PARTS = ("build", "schedule", "engine", "memory", "gather", "gemm", "kernels")


def profile_table(rows, out=sys.stdout):
    """The --profile view: where a step's time goes, in ms (medians over the steps)
    and % of the step."""
    rows = [r for r in rows if "profile_s" in r]
    if not rows:
        return
    parts = PROFILE_PARTS + ("update",)
    fmt = "{:<11s} {:<13s} {:<7s}" + " {:>13s}" * (len(parts) + 1)
    print("\nprofile: ms per step (% of the step)", file=out)
    print(fmt.format("task", "system", "var", *parts, "step"), file=out)
    for r in rows:
        p = dict(r["profile_s"], update=r["split_s"]["update"])
        total = r["median_step_s"]
        print(fmt.format(r["task"], r["system"], r.get("variant", "-"),
                         *(f"{p[k] * 1e3:.1f} ({100 * p[k] / total:.0f}%)" for k in parts),
                         f"{total * 1e3:.1f}"), file=out)
    print("build = the user's Python code recording nodes (shapes, signatures); schedule = "
          "choosing batches; engine = the rest of forward and backward outside kernels "
          "(bookkeeping, backward's walk); memory = assigning and zeroing gradient memory; "
          "gather = copying operands together and gradients back; gemm = BLAS calls of the "
          "products; kernels = every other kernel (elementwise, softmax, lookups ...); "
          "update = the trainer. Timers inside the engine (dy.set_profiling), not sampling.",
          file=out)
