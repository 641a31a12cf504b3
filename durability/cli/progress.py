"""Progress of long work on stderr: click's progress bar, on a terminal only.

The library reports progress through a callback, ``progress(done, total)``
(``backends.Progress``); a command hands in a ``Bar``.  It draws nothing when
stderr is not a terminal or the command prints JSON, and nothing for work too
short to need it (fewer than ``MIN_STEPS`` steps), so piped and scripted
output stays exactly as it was.

Work whose size is not known until it ends (a capture: jj or libgit2 walks
the tree and says nothing until done; hashing a worktree for ``diff
--worktree``) gets a ``Spinner`` instead: click's bar without a length (a
moving mark) and the seconds spent, drawn only once the work has run for
``SPINNER_DELAY_S``, under the same rules.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from types import TracebackType
from typing import Any

import click

__all__ = ["MIN_STEPS", "SPINNER_DELAY_S", "Bar", "Spinner"]

#: Work of fewer steps (files) ends before a bar would be read.
MIN_STEPS = 500
#: Redraws per bar at most: a redraw per file would cost more than the file.
_REDRAWS = 200
#: Work shorter than this ends before a spinner would be read.
SPINNER_DELAY_S = 0.5
#: A spinner's redraw interval.
_TICK_S = 0.1


class Bar:
    """A progress callback drawing one click progress bar on stderr.

    Use as a context manager, so the bar's line is finished even when the
    work fails partway."""

    def __init__(self, label: str, *, quiet: bool = False) -> None:
        self.label = label
        self.enabled = not quiet and sys.stderr.isatty()
        self._bar: Any = None  # click's ProgressBar, made at the first step
        self._told = 0  # steps handed to the bar so far

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total < MIN_STEPS:
            return
        if self._bar is None:
            self._bar = click.progressbar(length=total, label=self.label, file=sys.stderr,
                                          update_min_steps=max(1, total // _REDRAWS),
                                          show_pos=True, show_percent=True)
            self._bar.__enter__()
        self._bar.update(done - self._told)
        self._told = done

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(kind, exc, tb)
            self._bar = None


class Spinner:
    """A line on stderr for work of unknown size: click's bar without a
    length, and the seconds spent, redrawn by a thread of its own from
    ``delay_s`` on until the block ends (its line is then finished)."""

    def __init__(self, label: str, *, quiet: bool = False,
                 delay_s: float = SPINNER_DELAY_S) -> None:
        self.label = label
        self.enabled = not quiet and sys.stderr.isatty()
        self._delay_s = delay_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Spinner:
        if self.enabled:
            self._thread = threading.Thread(target=self._draw, name="durability-spinner",
                                             daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _draw(self) -> None:
        # Every use of the bar is in this thread, so no lock is needed.
        if self._stop.wait(self._delay_s):
            return
        start = time.monotonic()
        with click.progressbar(itertools.count(), label=self.label, file=sys.stderr,
                               show_pos=False, show_percent=False, show_eta=False,
                               item_show_func=lambda _: f"{time.monotonic() - start:.0f}s"
                               ) as bar:
            while not self._stop.wait(_TICK_S):
                bar.update(1)
