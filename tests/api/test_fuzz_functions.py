"""Every public function, called with generated bad arguments in a child process (so a
crash shows as a signal, not as a dead test run): only the library's documented
exception types, never a crash."""
import os
import pathlib
import subprocess
import sys

import autobatch as dy

SUPPORT = pathlib.Path(__file__).resolve().parents[1] / "support"


def test_bad_arguments_never_crash(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(dy.__file__).resolve().parent.parent))
    out = subprocess.run([sys.executable, str(SUPPORT / "fuzz_public_functions.py"), "3", "20261201"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert out.returncode == 0, f"the child died (return code {out.returncode}): {out.stderr[-2000:]}"
    unexpected = [line for line in out.stdout.splitlines() if line.startswith("UNEXPECTED")]
    assert not unexpected, "\n".join(unexpected[:20])
    calls = int(out.stdout.split("calls")[-1])
    assert calls > 10000
