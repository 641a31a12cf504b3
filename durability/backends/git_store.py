"""The private repository that holds a git worktree's checkpoints (decision 0049).

Checkpoint commits, their trees and blobs, and every ref the toolkit keeps
for them live in a bare repository of the toolkit's own inside the user's
common git folder, ``<common git dir>/durability/checkpoints.git``, never in
the user's object store or refs.  So ``git log --all``, ``gitk --all``,
``git for-each-ref``, ``git branch -a``, IDE graphs and a clone of the
repository see nothing of ours, and the user's ``git fsck`` has no dangling
checkpoint to report: git reads nothing under a folder of ``.git`` it does
not know.

The direction of sharing is one way: ours borrows the user's objects
(``objects/info/alternates``, a relative path, so a copied repository's
store borrows from its own copy), the user's repository never borrows ours.
A borrowed object can go: the user's ``git gc --prune=now`` removes a blob
the user staged and dropped, and a history the user rewrote takes its trees
and blobs with it.  So ours **owns** a copy of every object its checkpoints
reach (``Store.own``):

- a capture writes what is new into ours (the staging repository's object
  database gets ours as its first, writable backend);
- what the capture found already in the user's store (a blob the user
  committed or staged; the user's HEAD, the first checkpoint's parent) is
  copied: the user's pack files are hard-linked into ours (same file
  system, no bytes copied: a pack is never modified, only deleted, and the
  link keeps it) and its loose objects linked one by one, once per process
  and again whenever a checkpoint's parent is a user commit ours does not
  hold; after that, each capture copies only the objects of the paths that
  changed that ours does not hold (a walk of the changed subtrees).

Ours never runs ``git gc --auto`` (``gc.auto=0``): a repack with
``--local`` would drop the copies it holds of objects the user's store
also has.  The toolkit's own ``durability gc`` repacks it without
``--local``.

Checkpoints written by an earlier toolkit into the user's repository are
moved on first use (``migrate``): the user's store is linked into ours, the
refs created in ours, then deleted from the user's repository, each step
idempotent, under a lock, so a crash at any point is finished by the next
open.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

from durability.ground.errors import GitFailed

__all__ = ["MOVED", "STORE_NAME", "Store", "is_store", "open_store", "store_path",
           "user_common", "user_refs"]

log = logging.getLogger("durability.backends")

STORE_NAME = "checkpoints.git"
#: The refs a git worktree's checkpoints use that move into ours.  Not
#: ``refs/durability/jj/`` (the jj backend's pins, in jj's own store) and
#: not ``refs/durability/isolated/`` (an isolated task's worktree HEAD,
#: which must be a ref of the user's repository).
MOVED = ("refs/durability/",)
_STAY = ("refs/durability/jj/", "refs/durability/isolated/")
_ALTERNATE = "../../../objects"
_TREE, _COMMIT_MODE = int(FileMode.TREE), int(FileMode.COMMIT)
_CONFIG = (("core.logAllRefUpdates", "false"), ("gc.auto", "0"), ("gc.autoDetach", "false"),
           ("uploadpack.allowAnySHA1InWant", "true"), ("receive.autogc", "false"))
_lock = threading.Lock()


def store_path(common: Path) -> Path:
    """Where the private repository of the git repository ``common`` is."""
    return common / "durability" / STORE_NAME


def is_store(path: Path) -> bool:
    """Whether ``path`` is one of the toolkit's private repositories."""
    return path.name == STORE_NAME and path.parent.name == "durability"


def user_common(store: Path) -> Path:
    """The user's common git dir whose checkpoints ``store`` holds."""
    return store.parent.parent


def user_refs(repo: pygit2.Repository) -> pygit2.Repository:
    """The repository whose branches, tags and remote-tracking refs are the
    user's: for a private checkpoint store, the user's own (its commits are
    readable from the store too, through the alternates); else ``repo``."""
    path = Path(repo.path)
    if not is_store(path):
        return repo
    return pygit2.Repository(str(user_common(path)), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)


def open_store(common: Path) -> pygit2.Repository:
    """The private repository of ``common`` (the user's common git dir),
    created and the user's old checkpoint refs moved in on first use."""
    path = store_path(common)
    if not (path / "objects" / "info" / "alternates").is_file() or _has_old_refs(common):
        with _locked(common):
            if not (path / "objects" / "info" / "alternates").is_file():
                _create(path)
            migrate(common, path)
    try:
        return pygit2.Repository(str(path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    except pygit2.GitError as exc:
        raise GitFailed(f"cannot open the checkpoint store {path}: {exc}") from exc


@contextlib.contextmanager
def _locked(common: Path) -> Iterator[None]:
    folder = common / "durability"
    folder.mkdir(mode=0o700, exist_ok=True)
    with _lock:
        fd = os.open(folder / "store.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
                     | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _create(path: Path) -> None:
    """A bare repository borrowing the user's objects, made in a scratch
    folder and renamed into place whole (a crash leaves only the scratch)."""
    scratch = path.with_name(f"{path.name}.new-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    for old in path.parent.glob(f"{path.name}.new-*"):
        shutil.rmtree(old, ignore_errors=True)  # a crashed creation's (we hold the lock)
    shutil.rmtree(path, ignore_errors=True)  # one whose alternates never got written
    repo = pygit2.init_repository(str(scratch), bare=True)
    for name, value in _CONFIG:
        repo.config[name] = value
    # The user's info/ (exclude, attributes): a working folder set on the
    # store (inspect, restore checks) follows the user's ignore rules.
    shutil.rmtree(scratch / "info", ignore_errors=True)
    os.symlink("../../info", scratch / "info")
    objects_info = scratch / "objects" / "info"
    objects_info.mkdir(parents=True, exist_ok=True)
    (objects_info / "alternates").write_text(_ALTERNATE + "\n", encoding="utf-8")
    os.rename(scratch, path)


# -- moving an earlier toolkit's checkpoints in ----------------------------------


def _old_refs(repo: pygit2.Repository) -> list[str]:
    return sorted(n for n in repo.references
                  if n.startswith(MOVED) and not n.startswith(_STAY))


def _has_old_refs(common: Path) -> bool:
    """A cheap look for refs an earlier toolkit left in the user's repository
    (loose refs under ``refs/durability``, or packed ones)."""
    loose = common / "refs" / "durability"
    for folder, dirs, files in os.walk(loose):
        if Path(folder) == loose:
            dirs[:] = [d for d in dirs if d not in ("jj", "isolated")]
        if files:
            return True
    try:
        with open(common / "packed-refs", "rb") as f:
            for line in f:
                if b" refs/durability/" in line and not (
                        b" refs/durability/jj/" in line or b" refs/durability/isolated/" in line):
                    return True
    except OSError:
        pass
    return False


def migrate(common: Path, path: Path) -> int:
    """Move the checkpoint refs an earlier toolkit kept in the user's
    repository (and the objects they reach) into ours; returns how many
    refs moved.  Idempotent; the caller holds the store lock.

    1. the objects those refs reach: every pack and loose object of the
       user's store linked into ours (``link_all``; a link is whole or absent,
       and a pack's index is linked after the pack);
    2. each ref created in ours (a ref already there was written by this
       toolkit after an earlier, interrupted move: it is newer and stays);
    3. each ref deleted from the user's repository, only while it still
       names what was copied.
    """
    try:
        user = pygit2.Repository(str(common), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        names = _old_refs(user)
        if not names:
            return 0
        targets = {n: user.references[n].target for n in names}
        link_all(common, path)  # every object of the user's store, ours included
        ours = pygit2.Repository(str(path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        for name, target in targets.items():
            if name not in ours.references:
                ours.references.create(name, target)
        for name, target in targets.items():
            ref = user.references.get(name)
            if ref is not None and ref.target == target:
                ref.delete()
    except (pygit2.GitError, OSError) as exc:
        raise GitFailed(f"cannot move the checkpoints of {common} into {path}: {exc}") from exc
    log.info("moved %d checkpoint refs of %s into %s", len(names), common, path)
    return len(names)


# -- owning what a checkpoint reaches ----------------------------------------------


class Store:
    """The private repository of one git repository, as a capture uses it:
    refs and commits in ``repo``; the user's object store lent to a staging
    repository (``lend``); copies of borrowed objects taken (``own``)."""

    def __init__(self, common: Path) -> None:
        self.common = common
        self.path = store_path(common)
        self.repo = open_store(common)
        objects = str(self.path / "objects")
        #: Ours alone (no alternates): what ours holds itself.
        self.local = pygit2.Odb()
        self.local.add_backend(pygit2.OdbBackendPack(objects), 2)
        self.local.add_backend(pygit2.OdbBackendLoose(objects, -1, False), 1)
        #: Set once the user's store was linked in by this process.
        self.linked = False

    def lend(self, staging: pygit2.Repository) -> None:
        """Make ``staging`` (the user's repository, with the private index)
        read ours first and write into ours: ours' backends take priority
        over the user's (a loose write goes to the first writable one)."""
        objects = str(self.path / "objects")
        staging.odb.add_backend(pygit2.OdbBackendPack(objects), 4)
        staging.odb.add_backend(pygit2.OdbBackendLoose(objects, -1, False), 3)

    def own(self, staging: pygit2.Repository, tree: pygit2.Oid,
            previous: pygit2.Oid | None) -> None:
        """Make ours hold every object of ``tree``.

        ``previous``: a tree ours already holds whole (the last one owned):
        only what differs from it is looked at (KeyError when it is gone).
        The first time in a process the user's whole store is linked in
        instead, which covers everything the capture found borrowed."""
        if not self.linked:
            self.link_all()
            return
        self._own_tree(staging, tree, previous)

    def _own_tree(self, staging: pygit2.Repository, new: pygit2.Oid,
                  old: pygit2.Oid | None) -> None:
        stack: list[tuple[pygit2.Oid, pygit2.Oid | None]] = [(new, old)]
        while stack:
            new_id, old_id = stack.pop()
            if new_id == old_id:
                continue
            self._own(staging, new_id)
            new_tree = staging[new_id].peel(pygit2.Tree)
            before: dict[str, pygit2.Object] = {}
            if old_id is not None:
                before = {e.name: e for e in staging[old_id].peel(pygit2.Tree) if e.name}
            for entry in new_tree:
                was = before.get(entry.name or "")
                if was is not None and was.id == entry.id:
                    continue
                if entry.filemode == _TREE:
                    stack.append((entry.id, was.id if was is not None
                                  and was.filemode == _TREE else None))
                elif entry.filemode != _COMMIT_MODE:  # a gitlink names no object of ours
                    self._own(staging, entry.id)

    def _own(self, staging: pygit2.Repository, oid: pygit2.Oid) -> None:
        if oid in self.local:
            return
        kind, data = staging.odb.read(oid)
        self.local.write(kind, data)

    def link_all(self) -> None:
        """Link the user's whole store into ours (``link_all``)."""
        link_all(self.common, self.path)
        self.linked = True


def link_all(common: Path, path: Path) -> None:
    """Link every pack and loose object of the user's store ``common`` into
    the store at ``path`` (a hard link where the file system allows, else a
    copy): from then on ours holds all it borrowed."""
    source, target = common / "objects", path / "objects"
    for _ in range(3):  # a user's repack deleting a pack meanwhile: look again
        if _link_packs(source / "pack", target / "pack"):
            break
    for fan in _fanout(source):
        names = _listdir(source / fan)
        if not names:
            continue
        (target / fan).mkdir(exist_ok=True)
        for name in names:
            if len(name) == 38:
                _link(source / fan / name, target / fan / name)


def _link_packs(source: Path, target: Path) -> bool:
    """False when a pack went away while it was being linked."""
    target.mkdir(parents=True, exist_ok=True)
    settled = True
    for name in _listdir(source):
        if not name.endswith(".idx"):
            continue
        stem = name[:-len(".idx")]
        if (target / name).exists():
            continue
        # The pack (and its reverse index) before its index: a reader
        # looks for packs by their index.
        ok = _link(source / f"{stem}.pack", target / f"{stem}.pack")
        if ok and (source / f"{stem}.rev").exists():
            _link(source / f"{stem}.rev", target / f"{stem}.rev")
        if not ok or not _link(source / name, target / name):
            settled = False
            with contextlib.suppress(OSError):
                os.unlink(target / f"{stem}.pack")
    return settled


def _fanout(objects: Path) -> list[str]:
    return [n for n in _listdir(objects) if len(n) == 2 and n != ".."]


def _listdir(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _link(source: Path, target: Path) -> bool:
    """``source`` at ``target`` (True also when it is there already); False
    when ``source`` is gone."""
    try:
        os.link(source, target)
    except FileExistsError:
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        scratch = target.with_name(target.name + f".tmp-{os.getpid()}")
        try:
            shutil.copyfile(source, scratch)
        except FileNotFoundError:
            return False
        os.replace(scratch, target)
    return True
