"""python -m autobatch: print what this installation runs on (autobatch.report)."""
from autobatch.report import show_config

show_config()
