"""``durability browse``: sessions, their checkpoints, what each changed, and
a restore behind a confirmation, in the terminal (docs/how-to/inspect.md).

- ``model.py``: what the browser shows, read from the store and the
  checkpoints' repositories through ``inspect`` (no Textual: testable and
  importable without the ``tui`` extra);
- ``app.py``: the Textual application (imports Textual: load it only
  through ``load_app``, which turns a missing Textual into
  ``missing-extra``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from durability.ground.errors import DurabilityError

if TYPE_CHECKING:
    from durability.browse.app import BrowseApp

__all__ = ["MissingExtra", "load_app"]

#: How to get the browser when Textual is missing.
INSTALL_HINT = "pip install 'worktree-durability[tui]'"


class MissingExtra(DurabilityError):
    code = "missing-extra"


def load_app() -> type[BrowseApp]:
    """The browser's App class, or ``missing-extra`` naming the extra."""
    try:
        from durability.browse.app import BrowseApp
    except ImportError as exc:
        if (exc.name or "").split(".")[0] == "durability":
            raise  # our own code failed to import: a bug, not a missing extra
        raise MissingExtra(f"the browser needs Textual (the tui extra): {INSTALL_HINT}") from None
    return BrowseApp
