"""Validation of identifiers and worktree paths that come from outside.

Standard library only: the hook's fast path imports this.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "BACKENDS",
    "INVALID_RUN",
    "backend_choice",
    "find_jj_root",
    "find_worktree_root",
    "is_git_root",
    "is_jj_root",
    "is_valid_id",
    "safe_filename",
    "sha256_hex",
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


def sha256_hex(data: bytes) -> str:
    """The SHA-256 hex digest of ``data``, as ``hashlib.sha256(data).hexdigest()``.

    Uses CPython's built-in SHA-256 module when there is one: ``hashlib`` loads
    OpenSSL, about 3 ms of CPU on every hook call (docs/PERFORMANCE.md).  The
    module is ``_sha256`` up to CPython 3.11 and ``_sha2`` from 3.12.
    """
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            from hashlib import sha256
    return str(sha256(data).hexdigest())


def safe_filename(run_id: str) -> str:
    """A file name for ``run_id``: itself when already safe, else a readable
    stand-in with a hash so that different ids never share a file."""
    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,150}", run_id):
        return run_id
    digest = sha256_hex(run_id.encode("utf-8", "surrogatepass"))[:12]
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:60].lstrip(".") or "run"
    return f"{readable}-{digest}"


def find_jj_root(start: str | os.PathLike[str]) -> Path | None:
    """The jj workspace root containing ``start`` (a folder holding ``.jj/``)."""
    found = find_worktree_root(start, "jj")
    return found[0] if found else None


#: The capture backends, by the name ``DURABILITY_BACKEND`` may force.
BACKENDS = ("jj", "git")


def backend_choice(env: Mapping[str, str]) -> str | None:
    """``DURABILITY_BACKEND`` (``jj`` or ``git``), or None to choose per worktree."""
    value = env.get("DURABILITY_BACKEND", "").strip()
    if not value:
        return None
    if value not in BACKENDS:
        raise ValueError(f"DURABILITY_BACKEND={value[:40]!r} must be jj or git")
    return value


def is_jj_root(path: Path) -> bool:
    """Whether ``path`` is the root of a jj workspace."""
    return (path / ".jj" / "repo").exists() and (path / ".jj" / "working_copy").exists()


def is_git_root(path: Path) -> bool:
    """Whether ``path`` is the top of a git working tree: a ``.git`` folder
    with a HEAD, or a ``.git`` file naming one (a linked worktree made by
    ``git worktree add``, or a submodule)."""
    dotgit = path / ".git"
    if dotgit.is_dir():
        return (dotgit / "HEAD").is_file()
    if not dotgit.is_file():
        return False
    try:
        with open(dotgit, encoding="utf-8") as f:
            line = f.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return False
    if not line.startswith("gitdir:"):
        return False
    target = Path(line[len("gitdir:"):].strip())
    return (target if target.is_absolute() else path / target).joinpath("HEAD").is_file()


def find_worktree_root(
    start: str | os.PathLike[str], backend: str | None = None
) -> tuple[Path, str] | None:
    """The nearest worktree root at or above ``start`` and its backend.

    At each level a jj workspace wins over git (a colocated jj repository is
    captured through jj); ``backend`` restricts the search to one kind.
    """
    path = Path(os.path.realpath(start))
    for candidate in (path, *path.parents):
        if backend != "git" and is_jj_root(candidate):
            return candidate, "jj"
        if backend != "jj" and is_git_root(candidate):
            return candidate, "git"
    return None
