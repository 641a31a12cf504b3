"""Progress of long work on stderr: click's progress bar, on a terminal only.

The library reports progress through a callback, ``progress(done, total)``
(``backends.Progress``); a command hands in a ``Bar``.  It draws nothing when
stderr is not a terminal or the command prints JSON, and nothing for work too
short to need it (fewer than ``MIN_STEPS`` steps), so piped and scripted
output stays exactly as it was.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

import click

__all__ = ["MIN_STEPS", "Bar"]

#: Work of fewer steps (files) ends before a bar would be read.
MIN_STEPS = 500
#: Redraws per bar at most: a redraw per file would cost more than the file.
_REDRAWS = 200


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
