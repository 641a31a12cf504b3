"""Writing and deleting inside a worktree without ever following a link out of it.

A restore acts on paths a checkpoint names, in a folder other processes (the
agent, its tools) may change at the same moment.  A path string such as
``root/a/b.txt`` is resolved by the kernel at each call, so a folder ``a``
swapped for a symlink between a check and the write sends the write (or a
delete) wherever the link points.  Here every folder is opened from the
worktree root one component at a time (``openat`` with ``O_NOFOLLOW |
O_DIRECTORY``), and every write, rename, delete and chmod is made relative to
the folder's descriptor: a component that is a symlink (or not a folder) is
refused with ``restore-conflict``, never followed.

Opened folders are cached for the length of one restore (a bounded LRU, so a
tree with many folders cannot exhaust descriptors), so writing many files in
one folder costs one ``openat`` per file, not one per component.

What this cannot prevent: a folder *renamed* (not replaced by a link) out of
the worktree while the restore holds it open still receives the writes meant
for it; those are files that were inside the worktree a moment before, and
the verification after the restore reports the tree as not restored.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from durability.ground.errors import RestoreError

__all__ = ["ConfinedTree", "is_dir"]

# O_PATH: a folder the user made unreadable (mode 000) can still be walked
# through and written in when its mode allows, as with a path string.
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Folders kept open at once during one restore; far below the usual limit of
#: 1024 descriptors per process, and enough for writes sorted by path.
MAX_OPEN_DIRS = 64
#: What unlinking or renaming over a folder says: EISDIR on Linux (POSIX
#: allows EPERM for an unlink), ENOTEMPTY/EEXIST for a rename over one.
_FOLDER_IN_THE_WAY = (errno.EISDIR, errno.EPERM, errno.ENOTEMPTY, errno.EEXIST)


class ConfinedTree:
    """Folder descriptors below one worktree root, for one restore.

    Paths are worktree-relative, ``/``-separated, already checked to name no
    ``..`` or empty component.  Use as a context manager: it closes every
    descriptor it opened.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root_fd = os.open(root, _DIR_FLAGS)
        self._dirs: OrderedDict[str, int] = OrderedDict()

    def __enter__(self) -> ConfinedTree:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()
        os.close(self._root_fd)

    # -- folders -------------------------------------------------------------

    def dir_fd(self, folder: str, *, create: bool = False) -> int:
        """The descriptor of ``folder`` ("" is the root), walked from the root
        without following links; missing folders are made when ``create``.

        Iterative, from the deepest folder on the way still open: a tree as
        deep as the file system allows costs no recursion, and each folder
        is opened relative to its parent's descriptor, so no path string
        longer than one name is ever handed to the kernel (PATH_MAX does not
        apply)."""
        if not folder:
            return self._root_fd
        cached = self._dirs.get(folder)
        if cached is not None:
            self._dirs.move_to_end(folder)
            return cached
        # The folders still to open, deepest first, up to one already open.
        missing = [folder]
        parent = folder.rpartition("/")[0]
        while parent and parent not in self._dirs:
            missing.append(parent)
            parent = parent.rpartition("/")[0]
        fd = self._dirs[parent] if parent else self._root_fd
        if parent:
            self._dirs.move_to_end(parent)
        for path in reversed(missing):
            fd = self._open_child(fd, path, path.rpartition("/")[2], create)
            self._dirs[path] = fd
            # Never evicts the descriptor just opened (the next component's
            # parent): the bound is far above one.
            while len(self._dirs) > MAX_OPEN_DIRS:
                os.close(self._dirs.popitem(last=False)[1])
        return fd

    def _open_child(self, parent_fd: int, folder: str, name: str, create: bool) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _not_a_folder(folder) from exc
            raise
        try:
            os.mkdir(name, 0o777, dir_fd=parent_fd)
        except FileExistsError:
            pass  # made meanwhile: opened (and checked) below like any other
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _not_a_folder(folder) from exc
            raise

    def forget(self, folder: str) -> None:
        """Drop cached descriptors of ``folder`` and below (it was removed)."""
        prefix = folder + "/"
        for key in [k for k in self._dirs if k == folder or k.startswith(prefix)]:
            os.close(self._dirs.pop(key))

    # -- entries -------------------------------------------------------------

    def lstat(self, rel: str) -> os.stat_result | None:
        """``rel``'s own stat (a link is not followed), or None when absent or
        when a folder on the way is missing, a link or a file."""
        folder, name = _split(rel)
        try:
            return os.stat(name, dir_fd=self.dir_fd(folder), follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except RestoreError:
            return None

    def unlink(self, rel: str) -> None:
        """Remove the file or link ``rel``; absent, or a folder (never
        removed here), is fine."""
        folder, name = _split(rel)
        try:
            fd = self.dir_fd(folder)
        except FileNotFoundError:
            return
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if not _folder_there(exc, fd, name):
                raise

    def rmdir(self, rel: str) -> bool:
        """Remove the empty folder ``rel``; whether it was removed."""
        folder, name = _split(rel)
        try:
            os.rmdir(name, dir_fd=self.dir_fd(folder))
        except OSError:
            return False
        self.forget(rel)
        return True

    def prune(self, folder: str) -> None:
        """Remove ``folder`` and its parents while they are empty (one holding
        anything, ignored files included, stays)."""
        while folder and self.rmdir(folder):
            folder = folder.rpartition("/")[0]

    def write_file(self, rel: str, data: bytes | Iterable[bytes], mode: int, *,
                   exact_mode: bool = False, want_stat: bool = True) -> os.stat_result | None:
        """Write ``rel`` as a new file: whatever is there (file or link) is
        unlinked, never written through, and the new file is created with
        ``O_EXCL | O_NOFOLLOW``, so a link put back meanwhile is refused.
        Returns the new file's stat data, read from the descriptor written
        (so it is this file's, whatever replaces the name afterwards), or
        None when not ``want_stat`` (one ``fstat`` fewer per file).
        ``data`` may be chunks (a large blob, streamed in bounded memory).

        Unlink and create, as git's and jj's checkouts do, rather than a
        temporary renamed over the file: on ext4 a rename over an existing
        file starts writeback of the new data at once, which made a jj restore
        of 5,000 files about 3x slower.  A reader may see the file missing
        for a moment; a crash in between loses nothing the pre-restore
        checkpoint does not hold.
        """
        folder, name = _split(rel)
        fd = self.dir_fd(folder, create=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for _ in range(3):
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                if _folder_there(exc, fd, name):
                    raise _not_a_folder(rel, what="a folder where a file goes") from exc
                raise
            try:
                # An exact mode is set once the data is in (a read-only or
                # mode-000 file must still be written).
                file_fd = os.open(name, flags, 0o600 if exact_mode else mode, dir_fd=fd)
                break
            except FileExistsError:
                continue  # something made the name again meanwhile: unlink it again
        else:
            raise _not_a_folder(rel, what="recreated by something else during the restore")
        try:
            if isinstance(data, bytes):
                _write_all(file_fd, data)
            else:
                for chunk in data:
                    _write_all(file_fd, chunk)
            if exact_mode:
                os.fchmod(file_fd, mode)
            return os.fstat(file_fd) if want_stat else None
        finally:
            os.close(file_fd)

    def write_link(self, rel: str, target: bytes) -> None:
        """Make ``rel`` a symlink to ``target`` (made at a temporary name and
        renamed over whatever file or link is there)."""
        folder, name = _split(rel)
        fd = self.dir_fd(folder, create=True)
        tmp = f".{name}.durability-{os.getpid()}-{os.urandom(4).hex()}.tmp"
        os.symlink(target, tmp, dir_fd=fd)
        try:
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException as exc:
            os.unlink(tmp, dir_fd=fd)
            # A folder made there since the plan (a restore does not look
            # first): refused as write_file refuses it, not a bare OSError.
            if isinstance(exc, OSError) and _folder_there(exc, fd, name):
                raise _not_a_folder(rel, what="a folder where a file goes") from exc
            raise

    def chmod(self, rel: str, mode: int) -> None:
        """Set ``rel``'s mode; a link or a folder there is refused, not followed."""
        folder, name = _split(rel)
        fd = self.dir_fd(folder)
        # fchmodat cannot refuse a link here (Python forbids dir_fd with
        # follow_symlinks=False), so the file itself is opened without
        # following: O_PATH needs no read permission (a mode-000 file).
        flags = getattr(os, "O_PATH", os.O_RDONLY | os.O_NONBLOCK) | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            file_fd = os.open(name, flags, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _not_a_folder(rel, what="a symlink where a file goes") from exc
            raise
        try:
            kind = os.fstat(file_fd).st_mode
            if stat.S_ISLNK(kind):
                raise _not_a_folder(rel, what="a symlink where a file goes")
            if not stat.S_ISREG(kind):
                # A folder made there since the restore looked (a chmod-only
                # write reads the mode taken before the first write).
                raise _not_a_folder(rel, what="a folder where a file goes" if stat.S_ISDIR(kind)
                                    else "not a regular file")
            _fchmod(file_fd, mode)
        finally:
            os.close(file_fd)

    def files_under(self, folder: str) -> Iterator[str]:
        """Every non-folder entry below ``folder`` (links not followed), at
        any depth (a stack, not recursion)."""
        pending = [folder]
        while pending:
            current = pending.pop()
            parent, name = _split(current)
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=self.dir_fd(parent))
            except (OSError, RestoreError):
                continue
            try:
                with os.scandir(fd) as entries:
                    found = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
            finally:
                os.close(fd)
            for child, child_is_dir in reversed(found):
                rel = f"{current}/{child}"
                if child_is_dir:
                    pending.append(rel)
                else:
                    yield rel


def _folder_there(exc: OSError, dir_fd: int, name: str) -> bool:
    """Whether ``exc`` failed an unlink or rename because ``name`` is a folder."""
    if exc.errno not in _FOLDER_IN_THE_WAY:
        return False
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _write_all(fd: int, data: bytes) -> None:
    done = os.write(fd, data) if data else 0
    if done < len(data):  # a short write: rare, but allowed
        view = memoryview(data)[done:]
        while view:
            view = view[os.write(fd, view):]


def _fchmod(fd: int, mode: int) -> None:
    """``fchmod``, which an O_PATH descriptor refuses: then through its
    ``/proc/self/fd`` name, which names that very file, not a path."""
    try:
        os.fchmod(fd, mode)
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
        os.chmod(f"/proc/self/fd/{fd}", mode)


def _split(rel: str) -> tuple[str, str]:
    folder, _, name = rel.rpartition("/")
    return folder, name


def _not_a_folder(rel: str, *, what: str = "not a folder (a symlink or a file)") -> RestoreError:
    return RestoreError(
        f"restore stopped: {rel} is {what}; a restore never writes through a link "
        "(something changed the worktree during the restore)", code="restore-conflict")


def is_dir(st: os.stat_result | None) -> bool:
    return st is not None and stat.S_ISDIR(st.st_mode)
