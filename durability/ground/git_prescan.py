"""A first git capture's paths from ``git status``, started before the
capture's imports (decision 0055).

The first capture of a large git worktree in a process with no service
(the hook's in-process fallback) spends most of its time in two things
that do not depend on each other: the interpreter importing the capture
path (pygit2, the store, the capturer: about 130 ms) and the
index-to-workdir comparison that names the paths to read (decision 0050:
about what ``git status`` costs, 150 ms at 100,000 files).  So before the
imports, ``start`` seeds the new private index with the copy of the
user's index (``place_copy``, as ``git_repo._seed_copy`` does) and starts
``git status`` on it, on the other core; the capture then takes the paths
git names (``Prescan.paths``) instead of running libgit2's diff.

git only names paths, as libgit2 did: each is then read by the confined
scan (``WorktreeIndex._stage_paths``).  With ``--ignore-submodules=dirty``
git compares every gitlink with the HEAD of its repository (one ref read
each, not a look inside it), so a gitlink whose HEAD moved is named too,
and the others need no read.
The copy git compared is the file the capture reads: both are checked to
be the one ``start`` put in place (its inode, before the capture read it
and after git exited; an index is only ever replaced, never written in
place), and the copy still goes through ``git_repo``'s check of its
entries.  Whenever anything is off (no git, git failed, the file was
replaced, another worktree layout), the capture runs libgit2's diff as
before.

Standard library only: it runs before the imports it overlaps.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["Prescan", "discard_all", "index_name", "peek", "place_copy", "start", "take",
           "unchecked_mark", "writer_lock"]

#: git's variables that say where a repository, its index or its objects
#: are (``git rev-parse --local-env-vars``): the hook's environment may
#: hold a harness's; git is pointed at this worktree alone.
_LOCAL_GIT_VARS = frozenset({
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT", "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR",
    "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM"})
#: How long the capture waits for git's answer before it runs libgit2's
#: diff itself (git takes what ``git status`` takes).
WAIT_S = 5.0

_started: dict[str, Prescan] = {}


def unchecked_mark(path: str) -> str:
    """Beside a private index copied from the user's and not yet checked:
    while it exists, the index is not to be used (``git_repo._seed_copy``).
    Not named ``index-*``: nothing that reads the private indexes lists it."""
    folder, name = os.path.split(path)
    return os.path.join(folder, "unchecked-" + name.removeprefix("index-"))


def writer_lock(path: str) -> str:
    """The file whose ``flock`` every writer of the private index ``path``
    holds while it writes (``backends.index_lock``)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, "writer-" + name.removeprefix("index-") + ".lock")


def _flock(lock_file: str, wait_s: float) -> int | None:
    """An ``flock`` on ``lock_file``, held by the descriptor returned; None
    when another process holds it for longer than ``wait_s``."""
    import fcntl
    import time

    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.005)


def place_copy(user_index: str, path: str) -> None:
    """Put a copy of ``user_index`` at ``path``, given the user's index's
    modification time down to its second (decision 0050), with its
    unchecked mark made first.  The caller holds the
    index's writer lock (``writer_lock``) and checks the copy."""
    import shutil

    seed = path + ".seed"
    mark = unchecked_mark(path)
    os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
    shutil.copyfile(user_index, seed)
    os.chmod(seed, 0o600)
    # git built without nanosecond stamps judges racy by the second, so an
    # entry of that same second is rehashed whichever git wrote it.
    st = os.stat(user_index)
    second = st.st_mtime_ns - st.st_mtime_ns % 1_000_000_000
    os.utime(seed, ns=(st.st_atime_ns, second))
    os.replace(seed, path)


class Prescan:
    """A ``git status`` started on the copy placed at ``path``."""

    def __init__(self, path: str, placed: int, pid: int, out: int, lock: int) -> None:
        self.path = path
        self._lock = lock  # the prescan lock of this index, released with the copy
        #: The copy, held open: its inode cannot be reused by another file
        #: while this descriptor lives, so the same inode at ``path`` means
        #: the same file.
        self._placed = placed
        st = os.fstat(placed)
        self._identity = (st.st_dev, st.st_ino)
        self._pid = pid
        self._out = out
        self._answer: set[str] | None = None
        self._done = False
        #: The copy read ahead by a thread (``git_repo.read_ahead``): an
        #: object of pygit2's, which this module never imports, and the
        #: thread (joined before it is used).
        self.read: object = None
        self.reader: Any = None

    def placed_here(self) -> bool:
        """Whether ``path`` is still the copy this prescan put there."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def paths(self) -> set[str] | None:
        """The paths git found changed, untracked or gone (folders without
        their trailing ``/``), once it exited; None when git failed, did not
        answer within ``WAIT_S``, or ``path`` is no longer the copy git read."""
        if not self._done:
            self._done = True
            self._answer = self._collect()
        here = self.placed_here()
        self._close_copy()
        return self._answer if here else None

    def _close_copy(self) -> None:
        if self._placed >= 0:
            os.close(self._placed)
            os.close(self._lock)
            self._placed = self._lock = -1

    def _collect(self) -> set[str] | None:
        import select
        import time

        chunks: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._out], [], [], left)[0]:
                    self._stop()
                    return None
                chunk = os.read(self._out, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
            _, status = os.waitpid(self._pid, 0)
            self._pid = 0
        except OSError:
            self._stop()
            return None
        finally:
            os.close(self._out)
        if os.waitstatus_to_exitcode(status) != 0:
            return None
        return _parse(b"".join(chunks))

    def discard(self) -> None:
        """Stop git if it still runs; its answer is not wanted."""
        if not self._done:
            self._done = True
            self._stop()
            try:
                os.close(self._out)
            except OSError:
                pass
        self._close_copy()

    def _stop(self) -> None:
        if self._pid:
            import signal

            try:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            except OSError:
                pass
            self._pid = 0


def _parse(out: bytes) -> set[str]:
    """``git status --porcelain -z``: ``XY path`` records; a rename's or
    copy's second record (its source) is a path too."""
    found: set[str] = set()
    records = out.split(b"\0")
    i = 0
    while i < len(records):
        record = records[i]
        i += 1
        if len(record) < 4:
            continue
        found.add(os.fsdecode(record[3:]).rstrip("/"))
        if record[:1] in (b"R", b"C") or record[1:2] in (b"R", b"C"):
            if i < len(records) and records[i]:
                found.add(os.fsdecode(records[i]).rstrip("/"))
            i += 1
    found.discard("")
    return found


def start(worktree: str, env: Mapping[str, str]) -> str | None:
    """For a git worktree whose git folder is ``<worktree>/.git`` and whose
    private index does not exist yet: place the copy and start git on it;
    the private index's path.  Does nothing otherwise (None), and never
    raises: the capture then does it all."""
    try:
        return _start(worktree, env)
    except Exception:  # an optimisation only: the capture does it all anyway
        return None


def peek(path: str) -> Prescan | None:
    """The prescan started for ``path``, left for ``take``."""
    return _started.get(path)


def index_name(worktree: str | os.PathLike[str]) -> str:
    """The private index's file name for ``worktree``, in ``<git dir>/durability``
    (``git_repo.private_index_path`` names it from here too)."""
    import hashlib

    return f"index-{hashlib.sha256(os.fsencode(worktree)).hexdigest()[:16]}"


def _start(worktree: str, env: Mapping[str, str]) -> str | None:
    git_dir = os.path.join(worktree, ".git")
    user_index = os.path.join(git_dir, "index")
    name = index_name(worktree)
    digest = name.removeprefix("index-")
    folder = os.path.join(git_dir, "durability")
    path = os.path.join(folder, name)
    if path in _started or not os.path.isdir(git_dir) or not os.path.isfile(user_index):
        return None
    if os.path.exists(path) and not os.path.exists(unchecked_mark(path)):
        return None  # not a first capture: nothing to overlap
    git = _find_git(env)
    if git is None:
        return None
    os.makedirs(folder, mode=0o700, exist_ok=True)
    # One prescan of an index at a time: another hook's (16 first calls at
    # once) would replace the copy this one's git compares.  Held, by this
    # process only, until its answer is taken or dropped.
    mine = _flock(os.path.join(folder, f"prescan-{digest}.lock"), 0)
    if mine is None:
        return None
    lock = _flock(writer_lock(path), 0.05)
    if lock is None:
        os.close(mine)
        return None  # another process is writing this index: seeding it already
    try:
        place_copy(user_index, path)
        placed = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        os.close(mine)
        raise
    finally:
        os.close(lock)  # releases the flock
    child_env = {k: v for k, v in env.items() if k not in _LOCAL_GIT_VARS}
    child_env.update(GIT_DIR=git_dir, GIT_WORK_TREE=worktree, GIT_INDEX_FILE=path)
    argv = [git, "--no-optional-locks", "-c", "core.fsmonitor=false",
            "-c", "core.untrackedCache=false", "status", "--porcelain", "-z",
            "--no-renames", "--ignore-submodules=dirty", "--untracked-files=normal"]
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    try:
        pid = os.posix_spawn(git, argv, child_env, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, write_end, 1),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ])
    except OSError:
        os.close(read_end)
        os.close(placed)
        os.close(mine)
        return None
    finally:
        os.close(write_end)
    _started[path] = Prescan(path, placed, pid, read_end, mine)
    return path


def _find_git(env: Mapping[str, str]) -> str | None:
    """git on ``env``'s PATH (the hook's, as ``git_cli`` finds it)."""
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", "git")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def take(path: str) -> Prescan | None:
    """The prescan started for the private index at ``path``, handed over
    once (None when none was started for it)."""
    return _started.pop(path, None)


def discard_all() -> None:
    """Stop every prescan nobody took (the capture failed before its scan)."""
    while _started:
        _started.popitem()[1].discard()
