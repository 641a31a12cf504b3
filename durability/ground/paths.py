"""Where the toolkit keeps its state, socket and gap spool.

Each location is resolved in one function: an environment variable first, then
the platform default.  Tests point the variables at temporary folders.
Standard library only (``platformdirs`` is imported lazily, off the hook's fast
path).
"""

from __future__ import annotations

import os
import stat

from durability.ground.errors import InsecurePath

# pathlib (~3 ms with urllib.parse and ipaddress) is imported where a Path is
# returned, never on the hook's fast path, which uses ``socket_path_str``.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["ensure_private_dir", "socket_path", "spool_dir", "spool_dir_str", "spool_dirs",
           "state_dir"]


def state_dir(env: Mapping[str, str] = os.environ) -> Path:
    """``$DURABILITY_HOME``, else the platform's user state folder."""
    from pathlib import Path

    if env.get("DURABILITY_HOME"):
        return Path(env["DURABILITY_HOME"]).expanduser().absolute()
    import platformdirs

    return Path(platformdirs.user_state_dir("durability", appauthor=False))


def socket_path(env: Mapping[str, str] = os.environ) -> Path:
    """``$DURABILITY_SOCKET``, else ``service.sock`` in a ``durability/`` folder
    of the user's runtime folder (``$XDG_RUNTIME_DIR``, ``/run/user/UID``), else
    a per-user folder in ``/tmp`` (never ``$TMPDIR``, see ``_tempdir``)."""
    from pathlib import Path

    return Path(socket_path_str(env))


def socket_path_str(env: Mapping[str, str] = os.environ) -> str:
    """``socket_path`` as a string, without importing pathlib."""
    if env.get("DURABILITY_SOCKET"):
        return os.path.abspath(os.path.expanduser(env["DURABILITY_SOCKET"]))
    uid = os.getuid()
    for base in (env.get("XDG_RUNTIME_DIR"), f"/run/user/{uid}"):
        if base and os.path.isdir(base) and _owned_private(base):
            return os.path.join(base, "durability", "service.sock")
    return os.path.join(_tempdir(), f"durability-{uid}", "service.sock")


def spool_dir(env: Mapping[str, str] = os.environ) -> Path:
    """``$DURABILITY_SPOOL_DIR``, else ``spool`` in the state folder.

    Outside every worktree on purpose: a restore must never rewrite the record
    of what failed.  In the state folder by default, not in a temp folder: it
    is private to the user (nobody else can squat its name), it survives a
    reboot (gaps not yet ingested are kept), and it does not move with
    ``$TMPDIR``, which a harness may set differently from the user's shell.
    """
    from pathlib import Path

    if env.get("DURABILITY_SPOOL_DIR"):
        return Path(env["DURABILITY_SPOOL_DIR"]).expanduser().absolute()
    return state_dir(env) / "spool"


def spool_dir_str(env: Mapping[str, str] = os.environ) -> str:
    """``spool_dir`` as a string, without pathlib or platformdirs (the hook's
    pre-call path): platformdirs' user state folder is ``$XDG_STATE_HOME``
    (else ``~/.local/state``) on Linux, ``~/Library/Application Support`` on
    macOS, as ``run-hook.sh`` finds it too."""
    if env.get("DURABILITY_SPOOL_DIR"):
        return os.path.abspath(os.path.expanduser(env["DURABILITY_SPOOL_DIR"]))
    if env.get("DURABILITY_HOME"):
        state = os.path.abspath(os.path.expanduser(env["DURABILITY_HOME"]))
    else:
        import sys

        home = os.path.expanduser("~")
        if sys.platform == "darwin":
            base = os.path.join(home, "Library", "Application Support")
        else:
            base = os.environ.get("XDG_STATE_HOME", "").strip() or \
                os.path.join(home, ".local", "state")
        state = os.path.join(base, "durability")
    return os.path.join(state, "spool")


def spool_dirs(env: Mapping[str, str] = os.environ) -> list[Path]:
    """Every folder a gap may be spooled in, in the order they are tried.

    ``spool_dir`` first; then, when ``DURABILITY_SPOOL_DIR`` names another
    folder, ``spool`` inside the state folder, private to the user, for when
    the first is full, owned by someone else or a symlink.  Writers try them
    in this order (and then the store itself) and readers read them all.
    """
    first = spool_dir(env)
    second = state_dir(env) / "spool"
    return [first] if first == second else [first, second]


def _tempdir() -> str:
    # The fixed /tmp, never $TMPDIR: a shell and a harness (Claude Code sets
    # its own TMPDIR) must find the same socket without sharing an
    # environment.  Used only when there is no private runtime folder.
    return "/tmp"  # noqa: S108 (a per-user 0700 folder inside it, checked by ensure_private_dir)


def _owned_private(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` as a 0700 folder, or check an existing one is ours.

    Refuses a folder reached through a symlink, owned by another user, or
    writable by others: anyone who could write there could plant a socket or
    a spool file.
    """
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise InsecurePath(f"cannot create {path}: {exc.strerror}") from exc
    try:
        st = os.lstat(path)
    except OSError as exc:  # a parent that exists but is not a folder
        raise InsecurePath(f"cannot create {path}: {exc.strerror}") from exc
    if stat.S_ISLNK(st.st_mode):
        raise InsecurePath(f"{path} is a symlink; refusing to use it")
    if not stat.S_ISDIR(st.st_mode):
        raise InsecurePath(f"{path} is not a folder")
    if st.st_uid != os.getuid():
        raise InsecurePath(f"{path} is owned by uid {st.st_uid}, not by you")
    if st.st_mode & stat.S_ISVTX:
        # A sticky folder (/tmp, /var/tmp) is shared by design: as root it is
        # "ours", and tightening it would lock every other user out of it.
        raise InsecurePath(f"{path} is a shared folder (sticky bit); use a folder of your own")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path
