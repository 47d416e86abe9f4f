"""File access for every model format: a path or a binary file object read whole
(regular files only, one allocation of the file's size), written atomically (a new file
renamed over the old), and JSON read so that every way it fails is a ModelFileError."""
import io
import json
import os
import stat
import tempfile

from autobatch.errors import ModelFileError


def source(src, what, files=True):
    """(path, None) for a str/bytes/os.PathLike path, (None, src) for a file object.
    Anything else, an int in particular (it would be taken as a file descriptor and
    closed), is a TypeError."""
    if isinstance(src, (str, bytes, os.PathLike)):
        return os.fsdecode(os.fspath(src)), None
    if files and not isinstance(src, (int, float)) and (hasattr(src, "read") or hasattr(src, "write")):
        return None, src
    hint = " (file descriptors are not accepted: pass a path or an open file)" if isinstance(src, int) else ""
    raise TypeError(f"{what}: expected a path{' or a binary file object' if files else ''}, "
                    f"got {type(src).__name__}{hint}")


def label(path, f):
    name = path if path is not None else getattr(f, "name", None)
    return name if isinstance(name, str) else "<file object>"


def _regular_size(fd, label):
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ModelFileError(f"{label}: not a regular file (devices, pipes, sockets and "
                             "directories are refused: a model file is read whole)")
    return st.st_size


def _read_regular(f, fd, label):
    """The rest of a regular file, read with one allocation of its actual size."""
    left = max(_regular_size(fd, label) - f.tell(), 0)
    data = f.read(left + 1)
    if not isinstance(data, bytes):
        raise TypeError(f"{label}: open the file in binary mode ('rb')")
    if len(data) > left:
        raise ModelFileError(f"{label}: the file grew while it was being read")
    return data


def read_all(path, f, label):
    if path is not None:
        # O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused below)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            _regular_size(fd, label)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as fh:
            return _read_regular(fh, fd, label)
    if isinstance(f, io.TextIOBase):
        raise TypeError(f"{label}: open the file in binary mode ('rb')")
    if not callable(getattr(f, "read", None)):
        raise TypeError(f"{label}: expected a path or a readable binary file object")
    try:
        fd = f.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if isinstance(fd, int) and not isinstance(fd, bool):
        return _read_regular(f, fd, label)
    data = f.read()     # an in-memory file (io.BytesIO): its size is already allocated
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"{label}: open the file in binary mode ('rb')")
    return bytes(data)


def write_atomic(fname, data):
    """Write a new file under a temporary name, then rename it: a reader never sees half a
    file. A destination that exists and is not a regular file (/dev/null, a FIFO) is
    written to, never replaced."""
    if os.path.exists(fname) and not os.path.isfile(fname):
        with open(fname, "wb") as f:
            f.write(data)
        return
    directory = os.path.dirname(os.path.abspath(fname))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".autobatch-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, fname)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _unique_keys(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("a key appears twice in one object")
    return d


def read_json(text, label, what):
    """Parse JSON from a file; every way it can fail is a ModelFileError."""
    try:
        return json.loads(text.decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        # ValueError: bad JSON or an integer of thousands of digits; RecursionError: nesting
        raise ModelFileError(f"{label}: corrupt {what}: {type(e).__name__}: {str(e)[:200]}") from None
