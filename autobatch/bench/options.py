"""The command line of the task benchmark (`python -m autobatch.bench [tasks]`,
autobatch/bench/run.py): its options and their help, and the parsing of its lists and
system specs."""
import argparse

import autobatch as dy

from autobatch.bench import tasks


def parser(description):
    """The benchmark's argument parser; `description` (run.py's docstring) heads its
    --help."""
    ap = argparse.ArgumentParser(prog="python -m autobatch.bench", description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="all",
                    help="all, or a comma list of tasks and groups (standard: "
                         + ",".join(tasks.GROUPS["standard"]) + "; literature: "
                         + ",".join(tasks.GROUPS["literature"]) + ")")
    ap.add_argument("--strategy", default="all",
                    help="all (every registered strategy) or a comma list; NAME@N runs a strategy "
                         "on N engine threads (dy.set_num_threads), NAME:unfused with fusion off, "
                         "NAME:nolayout with the memory-layout pass off, "
                         "e.g. agenda,agenda@2,agenda:unfused,agenda:nolayout")
    ap.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE_OR_FILE",
                    help="import this module (or .py file) first, e.g. one that registers a strategy "
                         "with autobatch.register_strategy; repeatable")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--batch-sizes", help="comma list, e.g. 1,4,16,64,256 (scaling run; overrides --batch-size)")
    ap.add_argument("--hidden", default="256", help="hidden/embedding size, or a comma list (e.g. 64,256,1024)")
    ap.add_argument("--steps", type=int, default=5, help="timed minibatches after one warm-up")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plot", help="write a plot here (needs matplotlib)")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch baselines")
    ap.add_argument("--torch", default="eager,batched", help="which PyTorch baselines (eager,batched)")
    ap.add_argument("--variant", default="builder",
                    help="model variant: builder (our fused builders), ops (cells written with "
                         "ops, as DyNet users do) or all")
    ap.add_argument("--dynet", action="store_true",
                    help="DyNet as a baseline on the ops variant (needs --dynet-python, unless "
                         "this interpreter has the dynet38 wheel)")
    ap.add_argument("--dynet-python", metavar="PATH",
                    help="an interpreter with DyNet (dynet38) for the DyNet baseline; implies --dynet")
    ap.add_argument("--dynet-autobatch", default="1",
                    help="DyNet's autobatch setting(s), comma list of 0 and 1 (1: agenda batching)")
    ap.add_argument("--dynet-mem", default="2048", help="DyNet's memory pool in MB (dynet_config mem)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar (one is drawn only on a terminal, with tqdm)")
    ap.add_argument("--profile", action="store_true",
                    help="time the engine's parts too (dy.set_profiling) and print where a step's "
                         "time goes: gemm, gathers, kernels, engine, memory, graph building")
    ap.add_argument("--native-blas", action="store_true",
                    help="unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (handled at re-exec)")
    return ap


def parse_list(s, allowed=None, what="value"):
    """The items of a comma list (`all`: every allowed one); exits naming any item not
    in `allowed` (when given)."""
    if s == "all" and allowed is not None:
        return list(allowed)
    items = [x.strip() for x in s.split(",") if x.strip()]
    if allowed is not None:
        bad = [x for x in items if x not in allowed]
        if bad:
            raise SystemExit(f"unknown {what}: {', '.join(bad)} (choose from {', '.join(allowed)})")
    return items


SUFFIXES = ("unfused", "nolayout")


def parse_system(spec):
    """(strategy, threads, fusion, layout) of a system spec `NAME[@N][:unfused][:nolayout]`:
    `@N` runs on N engine threads (dy.set_num_threads), `:unfused` with fusion off
    (renew_cg(fusion=False)), `:nolayout` with the memory-layout pass off
    (autobatch.engine.layout.set_layout(False))."""
    spec, *suffixes = spec.split(":")
    for suffix in suffixes:
        if suffix not in SUFFIXES:
            raise ValueError(f"unknown suffix :{suffix} in strategy {spec}:{suffix} "
                             f"(only {', '.join(':' + s for s in SUFFIXES)})")
    strategy, _, threads = spec.partition("@")
    return (strategy, int(threads) if threads else 1, "unfused" not in suffixes,
            "nolayout" not in suffixes)


def check_systems(ap, specs):
    """Exit through `ap.error` unless every `NAME[@N][:suffix]` names a registered
    strategy, a thread count and a known suffix."""
    bad = [s for s in specs if "@" in s and not s.partition(":")[0].partition("@")[2].isdigit()]
    if bad:
        ap.error(f"--strategy: threads after @ must be a number: {', '.join(bad)}")
    try:
        names = [parse_system(s)[0] for s in specs]
    except ValueError as e:
        ap.error(f"--strategy: {e}")
    parse_list(",".join(names), list(dy.available_strategies()), "strategy")
