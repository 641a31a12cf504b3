"""Reading a worktree into the git backend's private index: confined, iterative.

libgit2's own working-directory diff resolves plain path strings, so a
folder swapped for a symlink between its listing and its read sends the read
through the link (a checkpoint then held, at ``w/f04/inner``, the content of
``w/f00/inner``, or files of a folder outside the worktree); and it stops at
100 nested folders ("directory nesting too deep"), which blocked every
capture and restore of such a worktree.  So the git backend reads the tree
itself, as the confined writer writes it (``confined.ConfinedTree``):

- every folder is opened from the worktree root one name at a time, never
  following a link (``openat`` with ``O_NOFOLLOW``), and every file is
  opened relative to its folder's descriptor with ``O_NOFOLLOW``: no read
  leaves the worktree, and no path string longer than one name is handed to
  the kernel, so depth is bounded by the file system only (the walk is a
  stack, not recursion);
- a folder found swapped, moved or replaced while the capture read it (its
  identity changed between its listing and the end of the scan, or a link
  stands where it was) is *moving* (see ``moving``): its entries keep what
  the last capture read, and the next capture reads it again; nothing read
  through it is kept;
- a file is taken only when its stat data did not change across the read.

The rules are ``git add -A``'s: what git ignores (libgit2's ignore rules) is
left out unless tracked, no ``.git`` is staged at any depth, an untracked
folder holding a valid repository is recorded as a gitlink to its HEAD (a
folder with tracked files, or whose ``.git`` is no repository, is walked as
a folder), a gitlink is updated to its repository's HEAD, clean
filters (eol, ``filter=``) are applied as libgit2 applies them, and an entry
whose stat data matches the file (and is older than the index, git's
"racily clean" rule) is trusted without reading the file.
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pygit2
from pygit2.enums import FileMode, RepositoryOpenFlag
from pygit2.ffi import C, ffi

from durability.backends.confined import ConfinedTree
from durability.backends.git_ignore import DEEP, Rules, base_rules
from durability.backends.git_repo import common_dir
from durability.backends.moving import MAX_TRIES, pause
from durability.ground.errors import RestoreError

if TYPE_CHECKING:
    from durability.backends.git_index import WorktreeIndex

__all__ = ["Scan"]

_LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_M32 = 0xFFFFFFFF
_CHUNK = 1 << 20
_LINK, _COMMIT = int(FileMode.LINK), int(FileMode.COMMIT)
_BLOB, _EXEC = int(FileMode.BLOB), int(FileMode.BLOB_EXECUTABLE)
# What one read of a path found (besides a staged entry).
_GONE, _DIR, _DENIED, _CHANGED, _MOVED = "gone", "dir", "denied", "changed", "moved"


class _Tracked(NamedTuple):
    """An index entry: its mode, object id and the stat data it was staged with."""

    mode: int
    oid: bytes
    stat: tuple[int, ...]


class _Read(NamedTuple):
    oid: pygit2.Oid
    mode: int
    st: os.stat_result


def _stat_data(st: os.stat_result) -> tuple[int, ...]:
    """What git compares of a file's stat data, as the index keeps it (32 bits)."""
    msec, mns = divmod(st.st_mtime_ns, 1_000_000_000)
    csec, cns = divmod(st.st_ctime_ns, 1_000_000_000)
    return (msec & _M32, mns, csec & _M32, cns, st.st_dev & _M32, st.st_ino & _M32,
            st.st_uid & _M32, st.st_gid & _M32, st.st_size & _M32)


def _tracked(e: Any) -> _Tracked:
    """An entry from libgit2's ``git_index_entry`` (a cffi struct)."""
    return _Tracked(
        e.mode, bytes(ffi.buffer(ffi.addressof(e, "id"))[:]),
        (e.mtime.seconds, e.mtime.nanoseconds, e.ctime.seconds, e.ctime.nanoseconds,
         e.dev, e.ino, e.uid, e.gid, e.file_size))


class _AllEntries:
    """Every entry of the index, read once (a full scan compares them all),
    with their stat data (which pygit2's ``IndexEntry`` does not carry),
    through pygit2's cffi binding."""

    def __init__(self, index: pygit2.Index) -> None:
        self._map: dict[str, _Tracked] = {}
        raw = index._index
        for i in range(C.git_index_entrycount(raw)):
            e = C.git_index_get_byindex(raw, i)
            if e == ffi.NULL or (e.flags & 0x3000):  # a conflict stage: none in ours
                continue
            self._map[os.fsdecode(ffi.string(e.path))] = _tracked(e)
        self.paths = sorted(self._map)

    def get(self, path: str) -> _Tracked | None:
        return self._map.get(path)

    def __contains__(self, path: str) -> bool:
        return path in self._map

    def tracked_under(self, folder: str) -> bool:
        prefix = folder + "/"
        i = bisect.bisect_left(self.paths, prefix)
        return i < len(self.paths) and self.paths[i].startswith(prefix)

    def under(self, scope: str) -> Iterator[str]:
        return _under(self.paths, scope)

    def any_named(self, name: str) -> bool:
        return any(p == name or p.endswith("/" + name) for p in self.paths)


class _SomeEntries:
    """The entries a watcher-informed scan asks for, looked up in the index
    one by one (its cost follows the paths, not the size of the index): by
    path, and by binary search over the index's sorted entries for what is
    below a folder."""

    def __init__(self, index: pygit2.Index) -> None:
        self._raw = index._index
        self._count = C.git_index_entrycount(self._raw)

    def get(self, path: str) -> _Tracked | None:
        e = C.git_index_get_bypath(self._raw, os.fsencode(path), 0)
        return None if e == ffi.NULL else _tracked(e)

    def __contains__(self, path: str) -> bool:
        return bool(C.git_index_get_bypath(self._raw, os.fsencode(path), 0) != ffi.NULL)

    def _path(self, i: int) -> bytes:
        return bytes(ffi.string(C.git_index_get_byindex(self._raw, i).path))

    def _lower(self, key: bytes) -> int:
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._path(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def tracked_under(self, folder: str) -> bool:
        prefix = os.fsencode(folder) + b"/"
        i = self._lower(prefix)
        return i < self._count and self._path(i).startswith(prefix)

    def under(self, scope: str) -> Iterator[str]:
        key = os.fsencode(scope)
        for i in range(self._lower(key), self._count):
            path = self._path(i)
            if not path.startswith(key):
                break
            if path == key or path[len(key):len(key) + 1] == b"/":
                yield os.fsdecode(path)

    def any_named(self, name: str) -> bool:
        return True  # unknown without reading them all: filters are looked up


def _under(paths: list[str], scope: str) -> Iterator[str]:
    """The sorted ``paths`` equal to ``scope`` or below it (all for "")."""
    if not scope:
        yield from paths
        return
    for path in paths[bisect.bisect_left(paths, scope):]:
        if not path.startswith(scope):
            break
        if path == scope or path[len(scope)] == "/":
            yield path


class Scan:
    """One scan of ``scopes`` ("" for the whole worktree) against the index
    of ``state``: what changed, read confined, then applied to the index."""

    def __init__(self, state: WorktreeIndex, index_path: str) -> None:
        self.state = state
        self.repo, self.index, self.root = state.repo, state.index, state.worktree
        # Set by run(): every entry for a full scan, a lookup per path else.
        self.entries: _AllEntries | _SomeEntries = _SomeEntries(self.index)
        try:
            st = os.stat(index_path)
            self._stamp = (st.st_mtime_ns // 1_000_000_000, st.st_mtime_ns % 1_000_000_000)
        except OSError:
            self._stamp = (0, 0)
        self.filemode = _config_bool(self.repo, "core.fileMode", True)
        #: path -> what to stage (an entry, or None to remove it).
        self.staged: dict[str, tuple[pygit2.Oid, int, os.stat_result | None] | None] = {}
        self.seen: set[str] = set()
        self.skipped: set[str] = set()
        self.moving: set[str] = set()
        #: Folders that moved while read: what is below them stays as it was.
        self.moved: set[str] = set()
        self._listed: dict[str, tuple[int, int]] = {}
        self._tree: ConfinedTree | None = None
        self._rules: dict[str, Rules] | None = None
        #: Folders holding ``.git``: the repository there, or None if none is.
        self._repos: dict[str, pygit2.Repository | None] = {}
        #: Folders above watcher-named paths: whether git ignores each.
        self._folder_ignored: dict[str, bool] = {}
        #: Whether any attributes could filter a file (else none is loaded:
        #: libgit2's lookup costs one path walk per folder of the path).
        self._filters = False

    # -- the scan --------------------------------------------------------------

    def run(self, scopes: Iterable[str]) -> bool:
        """Scan and apply; False when a folder moved under the scan (its part
        is read again by the next capture's full scan)."""
        scopes = sorted(set(scopes))
        if "" in scopes:
            self.entries = _AllEntries(self.index)
        self._filters = _filters_possible(self.repo) or self.entries.any_named(".gitattributes")
        with ConfinedTree(self.root) as tree:
            self._tree = tree
            for scope in scopes:
                self._scope(scope)
        self._verify()
        kept = self.skipped | self.moved
        for scope in scopes:
            for path in self.entries.under(scope):
                if path not in self.seen and path not in self.staged and not _below(path, kept):
                    self.staged[path] = None
        for path in list(self.staged):
            if _below(path, self.moved):
                del self.staged[path]
        self._apply()
        return not self.moved

    def _scope(self, scope: str) -> None:
        if not scope:
            self._walk("", ignored=False)
            return
        if ".git" in scope.split("/"):
            return  # never staged, at any depth
        if self._inside_repo(scope):
            return  # the gitlink of that repository stands for it
        try:
            st = self._tree_lstat(scope)
        except PermissionError:
            self.skipped.add(scope)  # inside a folder that cannot be entered
            return
        if st is None:
            return  # gone: its entries are removed
        above = self._above_ignored(scope)
        if stat.S_ISDIR(st.st_mode):
            ignored = self._folder(scope, inherited=True if above else None)
            if ignored is not None:
                self._walk(scope, ignored=ignored)
        elif ((stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode))
              and (scope in self.entries or not (above or self._ignored(scope)))):
            self._file(scope, st)

    def _walk(self, start: str, *, ignored: bool) -> None:
        stack = [(start, ignored)]
        while stack:
            folder, folder_ignored = stack.pop()
            listing = self._list(folder)
            if listing is None:
                continue
            below: list[tuple[str, bool]] = []
            for name, st in listing:
                if name == ".git":
                    continue  # git never stages a .git, at any depth
                path = f"{folder}/{name}" if folder else name
                mode = st.st_mode
                if stat.S_ISDIR(mode):
                    descend = self._folder(path, inherited=folder_ignored)
                    if descend is not None:
                        below.append((path, descend))
                elif ((stat.S_ISREG(mode) or stat.S_ISLNK(mode)) and (
                        path in self.entries or not (folder_ignored or self._ignored(path)))):
                    self._file(path, st)
                # Anything else (a fifo, a socket) is not staged, as with git.
            stack.extend(reversed(below))

    def _folder(self, path: str, *, inherited: bool | None) -> bool | None:
        """Whether to walk ``path`` (None: not at all; True: for its tracked
        entries only, the folder being ignored), after recording it as a
        gitlink when it is another repository."""
        entry = self.entries.get(path)
        tracked = self._tracked_under(path)
        if (entry is not None and entry.mode == _COMMIT) or (
                not tracked and self._nested(path) is not None):
            self._gitlink(path, entry, inherited)
            return None
        if inherited:
            return True if tracked else None
        if not tracked and self._ignored(path + "/"):
            return None
        if inherited is None and tracked:
            return self._ignored(path + "/")
        return False

    def _gitlink(self, path: str, entry: _Tracked | None, inherited: bool | None) -> None:
        """``git add -A`` records another repository as its HEAD commit; one
        with no commit checked out is left as it was."""
        self.seen.add(path)
        if entry is None and (inherited or self._ignored(path + "/")):
            return
        repo = self._nested(path)
        try:
            if repo is None:
                raise KeyError(path)  # no repository there now: left as it was
            head = repo.head.peel(pygit2.Commit).id
        except (pygit2.GitError, KeyError, ValueError):
            if entry is None:
                self.seen.discard(path)
            return
        if entry is None or entry.oid != head.raw or entry.mode != _COMMIT:
            self.staged[path] = (head, _COMMIT, None)

    def _file(self, path: str, st: os.stat_result) -> None:
        self.seen.add(path)
        entry = self.entries.get(path)
        if (entry is not None and entry.mode == self._mode(st, entry)
                and entry.stat == _stat_data(st) and entry.stat[:2] < self._stamp):
            return  # unchanged, and not racily clean
        for attempt in range(1, MAX_TRIES + 1):
            if attempt > 1:
                if self.state._retries_left <= 0:
                    break
                self.state._retries_left -= 1
                pause(attempt - 1)
            got = self._read(path, entry)
            if got == _CHANGED:
                continue
            if isinstance(got, _Read):
                if entry is None or entry.oid != got.oid.raw or entry.mode != got.mode \
                        or entry.stat != _stat_data(got.st):
                    self.staged[path] = (got.oid, got.mode, got.st)
            elif got == _DENIED:
                self.skipped.add(path)
            elif got == _MOVED:
                self.moved.add(path.rpartition("/")[0] or path)
            else:
                # Gone, or now a folder (its files are read by the next
                # capture, which rescans a moving path): the entry goes.
                self.seen.discard(path)
                if got == _DIR:
                    self.moving.add(path)
            return
        # Still changing after every read: the entry keeps what the last
        # capture read (a new path stays out); the next capture reads it again.
        self.moving.add(path)

    # -- reading, confined ---------------------------------------------------

    def _read(self, path: str, entry: _Tracked | None) -> _Read | str:
        assert self._tree is not None
        folder, _, name = path.rpartition("/")
        bname = os.fsencode(name)
        try:
            fd = self._tree.dir_fd(folder)
        except RestoreError:
            return _MOVED
        except (FileNotFoundError, NotADirectoryError):
            return _GONE
        except PermissionError:
            return _DENIED
        try:
            st = os.stat(bname, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return _GONE
        except PermissionError:
            return _DENIED
        if stat.S_ISDIR(st.st_mode):
            return _DIR
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(bname, dir_fd=fd)
                after = os.stat(bname, dir_fd=fd, follow_symlinks=False)
            except OSError:
                return _CHANGED
            if _key(after) != _key(st):
                return _CHANGED
            return _Read(self._blob(target, entry, _LINK), _LINK, after)
        if not stat.S_ISREG(st.st_mode):
            return _GONE
        try:
            file_fd = os.open(bname, _READ_FLAGS, dir_fd=fd)
        except PermissionError:
            return _DENIED
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOENT, errno.EISDIR, errno.ENXIO):
                return _CHANGED  # replaced between its stat and its open
            raise
        try:
            before = os.fstat(file_fd)
            if not stat.S_ISREG(before.st_mode) or before.st_ino != st.st_ino:
                return _CHANGED
            data = _read_all(file_fd)
            after = os.fstat(file_fd)
        finally:
            os.close(file_fd)
        # Unchanged from the stat before the open to the end of the read
        # (ctime moves on every write, truncate, chmod and rename).
        if _key(after) != _key(st) or len(data) != after.st_size:
            return _CHANGED
        mode = self._mode(after, entry)
        return _Read(self._blob(self._filtered(path, data), entry, mode), mode, after)

    def _blob(self, data: bytes, entry: _Tracked | None, mode: int) -> pygit2.Oid:
        oid = pygit2.hash(data)
        if entry is not None and entry.oid == oid.raw:
            return oid  # already in the store
        return self.repo.create_blob(data)

    def _filtered(self, path: str, data: bytes) -> bytes:
        """``data`` as git stores it at ``path``: its clean filters (eol
        conversion, ``filter=`` drivers libgit2 runs) applied, as
        ``index.add`` applied them."""
        if not self._filters:
            return data
        filters = ffi.new("git_filter_list **")
        try:
            rc = C.git_filter_list_load(filters, self.repo._repo, ffi.NULL, os.fsencode(path),
                                        C.GIT_FILTER_TO_ODB, 0)
        except (UnicodeError, TypeError):
            return data
        if rc < 0 or filters[0] == ffi.NULL:
            return data
        buf = ffi.new("git_buf *")
        try:
            if C.git_filter_list_apply_to_buffer(buf, filters[0], data, len(data)) < 0:
                return data
            return bytes(ffi.buffer(buf.ptr, buf.size)[:])
        finally:
            C.git_buf_dispose(buf)
            C.git_filter_list_free(filters[0])

    def _list(self, folder: str) -> list[tuple[str, os.stat_result]] | None:
        """``folder``'s entries with their own stat data, or None when it
        cannot be listed (then left out, or moving)."""
        assert self._tree is not None
        try:
            list_fd = os.open(".", _LIST_FLAGS, dir_fd=self._tree.dir_fd(folder))
        except RestoreError:
            self.moved.add(folder)
            return None
        except (FileNotFoundError, NotADirectoryError):
            self.moved.add(folder)
            return None
        except PermissionError:
            if folder:
                self.skipped.add(folder)
            return None
        found: list[tuple[str, os.stat_result]] = []
        try:
            ident = os.fstat(list_fd)
            with os.scandir(list_fd) as listing:
                for item in listing:
                    try:
                        found.append((item.name, item.stat(follow_symlinks=False)))
                    except FileNotFoundError:
                        continue
        except PermissionError:
            if folder:
                self.skipped.add(folder)
            return None
        finally:
            os.close(list_fd)
        self._listed[folder] = (ident.st_dev, ident.st_ino)
        found.sort(key=lambda item: item[0])
        if not self._filters and any(name == ".gitattributes" for name, _ in found):
            self._filters = True
        return found

    def _verify(self) -> None:
        """Every folder read is still the folder at its path, walked afresh
        from the root: one swapped or moved while it was read is moving."""
        with ConfinedTree(self.root) as fresh:
            for folder in sorted(self._listed):
                if not folder or _below(folder, self.moved):
                    continue
                try:
                    st = os.fstat(fresh.dir_fd(folder))
                    same = (st.st_dev, st.st_ino) == self._listed[folder]
                except (OSError, RestoreError):
                    same = False
                if not same:
                    self.moved.add(folder)

    def _tree_lstat(self, path: str) -> os.stat_result | None:
        assert self._tree is not None
        folder, _, name = path.rpartition("/")
        try:
            return os.stat(os.fsencode(name), dir_fd=self._tree.dir_fd(folder),
                           follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError, RestoreError):
            return None

    def _holds_git(self, path: str) -> bool:
        assert self._tree is not None
        try:
            os.stat(".git", dir_fd=self._tree.dir_fd(path), follow_symlinks=False)
        except (OSError, RestoreError):
            return False
        return True

    def _nested(self, path: str) -> pygit2.Repository | None:
        """The repository whose work tree is the folder ``path``, or None
        when no valid one is there: a ``.git`` that is not a repository (a
        removed worktree's gitfile, a broken folder) makes it a plain folder
        to git, and libgit2 must not search above it (it would find ours)."""
        if path in self._repos:
            return self._repos[path]
        repo = None
        if self._holds_git(path):
            where = self.root / path
            try:
                found = pygit2.Repository(str(where), RepositoryOpenFlag.NO_SEARCH)
                workdir = found.workdir
                if workdir and os.path.realpath(workdir) == os.path.realpath(where):
                    repo = found
            except (pygit2.GitError, KeyError, ValueError, OSError):
                pass
        self._repos[path] = repo
        return repo

    def _inside_repo(self, path: str) -> bool:
        """Whether a folder above ``path`` is another repository: a gitlink,
        or an untracked folder holding a repository (git walks a folder it
        tracks files in as a folder, whatever ``.git`` it holds)."""
        parts = path.split("/")
        for n in range(1, len(parts)):
            folder = "/".join(parts[:n])
            entry = self.entries.get(folder)
            if entry is not None and entry.mode == _COMMIT:
                return True
            if not self._tracked_under(folder) and self._nested(folder) is not None:
                return True
        return False

    # -- rules ---------------------------------------------------------------

    def _tracked_under(self, folder: str) -> bool:
        return self.entries.tracked_under(folder)

    def _ignored(self, path: str) -> bool:
        """Whether git ignores ``path`` (a folder's ends with ``/``): libgit2
        says for shallow paths, ``git_ignore`` for deep ones and for names
        libgit2's binding cannot take (not UTF-8: it takes text only)."""
        is_dir = path.endswith("/")
        path = path.rstrip("/")
        if path.count("/") < DEEP:
            try:
                return bool(self.repo.path_is_ignored(path + "/" if is_dir else path))
            except UnicodeError:
                pass
            except pygit2.GitError:
                return False
        folder = path.rpartition("/")[0]
        # These rules judge the path alone: below a folder git ignores (one a
        # walk enters all the same for the tracked files it holds), so is it.
        return self._folder_ignored_at(folder) or self._rules_for(folder).ignored(path, is_dir)

    def _folder_ignored_at(self, folder: str) -> bool:
        """Whether git ignores ``folder`` (or a folder above it): each folder
        asked once per scan, from the top down (a loop, not recursion)."""
        missing = []
        at = folder
        while at and at not in self._folder_ignored:
            missing.append(at)
            at = at.rpartition("/")[0]
        for up in reversed(missing):
            self._folder_ignored[up] = self._ignored(up + "/")
        return bool(folder) and self._folder_ignored[folder]

    def _above_ignored(self, path: str) -> bool:
        """Whether a folder above ``path`` is ignored, for a path a watcher
        named (a walk never enters an ignored folder).  libgit2 looks at the
        folders above a path itself; the scan's own rules, used for deep
        paths and names libgit2 cannot take, judge the path alone, so each
        folder above is asked once per scan."""
        if path.count("/") < DEEP and _utf8(path):
            return False
        return self._folder_ignored_at(path.rpartition("/")[0])

    def _rules_for(self, folder: str) -> Rules:
        """The ignore rules below ``folder``, built from the nearest folder
        above it already known (a loop, not recursion)."""
        if self._rules is None:
            self._rules = {"": base_rules(self.repo, lambda: self._gitignore(""))}
        missing = []
        while folder not in self._rules:
            missing.append(folder)
            folder = folder.rpartition("/")[0]
        rules = self._rules[folder]
        for path in reversed(missing):
            rules = rules.child(path, self._gitignore(path))
            self._rules[path] = rules
        return rules

    def _gitignore(self, folder: str) -> bytes | None:
        assert self._tree is not None
        try:
            fd = os.open(".gitignore", _READ_FLAGS, dir_fd=self._tree.dir_fd(folder))
        except (OSError, RestoreError):
            return None
        try:
            return _read_all(fd) if stat.S_ISREG(os.fstat(fd).st_mode) else None
        except OSError:
            return None
        finally:
            os.close(fd)

    def _mode(self, st: os.stat_result, entry: _Tracked | None) -> int:
        if stat.S_ISLNK(st.st_mode):
            return _LINK
        if not self.filemode and entry is not None and entry.mode in (_BLOB, _EXEC):
            return entry.mode
        return _EXEC if st.st_mode & stat.S_IXUSR else _BLOB

    # -- applying ------------------------------------------------------------

    def _apply(self) -> None:
        for path, new in self.staged.items():
            if new is None and path in self.index:
                self.index.remove(path)
        with_stat = []
        for path, new in self.staged.items():
            if new is None:
                continue
            oid, mode, st = new
            if st is None:
                self.index.add(pygit2.IndexEntry(path, oid, FileMode(mode)))
            else:
                with_stat.append((path, oid, mode, st))
        self.state.record(with_stat)


def _key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_mode, st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _below(path: str, folders: set[str]) -> bool:
    """Whether ``path`` is one of ``folders`` or below one."""
    if not folders:
        return False
    if path in folders:
        return True
    while "/" in path:
        path = path.rpartition("/")[0]
        if path in folders:
            return True
    return "" in folders


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeError:
        return False
    return True


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _filters_possible(repo: pygit2.Repository) -> bool:
    """Whether attributes outside the worktree, or the config, could filter a
    file (``core.autocrlf``, ``info/attributes``, the user's or the system's
    attributes files)."""
    config = repo.config
    try:
        autocrlf = str(config["core.autocrlf"]).lower()
    except (KeyError, pygit2.GitError):
        autocrlf = "false"
    if autocrlf in ("true", "input") or "core.attributesFile" in config:
        return True
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return any(os.path.exists(p) for p in (
        # A linked worktree's git reads the shared info/attributes.
        str(common_dir(Path(repo.path)) / "info" / "attributes"),
        os.path.join(xdg, "git", "attributes"),
        "/etc/gitattributes"))


def _config_bool(repo: pygit2.Repository, name: str, default: bool) -> bool:
    try:
        return bool(repo.config.get_bool(name))
    except (KeyError, pygit2.GitError, ValueError):
        return default
