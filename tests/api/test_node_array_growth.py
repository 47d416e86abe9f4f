"""Indices, not pointers, across appends (docs/architecture.md): appending a node may
move the graph's node array, so no op may read a node through a pointer taken before
an append. Each program of support/node_growth_programs.py grows a graph past many
reallocations through one kind of append made while an op is built (indexing that
builds several nodes, a Parameters' first node in a graph, the compiled LSTM steps).

The programs run in a child process, so that a crash fails the test instead of ending
the run, once plainly and once with AUTOBATCH_DEBUG_MOVE_ARRAYS=1, under which the node
array moves on every append and the old memory is poisoned: a pointer kept across an
append then reads garbage every time instead of once in many reallocations."""
import os
import pathlib
import subprocess
import sys

import pytest

import autobatch

PROGRAMS = pathlib.Path(__file__).resolve().parents[1] / "support" / "node_growth_programs.py"
# the child imports the autobatch this process imported (the source tree when built in
# place, the installed package otherwise), never the unbuilt sources beside the tests
PACKAGE_PARENT = pathlib.Path(autobatch.__file__).resolve().parents[1]


def run(program, always_move):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_PARENT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               AUTOBATCH_DEBUG_MOVE_ARRAYS="1" if always_move else "0")
    done = subprocess.run([sys.executable, str(PROGRAMS), program], env=env, cwd=PACKAGE_PARENT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, (f"{program} (arrays always move: {always_move}) ended with "
                                  f"{done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout


@pytest.mark.parametrize("program", ["slices", "first_use_of_parameters", "lstms"])
def test_values_do_not_depend_on_where_the_node_array_lies(program):
    plain = run(program, False)
    assert plain.strip()
    assert run(program, True) == plain


def test_twenty_thousand_slices_of_one_input():
    """The minimal-span-parser pattern that crashed: x[:48] in a loop of 20,000."""
    out = run("slices", False).split("\n")
    assert float(out[0]) == sum(range(48))
