"""AUTOBATCH_TEST_SPLIT=N runs the suite with N engine threads and every product and
batch split over them however small (dy.set_num_threads, _threads.set_split_thresholds),
so that the op cases, batching and fusion tests check the split paths too:

    AUTOBATCH_TEST_SPLIT=2 pytest -q tests
"""
import os

import autobatch as dy
from autobatch.runtime.threads import set_split_thresholds

if os.environ.get("AUTOBATCH_TEST_SPLIT"):
    dy.set_num_threads(int(os.environ["AUTOBATCH_TEST_SPLIT"]))
    set_split_thresholds(float(os.environ.get("AUTOBATCH_TEST_GEMM_MIN", 0)), int(os.environ.get("AUTOBATCH_TEST_ELEMS_MIN", 0)))
