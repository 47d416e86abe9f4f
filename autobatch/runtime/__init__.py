"""What every compiled part runs on: the node and batch structs, op ids, arenas, the
thread pool, random streams and the profile counters. Imports nothing of ours."""
