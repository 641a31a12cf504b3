"""The hook starts the snapshot service when none answers, so the fast path
is the default after the first tool call, with no step for the user.

Once, for many hooks at once: the hook that takes the start lock (a
non-blocking ``flock`` on ``autostart-<hash of the socket>.lock`` in the
state folder: one per socket, so a service of this state folder on another
socket, another ``XDG_RUNTIME_DIR`` or ``DURABILITY_SOCKET``, never stops a
hook from starting one on its own) spawns a
detached ``durability serve`` that *inherits the locked descriptor*: a flock
belongs to the open file, so the lock stays held for as long as that service
lives, and every other hook (16 concurrent first calls, or later calls while
it is still binding its socket) finds it taken and starts nothing.  When the
service ends, the kernel drops the lock with its last descriptor.

Standard library only, and no ``subprocess`` (it imports selectors and
threading, milliseconds of every call that lands here): ``os.posix_spawn``
with ``setsid``.  The hook does not wait for the service; it captures this
call in process as before.  ``DURABILITY_AUTOSTART=0`` turns it off.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["enabled", "lock_path", "start_service", "started"]


def enabled(env: Mapping[str, str]) -> bool:
    return env.get("DURABILITY_AUTOSTART", "1").strip().lower() not in ("0", "false", "no", "off")


def start_service(env: Mapping[str, str], warm: str | None = None) -> int | None:
    """Spawn a detached service unless one is starting or running; its pid,
    or None when this hook started nothing (lock taken, or it could not).
    ``warm``: the worktree this hook captured, for the service to watch and
    scan as soon as it serves (``serve --warm``), so the next call's capture
    is an informed one rather than a whole-tree scan of its own."""
    import fcntl

    from durability.ground import paths

    state = str(paths.state_dir(env))
    try:
        paths.ensure_private_dir(paths.state_dir(env))
        fd = os.open(lock_path(state, paths.socket_path_str(env)),
                     os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except Exception:  # an unusable state folder: no autostart, the capture goes on
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # another hook's service holds it: starting or running
        if _tried_lately(fd):
            return None  # a service started a moment ago did not stay: not every call
        return _spawn(env, fd, os.path.join(state, "service.log"), warm)
    finally:
        os.close(fd)  # ours only: the child's inherited copy keeps the lock


def lock_path(state_dir: str, socket_path: str) -> str:
    """The start lock (and back-off mark) of the service on ``socket_path``."""
    import hashlib

    digest = hashlib.sha256(os.fsencode(socket_path)).hexdigest()[:16]
    return os.path.join(state_dir, f"autostart-{digest}.lock")


def started(state_dir: object, socket_path: str) -> None:
    """Called by a service once it serves on ``socket_path``: clears the mark
    of a tried start, so the next hook that finds no service (this one killed
    later) starts one at once.  Only a start that never got this far backs off."""
    try:
        fd = os.open(lock_path(str(state_dir), socket_path),
                     os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # no hook ever started one: nothing to clear
    try:
        os.ftruncate(fd, 0)
    except OSError:
        pass  # the mark stays: at worst the next autostart waits BACKOFF_S
    finally:
        os.close(fd)


def _tried_lately(fd: int) -> bool:
    """Whether a start was tried within ``BACKOFF_S`` and its service never
    reported that it serves (``started``); marks this try.  A service that
    cannot start (a squatted socket folder, a broken install) must not cost a
    spawn on every tool call."""
    import time

    try:
        last = os.fstat(fd).st_mtime
        now = time.time()
        if 0 <= now - last < BACKOFF_S and os.fstat(fd).st_size > 0:
            return True
        os.ftruncate(fd, 0)
        os.write(fd, b"%d\n" % os.getpid())  # marks the try (size > 0, fresh mtime)
    except OSError:
        return False
    return False


def _spawn(env: Mapping[str, str], lock_fd: int, log_path: str,
           warm: str | None = None) -> int | None:
    # -P: the hook runs in the agent's worktree, and with -m the current folder
    # would come first on sys.path, so a worktree's own durability/ (or a
    # folder shadowing a dependency) would be imported by a long-lived service.
    # --autostarted: it leaves once idle (DURABILITY_SERVICE_IDLE_MS).
    argv = [sys.executable, "-P", "-m", "durability", "serve", "--autostarted"]
    if warm:
        argv += ["--warm", warm]
    child_env = {k: v for k, v in env.items() if k != "DURABILITY_AUTOSTART"}
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
        (os.POSIX_SPAWN_DUP2, 1, 2),
        # The lock's descriptor, made inheritable for this child only.
        (os.POSIX_SPAWN_DUP2, lock_fd, _LOCK_FD),
    ]
    try:
        return os.posix_spawn(sys.executable, argv, child_env, file_actions=actions,
                              setsid=True)
    except OSError:
        return None


# After a start was tried, the next one waits this long (the service that
# started normally holds the lock by then, so this only slows failed starts).
BACKOFF_S = 30.0

# The descriptor number the service inherits the start lock on: above the
# standard three and any the interpreter opens early.  posix_spawn's dup2
# clears close-on-exec on the copy, so only this child gets it.
_LOCK_FD = 9
