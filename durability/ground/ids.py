"""Validation of identifiers and worktree paths that come from outside.

Standard library only: the hook's fast path imports this.
"""

from __future__ import annotations

import os

# Off the hook's fast path: pathlib and re cost ~4 ms per tool call, so paths
# are handled with os.path here and re is imported where it is needed.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = [
    "BACKENDS",
    "INVALID_RUN",
    "CredentialInURL",
    "backend_choice",
    "call_request_id",
    "find_root_str",
    "find_worktree_root",
    "is_git_root",
    "is_jj_root",
    "is_path",
    "is_valid_id",
    "missing_repository_part",
    "printable",
    "read_worktree_identity",
    "remote_name",
    "remote_url",
    "safe_filename",
    "sha256_hex",
    "validate_count",
    "validate_id",
    "worktree_identity_file",
    "write_worktree_identity",
]

# Opaque ids (Claude Code session ids are UUIDs; engines use their own): a
# letter, digit or underscore first, then a conservative set with no slash, so
# an id can never name a path outside the folder it is joined to.
_ID_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_ID_REST = _ID_FIRST | frozenset(".:@+=-")
_ID_MAX = 200
#: The run a gap is filed under when the run id itself was unusable.
INVALID_RUN = "_invalid"


def is_valid_id(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= _ID_MAX
        and value[0] in _ID_FIRST
        and all(c in _ID_REST for c in value)
    )


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
    if isinstance(value, str):
        digits = value.strip()
        if 0 < len(digits) <= 9 and digits.isascii() and digits.isdigit():
            value = int(digits)
    if not isinstance(value, int) or not minimum <= value < 10**9:
        raise ValueError(f"invalid {what} {value!r}: a whole number >= {minimum}")
    return value


def is_path(value: object) -> bool:
    """Whether ``value`` is an absolute path this system can name: no NUL,
    and any lone surrogates are bytes that are not UTF-8 (``os.fsdecode``'s
    surrogateescape), not a broken JSON escape such as ``\\ud800``."""
    if not isinstance(value, str) or "\x00" in value or not os.path.isabs(value):
        return False
    try:
        os.fsencode(value)
    except UnicodeError:
        return False
    return True


def printable(text: str) -> str:
    """``text`` safe to print and log: a path's bytes that are not UTF-8 as
    ``\\xNN``, any other lone surrogate as ``\\udXXX``, and control
    characters escaped (a file name holding a newline or ESC must not forge an
    output line or drive the terminal)."""
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 hex digest of ``data``, as ``hashlib.sha256(data).hexdigest()``.

    Uses CPython's built-in SHA-256 module when there is one: ``hashlib`` loads
    OpenSSL, about 3 ms of CPU on every hook call (bench/RESULTS.md).  The
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


def call_request_id(run_id: str, node_id: str, iteration: int, attempt: int, call_key: str,
                    event: object) -> str:
    """The request id of one reported tool call: deterministic, so the same
    call reported twice (plugin and settings hook, or SDK and plugin) is a
    replay, not a second row."""
    basis = "\0".join([run_id, node_id, str(iteration), str(attempt), call_key, str(event)])
    # surrogatepass: a call id with a lone surrogate (a broken JSON escape) still
    # hashes, to the same id every time.
    return "hook-" + sha256_hex(basis.encode("utf-8", "surrogatepass"))[:32]


def safe_filename(run_id: str) -> str:
    """A file name for ``run_id``: itself when already safe, else a readable
    stand-in with a hash so that different ids never share a file."""
    import re

    if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,150}", run_id):
        return run_id
    digest = sha256_hex(run_id.encode("utf-8", "surrogatepass"))[:12]
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:60].lstrip(".") or "run"
    return f"{readable}-{digest}"


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


def is_jj_root(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is the root of a jj workspace."""
    dotjj = os.path.join(path, ".jj")
    return os.path.exists(os.path.join(dotjj, "repo")) and os.path.exists(
        os.path.join(dotjj, "working_copy"))


def is_git_root(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is the top of a git working tree: a ``.git`` folder
    with a HEAD, or a ``.git`` file naming one (a linked worktree made by
    ``git worktree add``, or a submodule)."""
    dotgit = os.path.join(path, ".git")
    if os.path.isdir(dotgit):
        return os.path.isfile(os.path.join(dotgit, "HEAD"))
    if not os.path.isfile(dotgit):
        return False
    target = _gitdir_named(dotgit)
    return target is not None and os.path.isfile(os.path.join(target, "HEAD"))


def _gitdir_named(dotgit: str) -> str | None:
    """The git folder a ``.git`` file names (``gitdir: <path>``, relative to
    the file's folder; absolute stays absolute), or None when it names none."""
    try:
        with open(dotgit, encoding="utf-8") as f:
            line = f.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    return os.path.join(os.path.dirname(dotgit), line[len("gitdir:"):].strip())


#: What every git repository folder holds from its creation on and no git or
#: jj command removes (HEAD and config are replaced by a rename, never
#: unlinked): one of them gone means the repository is being taken apart
#: (an ``rm -rf`` under way) or was.
_GIT_DIR_PARTS = ("HEAD", "config", "objects", "refs")


def missing_repository_part(root: str | os.PathLike[str]) -> str | None:
    """What the worktree rooted at ``root`` lacks of its repository (its
    folder, ``.jj/repo``, ``.git/config``...), or None when it is whole.

    A capture, a snapshot ahead or an event barrier must not begin in a
    worktree being deleted: what they would write lands in folders an
    ``rm -rf`` is emptying (its "Directory not empty"), or makes again
    folders it already removed.  A few stats: a jj workspace's ``.jj/repo``
    and ``.jj/working_copy`` and the git store behind it, or the git folder
    (a linked worktree's, and its common one)."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        return "the worktree folder"
    dotjj = os.path.join(root, ".jj")
    repo = os.path.join(dotjj, "repo")
    if os.path.lexists(repo) or os.path.lexists(os.path.join(dotjj, "working_copy")):
        for name in ("repo", "working_copy"):
            if not os.path.exists(os.path.join(dotjj, name)):
                return f".jj/{name}"
        return _missing_in_jj_store(repo)
    return _missing_in_git(os.path.join(root, ".git"), ".git")


def _missing_in_jj_store(repo: str) -> str | None:
    """What the git store behind the jj repository folder ``repo``
    (``.jj/repo``, or the file naming another workspace's) lacks."""
    try:
        if os.path.isfile(repo):
            with open(repo, encoding="utf-8") as f:
                target = f.read(4096).strip()
            repo = os.path.join(os.path.dirname(repo), target)
        store = os.path.join(repo, "store")
        with open(os.path.join(store, "git_target"), encoding="utf-8") as f:
            git = os.path.join(store, f.read(4096).strip())
    except FileNotFoundError:
        # No git_target: a store jj keeps by itself (the jj backend refuses it
        # on its own terms), or taken apart already.
        return None if os.path.isdir(os.path.join(repo, "store")) else ".jj/repo/store"
    except (OSError, UnicodeDecodeError):
        return ".jj/repo/store"
    return _missing_in_git(git, os.path.normpath(git))


def _missing_in_git(path: str, shown: str) -> str | None:
    """What the git folder at ``path`` lacks; a ``.git`` file (a linked
    worktree, a submodule, jj colocated in one) is followed to its git dir
    and that one's common dir."""
    gitdir = common = path
    if not os.path.isdir(path):
        named = _gitdir_named(path)
        if named is None:
            return shown
        gitdir = common = named
        shown = os.path.normpath(gitdir)
        try:
            with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
                common = os.path.join(gitdir, f.read(4096).strip())
        except (OSError, UnicodeDecodeError):
            pass  # a submodule's git dir is whole in itself
    if not os.path.isfile(os.path.join(gitdir, "HEAD")):
        return f"{shown}/HEAD"
    for name in _GIT_DIR_PARTS[1:]:
        if not os.path.exists(os.path.join(common, name)):
            return f"{os.path.normpath(common) if common != gitdir else shown}/{name}"
    return None


def find_worktree_root(
    start: str | os.PathLike[str], backend: str | None = None
) -> tuple[Path, str] | None:
    """The nearest worktree root at or above ``start`` and its backend.

    At each level a jj workspace wins over git (a colocated jj repository is
    captured through jj); ``backend`` restricts the search to one kind.
    """
    found = find_root_str(start, backend)
    if found is None:
        return None
    from pathlib import Path

    return Path(found[0]), found[1]


def find_root_str(
    start: str | os.PathLike[str], backend: str | None = None
) -> tuple[str, str] | None:
    """``find_worktree_root`` with the root as a string (the hook's fast path)."""
    candidate = os.path.realpath(start)
    while True:
        if backend != "git" and is_jj_root(candidate):
            return candidate, "jj"
        if backend != "jj" and is_git_root(candidate):
            return candidate, "git"
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return None
        candidate = parent


# A remote's name: a letter or digit, then letters, digits and . _ - (a git
# remote's usual names; never a path, never an option).
_REMOTE_REST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
#: The URL schemes a remote may use: git runs no command for these (``ext::``
#: and other ``<helper>::`` transports are refused) and sends nothing in the
#: clear (no http://, no git://).
REMOTE_SCHEMES = ("file://", "ssh://", "https://")


def remote_name(value: str) -> str:
    """``value`` if it is a usable remote name, else ``ValueError``."""
    if not (0 < len(value) <= 64 and value[0].isascii() and value[0].isalnum()
            and all(c in _REMOTE_REST for c in value)
            # It is a component of refs here (refs/durability/remotes/NAME/):
            # git refuses one holding "..", ending in "." or ".lock".
            and ".." not in value and not value.endswith((".", ".lock"))):
        raise ValueError(f"invalid remote name {value[:80]!r}: use 1-64 letters, digits and "
                         "_ . -, starting with a letter or digit, no '..', not ending in "
                         "'.' or '.lock'")
    return value


class CredentialInURL(ValueError):
    """A remote URL holds a credential: it would be stored and shown."""


def remote_url(value: str, cwd: str) -> str:
    """``value`` as a remote URL git can push to, else ``ValueError``:
    ``file://``, ``ssh://`` or ``https://`` URLs, ``user@host:path`` (ssh), or
    a local path (made absolute against ``cwd`` and stored as ``file://``).
    A URL holding a credential is ``CredentialInURL``; no message repeats a
    credential (``redact``)."""
    from durability.ground.redact import credential_in_url, redact

    shown = redact(value[:80])
    bad = next((c for c in value if ord(c) < 0x21 or c == "\x7f"), None)
    if not value or bad is not None or value.startswith("-") or len(value) > 2000:
        raise ValueError(f"invalid remote URL {shown!r}: empty, too long, or holding "
                         "spaces, control characters or a leading '-'")
    if "::" in value.split("/", 1)[0]:
        raise ValueError(f"invalid remote URL {shown!r}: <transport>:: URLs run "
                         "programs and are refused")
    if "://" in value and (not value.startswith(REMOTE_SCHEMES) or value.endswith("://")):
        raise ValueError(f"invalid remote URL {shown!r}: use file://, ssh:// or https://")
    if value.startswith(REMOTE_SCHEMES) or (":" in value.split("/", 1)[0]
                                            and not value.startswith((".", "/"))):
        held = credential_in_url(value)
        if held is not None:
            raise CredentialInURL(
                f"the remote URL holds {held}, which would be stored and shown: give the "
                "URL without it and let git's credential helper (git help credential) or "
                "ssh keys supply it")
    if "://" in value:
        return value
    head = value.split("/", 1)[0]
    if ":" in head and not value.startswith((".", "/")):
        return value  # scp-like ssh: [user@]host:path
    from pathlib import Path

    return Path(os.path.abspath(os.path.join(cwd, value))).as_uri()


# -- a worktree's own identity ------------------------------------------------------
#
# A worktree's records are keyed by its machine and path.  So that a worktree
# moved (``mv proj proj2``) is still found, its repository's private folder
# (``.jj/durability``, or the git dir's ``durability``: per workspace, per
# linked worktree) holds a random id and the path its records are under.  A
# file names two lines: the id, then that path.

IDENTITY_FILE = "worktree-id"


def worktree_identity_file(root: str | os.PathLike[str]) -> str | None:
    """Where the worktree rooted at ``root`` keeps its identity; None when it
    has no private folder of ours (not a jj or git root)."""
    root = os.fspath(root)
    if is_jj_root(root):
        return os.path.join(root, ".jj", "durability", IDENTITY_FILE)
    dotgit = os.path.join(root, ".git")
    if os.path.isdir(dotgit):
        return os.path.join(dotgit, "durability", IDENTITY_FILE)
    if not is_git_root(root):
        return None
    with open(dotgit, encoding="utf-8") as f:
        target = os.path.join(root, f.read(4096).strip()[len("gitdir:"):].strip())
    return os.path.join(target, "durability", IDENTITY_FILE)


def read_worktree_identity(root: str | os.PathLike[str]) -> tuple[str, str] | None:
    """``(id, path its records are under)`` of the worktree at ``root``, or
    None when it has none (never captured, or the file is not ours: a
    symlink, unreadable or malformed)."""
    try:
        path = worktree_identity_file(root)
        if path is None:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            data = os.read(fd, 65536)
        finally:
            os.close(fd)
        ident, recorded = data.decode("utf-8", "surrogateescape").split("\n")[:2]
    except (OSError, ValueError):
        return None
    if not is_valid_id(ident) or not os.path.isabs(recorded):
        return None
    return ident, recorded


def write_worktree_identity(root: str | os.PathLike[str], ident: str, recorded: str) -> None:
    """Write the identity of the worktree at ``root`` whole (a temporary file
    renamed over it); ``OSError`` when its folder cannot take it."""
    path = worktree_identity_file(root)
    if path is None:
        raise OSError(f"{os.fspath(root)} is not a jj or git worktree root")
    gone = missing_repository_part(root)
    if gone is not None:  # being deleted: its folders are not made again
        raise OSError(f"{os.fspath(root)} is being deleted ({gone} is gone)")
    try:  # our folder only: never the repository's own, which a delete took
        os.mkdir(os.path.dirname(path), 0o700)
    except FileExistsError:
        pass
    from pathlib import Path

    from durability.ground.fsutil import replace_file

    replace_file(Path(path), f"{ident}\n{recorded}\n".encode("utf-8", "surrogateescape"),
                 mode=0o600)
