"""Validation of identifiers and worktree paths that come from outside.

Standard library only: the hook's fast path imports this.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

__all__ = [
    "INVALID_RUN",
    "find_jj_root",
    "is_valid_id",
    "safe_filename",
    "validate_count",
    "validate_id",
]

# Opaque ids (Claude Code session ids are UUIDs; engines use their own): a
# letter, digit or underscore first, then a conservative set with no slash, so
# an id can never name a path outside the folder it is joined to.
_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+=-]{0,199}")
#: The run a gap is filed under when the run id itself was unusable.
INVALID_RUN = "_invalid"


def is_valid_id(value: object) -> bool:
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def validate_id(value: object, what: str) -> str:
    """Return ``value`` if it is a usable id, else raise ``ValueError``."""
    if not is_valid_id(value):
        shown = repr(value)[:80]
        raise ValueError(
            f"invalid {what} {shown}: use 1-200 of letters, digits and _ . : @ + = -, "
            "not starting with . : @ + = -"
        )
    assert isinstance(value, str)
    return value


def validate_count(value: object, what: str, minimum: int) -> int:
    """An iteration (>= 0) or attempt (>= 1) number, from an int or a string."""
    if isinstance(value, bool):
        raise ValueError(f"invalid {what} {value!r}")
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value.strip()):
        value = int(value.strip())
    if not isinstance(value, int) or not minimum <= value < 10**9:
        raise ValueError(f"invalid {what} {value!r}: a whole number >= {minimum}")
    return value


def safe_filename(run_id: str) -> str:
    """A file name for ``run_id``: itself when already safe, else a readable
    stand-in with a hash so that different ids never share a file."""
    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,150}", run_id):
        return run_id
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:60].lstrip(".") or "run"
    return f"{readable}-{digest}"


def find_jj_root(start: str | os.PathLike[str]) -> Path | None:
    """The jj workspace root containing ``start`` (a folder holding ``.jj/``)."""
    path = Path(os.path.realpath(start))
    for candidate in (path, *path.parents):
        if (candidate / ".jj" / "repo").exists() and (candidate / ".jj" / "working_copy").exists():
            return candidate
    return None
