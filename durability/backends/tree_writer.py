"""Restore on git: make the working directory equal to a checkpoint's tree.

The current tree is staged first (a full scan of the private index), then
only the paths whose blob or mode differ from the checkpoint are written,
deleted or chmod-ed.  Files that already match are not opened, so they keep
their mtime; untracked ignored files are never in the staged tree, so they are
never deleted; HEAD, branches and the user's index are not read for writing.
The jj backend writes its checkpoints through the same plan and writer
(``plan_trees``, ``apply_plan``).

Every write, delete and chmod goes through ``ConfinedTree``: folders are
opened from the worktree root without following links, so a folder swapped
for a symlink during the restore stops it with ``restore-conflict`` instead
of sending writes or deletes outside the worktree.

Before anything is written, every path is checked for a file that no
checkpoint holds (an ignored or untracked file where a file of the checkpoint
goes, a file to be written where a folder still holds ignored files, an
ignored file where a folder goes): the restore then refuses with
``restore-conflict`` naming the paths and changes nothing.  Refusing, rather
than capturing those files into the pre-restore checkpoint first, is the
choice: ignored files are often large or secret (build output, ``.env``) and
must never enter a checkpoint unasked, and ``jj restore`` skips such files
the same way.  A file there whose content already equals the checkpoint's is
no loss and is not a conflict.

The modes of the files a restore overwrites or deletes are kept under the
pre-restore checkpoint's commit (``modes``), and a restore to that commit (an
undo) puts them back: git trees only know 644 and 755.

A restore may be limited to some paths (``restore --path``): the plan keeps
the changes those paths cover (see ``selection``) and names the others as
left.  A dry run makes the same plan and runs the same checks, then stops
before the first write.

Blobs are written as stored: smudge filters (``.gitattributes`` eol or
``filter=`` drivers) are not applied.  Submodules are left as they are; if a
gitlink differs, the verification that follows the restore says so.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pygit2
from pygit2.enums import DeltaStatus, FileMode

from durability.backends import modes as saved_modes
from durability.backends.base import Changes, Progress
from durability.backends.confined import ConfinedTree, is_dir
from durability.backends.git_repo import common_dir
from durability.backends.selection import covers, touches
from durability.ground.errors import RestoreError

if TYPE_CHECKING:
    # Only git's restore has an index: a jj restore (tree_files) imports
    # this module without the index's scan and store modules.
    from durability.backends.git_index import WorktreeIndex

__all__ = ["Plan", "apply_plan", "changes", "plan_restore", "plan_trees", "restore_tree",
           "select"]

# Names a checkpoint's path may not have: they would leave the worktree or
# write into a repository's own folders.
_FORBIDDEN = {"", ".", "..", ".git", ".jj"}
#: Paths named in a refusal; the rest are counted.
_NAMED = 5


class _Entry(NamedTuple):
    path: str
    oid: pygit2.Oid
    mode: int


# Plain ints: an enum comparison per delta counts at 20,000 paths.
_ADDED, _DELETED = int(DeltaStatus.ADDED), int(DeltaStatus.DELETED)
_LINK, _COMMIT = int(FileMode.LINK), int(FileMode.COMMIT)
_BLOB = pygit2.enums.ObjectType.BLOB
#: The modes a restore writes (a gitlink is left to its submodule); any other
#: is refused before anything is written.
_WRITABLE = frozenset({int(FileMode.BLOB), int(FileMode.BLOB_EXECUTABLE), _LINK, _COMMIT})


@dataclass
class Plan:
    """What a restore changes: paths to delete, and entries to write (with
    the entry they replace, when only the mode may need changing); ``left``,
    the changes a ``--path`` selection leaves out."""

    deletes: list[_Entry]
    writes: list[tuple[_Entry | None, _Entry]]
    left: list[str] = field(default_factory=list)


def plan_restore(state: WorktreeIndex, target: pygit2.Tree, current: str | None = None) -> Plan:
    """Compare the worktree with ``target``: as the commit ``current`` holds
    it, when given (the pre-restore checkpoint, just captured under the
    worktree lock, as the jj backend's restore does), else staged now.

    Planning from the pre-restore checkpoint rather than a second scan is
    also the safer choice: a file changed between the two (by something
    that ignores the worktree lock) is then not planned over unless the
    checkpoint differs there, and the verification that follows reports
    the tree as not restored, instead of the restore overwriting a change
    no checkpoint holds."""
    if current is not None:
        return plan_trees(state.repo[current].peel(pygit2.Tree), target)
    return plan_trees(state.repo[state.stage()].peel(pygit2.Tree), target)


def plan_trees(current: pygit2.Tree, target: pygit2.Tree) -> Plan:
    """What turns a worktree holding ``current`` into ``target``."""
    plan = Plan([], [])
    writes, deletes = plan.writes, plan.deletes
    for delta in current.diff_to_tree(target).deltas:
        status = int(delta.status)
        old, new = _entry(delta.old_file), _entry(delta.new_file)
        _check_safe(new.path)
        if status != _DELETED and new.mode not in _WRITABLE:
            raise RestoreError(
                f"nothing restored: the checkpoint names {new.path!r} with mode "
                f"{new.mode:06o}, which git never writes (a file is 100644 or 100755, a "
                "symlink 120000, a submodule 160000): the tree was not made by git",
                code="restore-conflict")
        if status == _ADDED:
            writes.append((None, new))
        elif status == _DELETED:
            deletes.append(old)
        elif old.mode != new.mode and _LINK in (old.mode, new.mode):
            deletes.append(old)  # a type change: the old one goes first
            writes.append((None, new))
        else:
            writes.append((old, new))
    return plan


def select(plan: Plan, paths: Sequence[str] | None) -> Plan:
    """The part of ``plan`` that restores ``paths`` (all of it for None)."""
    if paths is None:
        return plan
    # A file in the way of a selected path is deleted; one of the checkpoint
    # in the way of a folder there now is not written (see ``selection``).
    chosen = Plan([e for e in plan.deletes if touches(paths, e.path)],
                  [w for w in plan.writes if covers(paths, w[1].path)])
    chosen.left = sorted({e.path for e in plan.deletes if not touches(paths, e.path)}
                         | {w[1].path for w in plan.writes if not covers(paths, w[1].path)})
    return chosen


def changes(plan: Plan) -> Changes:
    """What carrying out ``plan`` changes, by path (see ``Changes``)."""
    going = {e.path for e in plan.deletes if e.mode != _COMMIT}
    write = sorted((new.path, _how(old, new, going)) for old, new in plan.writes
                   if new.mode != _COMMIT)
    written = {path for path, _ in write}
    left = [(path, "outside --path") for path in plan.left]
    left += [(e.path, "submodule") for e in plan.deletes if e.mode == _COMMIT]
    left += [(n.path, "submodule") for _, n in plan.writes if n.mode == _COMMIT]
    return Changes(write=tuple(write), delete=tuple(sorted(going - written)),
                   left=tuple(sorted(set(left))))


def _how(old: _Entry | None, new: _Entry, going: set[str]) -> str:
    if old is None:
        return "replace" if new.path in going else "create"
    return "chmod" if old.oid == new.oid else "overwrite"


def restore_tree(state: WorktreeIndex, target: pygit2.Commit, pre_restore: str | None = None,
                 *, paths: Sequence[str] | None = None, dry_run: bool = False,
                 progress: Progress | None = None) -> Plan:
    """Make the worktree of ``state`` equal to ``target``'s tree (at
    ``paths`` only, when given); the plan it carried out (or, for a dry run,
    would carry out).  ``pre_restore``: the commit under which the modes of
    the files this restore overwrites are kept."""
    plan = select(plan_restore(state, target.tree, pre_restore), paths)
    with _blobs_cached():
        written = apply_plan(state.repo, state.worktree, plan, target=str(target.id),
                             pre_restore=pre_restore, dry_run=dry_run, progress=progress,
                             refs=state.store.repo)
        if not dry_run:
            _record_written(state, plan, written)
    if not dry_run:
        _track_ignored(state, plan)
    return plan


#: Blobs up to this size stay in libgit2's object cache while a restore runs.
_CACHED_BLOB_MAX = 1 << 20
_cache_users = 0
_cache_lock = threading.Lock()


@contextmanager
def _blobs_cached() -> Iterator[None]:
    """libgit2 keeps the blobs read in this block in its object cache.

    Staging a written file (``WorktreeIndex.record``) makes libgit2 check that
    its blob is in the store, a read of the object's header: 9 of the 12
    microseconds an index entry costs for a loose object, unless the object
    is in the cache.  libgit2 caches no blobs by default; here the blobs the
    restore has just read to write their files are still there when the
    check asks.  The check itself stays on (it guards every other thread's
    objects and refs too).  The setting is process-wide: another thread's
    blob reads meanwhile are cached as well; the cache stays within libgit2's
    own bound on its total size (256 MiB by default), past which it drops
    entries.  Nested and concurrent restores share the window: the last one
    out turns blob caching back off (libgit2's default)."""
    global _cache_users
    with _cache_lock:
        _cache_users += 1
        if _cache_users == 1:
            pygit2.settings.cache_object_limit(_BLOB, _CACHED_BLOB_MAX)
    try:
        yield
    finally:
        with _cache_lock:
            _cache_users -= 1
            if _cache_users == 0:
                pygit2.settings.cache_object_limit(_BLOB, 0)


def _record_written(state: WorktreeIndex, plan: Plan,
                    written: Mapping[str, os.stat_result]) -> None:
    """Stage every file the restore wrote from the blob it wrote, with the
    stat data of the file written, as ``git checkout`` updates its index: the
    scan that verifies the restore then trusts those entries instead of
    reading all of them back (at 20,000 files, most of a git restore's cost).
    A file changed after it was written no longer matches its stat data, so
    that scan reads it; one changed within the same clock tick as the index
    is written is read too (the racily-clean rule)."""
    state.record((new.path, new.oid, new.mode, st) for _, new in plan.writes
                 if (st := written.get(new.path)) is not None)
    if written:
        # Written now, the index is newer than the files: libgit2 trusts an
        # entry only when its file is older than the index file.
        state.write()


def _track_ignored(state: WorktreeIndex, plan: Plan) -> None:
    """Stage the written files that the ignore rules now skip, as ``git
    checkout`` would: the checkpoint holds them, so the tree after the
    restore does too.  Staged from the blob id (the file is not read back);
    with no stat data, the next scan hashes them once.  A new path not
    staged from its stat data (a symlink) is staged so whatever the rules
    say: ``_ignored`` cannot tell for a name that is not UTF-8."""
    for old, new in plan.writes:
        if old is None and new.mode != _COMMIT and (
                new.path not in state.index or _ignored(state.repo, new.path)):
            state.index.add(pygit2.IndexEntry(new.path, new.oid, FileMode(new.mode)))


def _ignored(repo: pygit2.Repository, path: str) -> bool:
    """Whether git ignores ``path``.  pygit2 takes only UTF-8 names: a name
    that is not (lone surrogates) is taken as not ignored, and if git does
    ignore it the verification after the restore says so."""
    try:
        return bool(repo.path_is_ignored(path))
    except (UnicodeEncodeError, pygit2.GitError):
        return False


def apply_plan(repo: pygit2.Repository, root: Path, plan: Plan, *, target: str,
               pre_restore: str | None, dry_run: bool = False,
               progress: Progress | None = None,
               refs: pygit2.Repository | None = None,
               stat_written: bool = True) -> dict[str, os.stat_result]:
    """Carry out ``plan`` in ``root``, confined to it; refuse before writing
    anything when a file no checkpoint holds would be lost.  A dry run
    stops after that check; ``progress`` hears of every path done.

    Returns the stat data of every regular file written, read from the
    descriptor that wrote it (see ``WorktreeIndex.record``; nothing, and no
    ``fstat`` per file, when not ``stat_written``: jj reads its own).
    ``refs``: the repository that keeps the modes (git: the private
    checkpoint store, which holds the objects captures wrote), else
    ``repo``."""
    written: dict[str, os.stat_result] = {}
    kept = refs if refs is not None else repo
    with ConfinedTree(root) as tree:
        _check_conflicts(repo, tree, plan)
        if dry_run:
            return written
        seen: dict[str, os.stat_result | None] = {}
        if pre_restore is not None:
            seen = _stat_replaced(tree, plan)
            saved_modes.save(kept, pre_restore, _modes(seen))
        wanted = saved_modes.load(kept, target)
        smudge = _may_filter(repo, root, plan)
        loose = _loose_folders(repo, kept)
        total, done = len(plan.deletes) + len(plan.writes), 0
        for entry in sorted(plan.deletes, key=lambda e: e.path.count("/"), reverse=True):
            _delete(tree, entry)
            done = _step(progress, done, total)
        for old, new in sorted(plan.writes, key=lambda w: w[1].path):
            st = _write(repo, tree, old, new, wanted, seen, smudge=smudge, loose=loose,
                        stat_written=stat_written)
            if st is not None:
                written[new.path] = st
            done = _step(progress, done, total)
    return written


def _may_filter(repo: pygit2.Repository, root: Path, plan: Plan) -> bool:
    """Whether git could filter a file it checks out here (``eol=crlf``,
    ``text`` with ``core.autocrlf``, ``ident``): attributes at the worktree's
    root, among the files written, in the repository or the user's config.
    Only then is each file written through the filters, which costs a
    stream per file; a tree with none (the usual case) is written as stored."""
    # A linked worktree's git reads the shared info/attributes.
    if os.path.lexists(root / ".gitattributes") or os.path.exists(
            common_dir(Path(repo.path)) / "info" / "attributes"):
        return True
    if any(new.path == ".gitattributes" or new.path.endswith("/.gitattributes")
           for _, new in plan.writes):
        return True
    try:
        autocrlf = str(repo.config["core.autocrlf"]).lower()
    except (KeyError, pygit2.GitError):
        autocrlf = "false"
    return autocrlf in ("true", "input") or "core.attributesFile" in repo.config


def _checked_out(repo: pygit2.Repository, path: str, oid: pygit2.Oid, data: bytes) -> bytes:
    """The blob as git checks it out at ``path`` (its smudge and eol filters
    applied, as the attributes and config say); as stored when libgit2 cannot
    filter it (a filter driver it does not run, such as LFS's, is left out)."""
    blob = repo[oid]
    if not isinstance(blob, pygit2.Blob):
        return data
    try:
        with pygit2.BlobIO(blob, as_path=path) as stream:
            return bytes(stream.read())
    except (pygit2.GitError, OSError, ValueError):
        return data


def _step(progress: Progress | None, done: int, total: int) -> int:
    if progress is not None:
        progress(done + 1, total)
    return done + 1


def _check_safe(path: str) -> None:
    """A tree read from the repository could name ``..`` or ``.git``: such a
    path is never written (captures never produce one)."""
    framed = f"/{path}/"
    if "/." not in framed and "//" not in framed and "\0" not in path:
        return  # every forbidden name is empty or starts with a dot
    parts = path.split("/")
    if path.startswith("/") or "\0" in path or \
            any(p in _FORBIDDEN or p.lower() in (".git", ".jj") for p in parts):
        raise RestoreError(f"nothing restored: the checkpoint names an unsafe path {path!r}",
                           code="restore-conflict")


def _entry(file: pygit2.DiffFile) -> _Entry:
    return _Entry(file.path, file.id, int(file.mode))


def _check_conflicts(repo: pygit2.Repository, tree: ConfinedTree, plan: Plan) -> None:
    going = {e.path for e in plan.deletes}
    checked: set[str] = set()
    unrecorded: list[str] = []
    for old, new in plan.writes:
        # The folders above it not checked yet, outermost first (a checked
        # folder's own parents were checked with it).
        unchecked: list[str] = []
        folder = new.path.rpartition("/")[0]
        while folder and folder not in checked:
            unchecked.append(folder)
            checked.add(folder)
            folder = folder.rpartition("/")[0]
        for folder in reversed(unchecked):
            st = tree.lstat(folder)
            if st is not None and not is_dir(st) and folder not in going:
                raise _conflict(f"{folder} is a file or symlink where a folder of {new.path} goes")
        if new.mode == _COMMIT:
            continue
        if old is not None and old.mode != _COMMIT:
            # The tree just staged has a file or link here, not a folder: a
            # folder made there since is refused when the write meets it.
            continue
        st = tree.lstat(new.path)
        if is_dir(st):
            left = set(tree.files_under(new.path)) - going
            if left:
                raise _conflict(f"{new.path} is a folder still holding {sorted(left)[0]}")
        elif old is None and st is not None and new.path not in going \
                and not _holds(repo, tree, new, st):
            unrecorded.append(new.path)
    if unrecorded:
        named = ", ".join(sorted(unrecorded)[:_NAMED])
        more = f" and {len(unrecorded) - _NAMED} more" if len(unrecorded) > _NAMED else ""
        raise _conflict(f"{named}{more}: content no checkpoint holds would be overwritten")


def _holds(repo: pygit2.Repository, tree: ConfinedTree, new: _Entry, st: os.stat_result) -> bool:
    """Whether the file or link already at ``new.path`` equals ``new`` (so
    overwriting it loses nothing)."""
    folder, _, name = new.path.rpartition("/")
    fd = tree.dir_fd(folder)
    try:
        if stat.S_ISLNK(st.st_mode):
            data = os.fsencode(os.readlink(name, dir_fd=fd))
            return new.mode == _LINK and pygit2.hash(data) == new.oid
        if not stat.S_ISREG(st.st_mode) or new.mode == _LINK:
            return False
        file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return False
    try:
        with os.fdopen(file_fd, "rb", closefd=False) as f:
            return pygit2.hash(f.read()) == new.oid
    finally:
        os.close(file_fd)


def _conflict(detail: str) -> RestoreError:
    return RestoreError(f"nothing restored: {detail} (ignored or untracked, never overwritten "
                        "or deleted by a restore; move it away and retry)",
                        code="restore-conflict")


def _stat_replaced(tree: ConfinedTree, plan: Plan) -> dict[str, os.stat_result | None]:
    """The stat data of every path the plan overwrites or deletes, taken
    before anything is written: their modes are kept (``_modes``), and a
    write of a file only to change its mode reads the mode from here."""
    paths = [e.path for e in plan.deletes] + [old.path for old, _ in plan.writes if old]
    return {path: tree.lstat(path) for path in paths}


def _modes(seen: Mapping[str, os.stat_result | None]) -> dict[str, int]:
    """The permission bits of the regular files among ``seen``."""
    return {path: stat.S_IMODE(st.st_mode) for path, st in seen.items()
            if st is not None and stat.S_ISREG(st.st_mode)}


def _delete(tree: ConfinedTree, entry: _Entry) -> None:
    if entry.mode == _COMMIT:
        return  # a submodule's folder is its own repository: left alone
    tree.unlink(entry.path)  # a folder there now is left, and the verification says so
    # Folders a delete left empty go (one holding ignored files stays).
    tree.prune(entry.path.rpartition("/")[0])


def _write(repo: pygit2.Repository, tree: ConfinedTree, old: _Entry | None, new: _Entry,
           wanted: Mapping[str, int],
           seen: Mapping[str, os.stat_result | None], *,
           smudge: bool = False, loose: Sequence[str] = (),
           stat_written: bool = True) -> os.stat_result | None:
    """Write ``new``; the stat data of the regular file written, if one was
    (and ``stat_written``).  ``seen``: stat data taken before the restore
    began writing (see ``_stat_replaced``); a path missing there is looked
    at now.  ``loose``: where loose objects may be (``_loose_folders``)."""
    if new.mode == _COMMIT:
        return None  # checking out a submodule commit is the submodule's business
    # Usually no mode is kept for the target (only a pre-restore checkpoint has them).
    mode = _kept_mode(wanted.get(new.path), new.mode) if wanted else None
    if old is None:
        st = tree.lstat(new.path)
        if is_dir(st) and not tree.rmdir(new.path):
            # Emptied by the deletes, as _check_conflicts made sure: unless
            # something filled it meanwhile.
            raise _conflict(f"{new.path} is a folder that is not empty")
    elif old.oid == new.oid:
        # Only the mode differs: a file is chmod-ed, not rewritten.
        st = seen[new.path] if new.path in seen else tree.lstat(new.path)
        if st is not None and stat.S_ISREG(st.st_mode):
            _chmod(tree, new.path, st, new.mode, mode)
            return None
    # Otherwise a file or link of the tree just captured is replaced: not
    # looked at first (a folder made there since stops the write below).
    if new.mode != _LINK and not smudge and _may_be_large(loose, new) \
            and _header(repo, new) > _STREAM_MIN:
        chunks = _streamed(repo, new)
        if chunks is not None:
            if mode is not None:
                return tree.write_file(new.path, chunks, mode, exact_mode=True,
                                       want_stat=stat_written)
            return tree.write_file(new.path, chunks,
                                   0o777 if new.mode == FileMode.BLOB_EXECUTABLE else 0o666,
                                   want_stat=stat_written)
    kind, data = repo.read(new.oid)
    if kind != _BLOB:
        what = pygit2.enums.ObjectType(kind).name.lower()
        raise RestoreError(f"restore stopped at {new.path}: the checkpoint names a {what} "
                           "where a file goes", code="restore-conflict")
    if new.mode == _LINK:
        tree.write_link(new.path, data)
        return None
    if smudge:
        data = _checked_out(repo, new.path, new.oid, data)
    if mode is not None:
        return tree.write_file(new.path, data, mode, exact_mode=True, want_stat=stat_written)
    # The mode comes from the umask, as for a file git checks out.
    return tree.write_file(new.path, data,
                           0o777 if new.mode == FileMode.BLOB_EXECUTABLE else 0o666,
                           want_stat=stat_written)


#: Blobs larger than this are streamed from ``git cat-file`` in chunks
#: rather than read whole (libgit2 inflates an object whole, and a copy of
#: it to Python doubled that: a 2 GiB blob took 4.2 GB to restore).
_STREAM_MIN = 16 << 20


def _loose_folders(repo: pygit2.Repository, kept: pygit2.Repository) -> list[str]:
    """The object folders a blob of the restore may be loose in, the likeliest
    first: a git worktree's private checkpoint store (``kept``: the objects
    its captures wrote, decision 0049), then the repository's own."""
    folders: list[str] = []
    for path in (kept.path, repo.path):
        folder = os.path.join(path, "objects", "")
        if folder not in folders:
            folders.append(folder)
    return folders


def _may_be_large(loose: Sequence[str], new: _Entry) -> bool:
    """Whether ``new``'s blob may be over ``_STREAM_MIN``, from one stat: a
    loose object is zlib data, which inflates at most about 1,032 times, so a
    small loose file is a small blob (most files; no header read).  A packed
    object (loose in none of ``loose``) is looked at (its header is cheap to
    read from the pack)."""
    hexed = str(new.oid)
    name = f"{hexed[:2]}/{hexed[2:]}"
    for folder in loose:
        try:
            deflated = os.stat(folder + name).st_size
        except OSError:
            continue
        return deflated * 1032 > _STREAM_MIN
    return True


def _header(repo: pygit2.Repository, new: _Entry) -> int:
    """The size of ``new``'s blob, without reading it (0 when it is not a
    blob: the whole read below says what it is)."""
    try:
        kind, size = repo.odb.read_header(new.oid)
    except (KeyError, ValueError, pygit2.GitError):
        return 0  # not there: the read below fails as it always did
    return int(size) if int(kind) == int(_BLOB) else 0


def _streamed(repo: pygit2.Repository, new: _Entry) -> Iterator[bytes] | None:
    """The blob's bytes in chunks from ``git cat-file`` (None without git:
    then it is read whole)."""
    import shutil

    from durability.ground import proc

    git = shutil.which("git")
    if git is None:
        return None
    # Only the repository named here: none of the caller's GIT_* settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    argv = [git, f"--git-dir={_object_home(repo)}", "cat-file", "blob", str(new.oid)]

    def chunks() -> Iterator[bytes]:
        try:
            yield from proc.stream(argv, env=env)
        except (proc.StreamFailed, OSError) as exc:
            raise RestoreError(f"restore stopped at {new.path}: git cat-file could not read "
                               f"its blob: {exc}", code="restore-conflict") from exc
    return chunks()


def _object_home(repo: pygit2.Repository) -> str:
    """The git dir whose objects are all ``repo`` reads: a git worktree's
    private checkpoint store (it borrows the user's objects, decision 0049)
    when there is one, else the repository itself (jj's store)."""
    from durability.backends.git_repo import common_dir
    from durability.backends.git_store import store_path

    store = store_path(common_dir(Path(repo.path)))
    return str(store) if (store / "objects").is_dir() else str(repo.path)


def _kept_mode(kept: int | None, mode: int) -> int | None:
    """A mode kept before an earlier restore, when it agrees with the tree
    (git's rule: executable when the owner may execute)."""
    if kept is None or mode not in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
        return None
    return kept if bool(kept & 0o100) == (mode == FileMode.BLOB_EXECUTABLE) else None


def _chmod(tree: ConfinedTree, path: str, st: os.stat_result, mode: int,
           kept: int | None) -> None:
    current = stat.S_IMODE(st.st_mode)
    if kept is not None:
        wanted = kept
    elif mode == FileMode.BLOB_EXECUTABLE:
        wanted = current | ((current & 0o444) >> 2)  # x wherever r is, as git does
    else:
        wanted = current & ~0o111
    if wanted != current:
        tree.chmod(path, wanted)
