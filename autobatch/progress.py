"""Progress of long runs (the bench, the examples' training loops): a tqdm bar when tqdm
is installed and the output is a terminal; otherwise nothing at all, so that logs, pipes
and CI output stay clean. tqdm is optional (``pip install tqdm``, or the bench extra).

Example::

    from autobatch.progress import progress

    for batch in progress(batches, desc=f"epoch {epoch}", unit="batch"):
        ...                                   # a bar on a terminal, silent in a log
"""
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any, Generic, TypeVar

_T = TypeVar("_T")


class Quiet(Generic[_T]):
    """The stand-in when there is no bar to draw: the methods of tqdm that this project
    uses, doing nothing, and iteration over the wrapped iterable unchanged."""

    def __init__(self, iterable: Iterable[_T] | None = None) -> None:
        self.iterable = iterable

    def __iter__(self) -> Iterator[_T]:
        return iter(self.iterable if self.iterable is not None else ())

    def update(self, n: float = 1) -> None:
        """Count ``n`` more steps done (nothing to show)."""

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        """Set the bar's label (nothing to show)."""

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """Set the text after the bar (nothing to show)."""

    def close(self) -> None:
        """End the bar (nothing to end)."""

    def __enter__(self) -> "Quiet[_T]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tqdm() -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


def progress(iterable: Iterable[_T] | None = None, *, total: float | None = None,
             desc: str | None = None, unit: str = "it", file: IO[str] | None = None,
             leave: bool = False, disable: bool = False) -> "Quiet[_T]":
    """``tqdm(iterable, ...)`` drawn on ``file`` (default: standard error) when tqdm is
    installed and ``file`` is a terminal, else a silent ``Quiet`` with the same methods
    (``update``, ``set_description``, ``set_postfix_str``, ``close``, iteration).
    ``disable=True`` (a ``--quiet`` flag) always gives the silent one. ``leave=False``
    clears the bar when it closes, so lines printed after it stay tidy."""
    file = sys.stderr if file is None else file
    tqdm = _tqdm()
    isatty = getattr(file, "isatty", None)
    if disable or tqdm is None or not callable(isatty) or not isatty():
        return Quiet(iterable)
    # a tqdm has every method of Quiet: typed as Quiet, so callers use only those
    bar: Quiet[_T] = tqdm(iterable, total=total, desc=desc, unit=unit, file=file, leave=leave,
                          dynamic_ncols=True)
    return bar
