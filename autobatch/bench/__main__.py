"""python -m autobatch.bench [micro|tasks] [options]: see autobatch/bench/cli.py."""
from autobatch.bench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
