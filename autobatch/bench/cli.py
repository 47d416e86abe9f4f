"""`python -m autobatch.bench` / `autobatch-bench`: the task benchmark (default),
`micro`, the engine-overhead micro-benchmark, `threads`, inference on two threads,
`strategies`, every strategy on every workload with fusion on and off
(autobatch/bench/experiment.py), or `distributed`, 1 against 2 MPI processes
(autobatch/bench/scaling.py).

Both re-execute themselves with one BLAS thread first; `--native-blas` also unsets
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE so OpenBLAS uses the processor's own kernel.
"""
import sys

from autobatch.bench import blas


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    native = "--native-blas" in args
    blas.reexec_single_threaded(["autobatch.bench"] + args, native=native)
    args = [a for a in args if a != "--native-blas"]
    if args and args[0] == "distributed":
        from autobatch.bench import scaling
        scaling.main(args[1:] + (["--native-blas"] if native else []))
        return 0
    if args and args[0] == "micro":
        from autobatch.bench import micro
        micro.main(args[1:])
        return 0
    if args and args[0] == "strategies":
        from autobatch.bench import experiment
        experiment.main(args[1:])
        return 0
    if args and args[0] == "threads":
        from autobatch.bench import threads
        threads.main(args[1:])
        return 0
    from autobatch.bench import run
    if args and args[0] == "tasks":
        args = args[1:]
    run.main(args, native_blas=native)
    return 0          # the console script passes this to sys.exit


if __name__ == "__main__":
    sys.exit(main())
