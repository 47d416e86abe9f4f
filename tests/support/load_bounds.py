"""A load's time and memory, bounded by a multiple of its files' sizes, measured so that
a busy shared machine does not make the bound fail:

- memory: the peak of what Python and numpy allocate (tracemalloc) during the load;
- time: the CPU time of the calling thread (other processes do not add to it), and a
  wall-clock watchdog 20 times looser that stops a load which would never return (a
  `LoadTooSlow`, which is not an Exception, so no loader turns it into a refusal).

The multiples are generous for what a load really needs (about 15 bytes of memory per
byte of a file of many tiny parameters, 2 microseconds of CPU per byte) and far
below what expanding a file's references, or building what its spec declares, costs."""
import contextlib
import signal
import time
import tracemalloc

MEMORY_PER_BYTE = 64
MEMORY_SLACK = 1 << 20          # bytes
CPU_PER_BYTE = 5e-6             # seconds
CPU_SLACK = 0.5                 # seconds


class LoadTooSlow(BaseException):
    """Raised inside a load that ran past its watchdog."""


def _too_slow(signum, frame):
    raise LoadTooSlow("the load ran past its watchdog")


@contextlib.contextmanager
def bounded(file_bytes, what=""):
    """Run the body (one load of files of `file_bytes` bytes in all) and fail if it
    takes more memory or CPU time than the bounds allow."""
    memory = MEMORY_PER_BYTE * file_bytes + MEMORY_SLACK
    cpu = CPU_SLACK + CPU_PER_BYTE * file_bytes
    old = signal.signal(signal.SIGALRM, _too_slow)
    tracemalloc.start()
    start = time.thread_time()
    signal.setitimer(signal.ITIMER_REAL, 20 * cpu)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        used = time.thread_time() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        signal.signal(signal.SIGALRM, old)
    assert peak <= memory, f"{what}: {peak} bytes allocated for {file_bytes} bytes of files"
    assert used <= cpu, f"{what}: {used:.2f} s of CPU for {file_bytes} bytes of files"
