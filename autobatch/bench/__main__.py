"""python -m autobatch.bench [micro] [options]: see autobatch/bench/micro.py."""
import sys

from autobatch.bench import blas, micro

if __name__ == "__main__":
    args = sys.argv[1:]
    blas.reexec_single_threaded(["autobatch.bench"] + args)
    if args and args[0] == "micro":
        args = args[1:]
    micro.main(args)
