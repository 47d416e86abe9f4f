"""The engine's default thread count (runtime/thread_policy.py): the cores this process
may run on, shared among the MPI ranks of a node, capped at 64; AUTOBATCH_NUM_THREADS
and set_num_threads override it; the report says how the count was chosen; idle
workers do not burn the CPU."""
import multiprocessing
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import autobatch as dy
from autobatch import report
from autobatch.kernels.gemm import gemm_for_tests
from autobatch.runtime import thread_policy
from autobatch.runtime.threads import set_split_thresholds, threads_reason

linux_only = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="affinity masks")


@pytest.fixture
def restore_threads():
    before = dy.get_num_threads()
    yield
    dy.set_num_threads(before)


@pytest.fixture
def no_launcher(monkeypatch):
    for var in thread_policy.LOCAL_RANKS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv(thread_policy.ENV_VAR, raising=False)


def run_python(code, tmp_path, **env):
    """stdout of `code` in a fresh interpreter that imports this autobatch."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(dy.__file__)))
    full = {k: v for k, v in os.environ.items()
            if k != thread_policy.ENV_VAR and k not in thread_policy.LOCAL_RANKS_VARS}
    full.update(env, PYTHONPATH=package_parent)
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# -- the policy, with the machine's answers replaced

@pytest.mark.parametrize("cores,machine,ranks,want", [
    (2, 2, 1, 2), (1, 2, 1, 1), (8, 8, 1, 8), (100, 100, 1, 64),
    (2, 2, 2, 1),          # two unbound ranks on a two-core node: one thread each
    (8, 8, 2, 4), (8, 8, 3, 2), (2, 2, 4, 1),
    (1, 2, 2, 1),          # a rank bound to one core by its launcher
    (4, 8, 2, 4),          # ... to four of eight: it uses its four
])
def test_the_default_counts_the_cores_shared_by_the_local_ranks(monkeypatch, no_launcher, cores,
                                                                 machine, ranks, want):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: machine)
    if ranks > 1:
        monkeypatch.setenv("MPI_LOCALNRANKS", str(ranks))
    n, why = thread_policy.default_threads()
    assert n == want
    assert why.startswith("default: ")
    assert ("MPI ranks" in why) == (ranks > 1 and cores >= machine)
    assert ("capped at 64" in why) == (cores > 64 and ranks == 1)


@pytest.mark.parametrize("var", thread_policy.LOCAL_RANKS_VARS)
def test_every_launchers_local_rank_count_is_read(monkeypatch, no_launcher, var):
    monkeypatch.setenv(var, "2")
    assert thread_policy.local_ranks() == (2, var)


def test_the_environment_overrides_the_default(monkeypatch, no_launcher):
    monkeypatch.setenv(thread_policy.ENV_VAR, "3")
    assert thread_policy.from_environment() == (3, "AUTOBATCH_NUM_THREADS=3")
    for value in ("auto", "", " auto "):
        monkeypatch.setenv(thread_policy.ENV_VAR, value)
        assert thread_policy.from_environment() == thread_policy.default_threads()
    for bad in ("0", "-2", "two", "2.5"):
        monkeypatch.setenv(thread_policy.ENV_VAR, bad)
        with pytest.raises(ValueError, match="AUTOBATCH_NUM_THREADS must be a positive integer or auto"):
            thread_policy.from_environment()


# -- at import, in a fresh process

@linux_only
def test_a_process_uses_the_cores_of_its_affinity_mask(tmp_path):
    code = ("import os, sys; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "import autobatch as dy; print(dy.get_num_threads()); print(dy.config_info()['threads_reason'])")
    n, why = run_python(code, tmp_path).splitlines()
    assert n == "1" and why == "default: the 1 core this process may run on (os.sched_getaffinity)"
    code = "import os, autobatch as dy; print(dy.get_num_threads(), min(len(os.sched_getaffinity(0)), 64))"
    got, cores = run_python(code, tmp_path).split()
    assert got == cores


def test_the_environment_and_the_mpi_launcher_choose_at_import(tmp_path):
    code = "import autobatch as dy; print(dy.get_num_threads()); print(dy.config_info()['threads_reason'])"
    assert run_python(code, tmp_path, AUTOBATCH_NUM_THREADS="3").splitlines() == \
        ["3", "AUTOBATCH_NUM_THREADS=3"]
    n, why = run_python(code, tmp_path, OMPI_COMM_WORLD_LOCAL_SIZE="64").splitlines()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cores >= os.cpu_count():        # this test's own mask is the whole machine
        assert n == "1" and "shared by 64 MPI ranks on this node (OMPI_COMM_WORLD_LOCAL_SIZE)" in why


# -- set_num_threads and the report

def worker_threads():
    """Threads of this process (Linux: /proc/self/task)."""
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="/proc")
def test_one_thread_starts_no_worker_and_auto_restores_the_default(restore_threads):
    dy.set_num_threads(3)
    three = worker_threads()
    dy.set_num_threads(1)
    assert worker_threads() == three - 2          # one thread: the caller alone, as before
    assert dy.get_num_threads() == 1 and threads_reason() == "set_num_threads(1)"
    dy.set_num_threads("auto")
    assert (dy.get_num_threads(), threads_reason()) == thread_policy.default_threads()
    with pytest.raises(ValueError):
        dy.set_num_threads("many")


def test_the_report_says_how_the_count_was_chosen(restore_threads):
    dy.set_num_threads(2)
    assert "engine threads:   2  (set_num_threads(2); AUTOBATCH_NUM_THREADS" in report.format_config()
    dy.set_num_threads("auto")
    n, why = thread_policy.default_threads()
    assert f"engine threads:   {n}  ({why};" in report.format_config()
    assert dy.config_info()["threads_reason"] == why


def in_forked_child(target):
    """What target(queue) puts on the queue, run in a forked child."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=target, args=(queue,))
    p.start()
    p.join(60)
    return queue.get(timeout=30)


def _child_reason(queue):
    before = (dy.get_num_threads(), threads_reason())
    dy.set_num_threads(2)           # a child may start workers of its own
    old = set_split_thresholds(0, 0)
    A = np.asfortranarray(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 7)
    C = np.zeros((64, 64), np.float32, order="F")
    gemm_for_tests("N", "N", 1.0, A, A, 0.0, C)
    set_split_thresholds(*old)
    queue.put((before, dy.get_num_threads(), bool(np.array_equal(C, A @ A))))


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_child_reports_that_it_has_no_workers(restore_threads):
    dy.set_num_threads(2)
    before, after, right = in_forked_child(_child_reason)
    assert before == (1, "a forked child: the pool's workers stayed in the parent process")
    assert after == 2 and right


def _child_reason_only(queue):
    queue.put((dy.get_num_threads(), threads_reason()))


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_child_forked_from_one_thread_keeps_the_reason(restore_threads):
    dy.set_num_threads(1)
    assert in_forked_child(_child_reason_only) == (1, "set_num_threads(1)")


def blocked_signals(tid):
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("SigBlk:"):
                return int(line.split()[1], 16)
    raise AssertionError("no SigBlk line")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="/proc")
def test_workers_leave_the_processs_signals_to_the_main_thread(restore_threads, alarm):
    """A signal for the process (Ctrl-C, a timer) must reach a thread that runs Python's
    handlers, so that it interrupts the main thread's blocking calls: the workers block
    every signal."""
    import signal
    dy.set_num_threads(1)
    alone = set(os.listdir("/proc/self/task"))
    dy.set_num_threads(3)
    workers = set(os.listdir("/proc/self/task")) - alone
    assert len(workers) == 2
    for tid in workers:
        mask = blocked_signals(tid)
        for sig in (signal.SIGINT, signal.SIGALRM, signal.SIGTERM, signal.SIGUSR1):
            assert mask & (1 << (sig - 1)), (tid, sig, hex(mask))
    assert not blocked_signals(threading_native_id()) & (1 << (signal.SIGINT - 1))
    for _ in range(5):              # the timer's KeyboardInterrupt ends the sleep at once
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            alarm(0.01)
            time.sleep(10)
        assert time.perf_counter() - t0 < 5


def threading_native_id():
    import threading
    return threading.get_native_id()


# -- waiting workers

def test_idle_workers_sleep_instead_of_spinning(restore_threads):
    """After a split product the workers poll for a fraction of a millisecond, then
    sleep: over an idle half second the process uses far less CPU than wall time."""
    dy.set_num_threads(2)
    old = set_split_thresholds(0, 0)
    try:
        rng = np.random.default_rng(0)
        A = np.asfortranarray(rng.standard_normal((256, 256), dtype=np.float32))
        C = np.zeros((256, 256), np.float32, order="F")
        for _ in range(20):
            gemm_for_tests("N", "N", 1.0, A, A, 0.0, C)
    finally:
        set_split_thresholds(*old)
    cpu, wall = time.process_time(), time.perf_counter()
    time.sleep(0.5)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert cpu < 0.1 * wall, f"{cpu:.3f} s of CPU in {wall:.3f} s idle"


BACKOFF_CHILD = """
import os, numpy as np, autobatch as dy
from autobatch.kernels.gemm import gemm_for_tests
from autobatch.runtime.threads import pool_statistics, set_split_thresholds
rng = np.random.default_rng(0)
A = np.asfortranarray(rng.standard_normal((256, 256), dtype=np.float32))
def products():
    C = np.zeros((256, 256), np.float32, order="F")
    for _ in range(300):
        gemm_for_tests("N", "N", 1.0, A, A, 0.0, C)
    return C
set_split_thresholds(0, 0)
dy.set_num_threads(2)
free = products()
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
dy.set_num_threads(2)            # the worker starts on the caller's one core
pool_statistics(reset=True)
busy = products()
s = pool_statistics()
assert np.array_equal(busy, free), "backing off changed the numbers"
print(s["jobs"], s["backed_off"], s["missed"] + s["late"])
"""


@linux_only
def test_a_worker_without_a_core_of_its_own_makes_the_caller_back_off(tmp_path):
    """Two threads on one core (the worker's core is busy, here with the caller): most
    products find the worker absent and run on the caller alone, with the numbers of
    the split (the same blocks)."""
    jobs, backed_off, lost = map(int, run_python(BACKOFF_CHILD, tmp_path).split())
    assert jobs == 300
    assert lost > 0 and backed_off > jobs // 2, (jobs, backed_off, lost)


def test_pool_statistics_count_the_jobs(restore_threads):
    from autobatch.runtime.threads import pool_statistics
    dy.set_num_threads(2)
    old = set_split_thresholds(0, 0)
    try:
        pool_statistics(reset=True)
        A = np.ones((64, 64), np.float32, order="F")
        C = np.zeros((64, 64), np.float32, order="F")
        for _ in range(10):
            gemm_for_tests("N", "N", 1.0, A, A, 0.0, C)
        s = pool_statistics(reset=True)
    finally:
        set_split_thresholds(*old)
    assert s["jobs"] == 10
    # a job runs alone (busy, backed off) or is offered to the workers, who take a
    # part (shared), are late for theirs, or miss it
    assert s["busy"] + s["backed_off"] + s["shared"] <= 10
    assert s["late"] <= s["shared"] and s["missed"] + s["shared"] <= 10
    assert pool_statistics()["jobs"] == 0
    np.testing.assert_array_equal(C, np.full((64, 64), 64, np.float32))
