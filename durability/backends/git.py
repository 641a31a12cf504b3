"""The git backend: captures a plain git working tree with pygit2.

A capture stages the working directory into a private index, as ``git add
-A`` would (``git_index``), writes its tree, and commits it once per attempt
in the batch on top of that attempt's previous checkpoint, pinned under
``refs/durability/git/`` of the private checkpoint store (``git_commit``,
``git_store``).  The user's ``.git/index``, HEAD,
branches, stash and reflogs are never written.  Restore writes only the paths
that differ (``git_restore``).

Each worktree's repository and private index stay open between captures
(``WorktreeIndex``), so a capture after a small change costs a stat of the
tree, or, when a watcher says which paths changed, a stat of those paths.
One process keeps at most ``MAX_OPEN`` worktrees open, least recently used
first out.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pygit2

from durability.backends.base import MOVING, Changes, Progress, Skipped, Snapshot, Stamp
from durability.backends.git_commit import commit_checkpoint, scratch_commit
from durability.backends.git_index import WorktreeIndex
from durability.backends.git_repo import common_dir
from durability.backends.git_store import open_store, store_path
from durability.backends.index_lock import Identity
from durability.backends.space import disk_full
from durability.backends.tree_writer import changes, restore_tree
from durability.ground.errors import GitFailed, WorktreeMissing

__all__ = ["MAX_OPEN", "GitBackend", "forget", "index_seen", "worktree_index"]

#: Worktrees kept open per process; each holds its index in memory (about
#: 200 bytes per file), so the bound caps the service's memory.
MAX_OPEN = 32

_open: OrderedDict[Path, tuple[WorktreeIndex, tuple[int, int, int]]] = OrderedDict()
_open_lock = threading.Lock()


def worktree_index(worktree: Path) -> WorktreeIndex:
    """The open repository and private index of ``worktree``, opened on first
    use and reopened when its git folder was replaced, ``durability forget``
    ran, or another process wrote the private index (decision 0064: the
    first scan after that is a new process's, decision 0062)."""
    if not worktree.is_dir():
        raise WorktreeMissing(f"worktree {worktree} does not exist")
    with _open_lock:
        cached = _open.get(worktree)
        if (cached is not None and _identity(cached[0].repo) == cached[1]
                and not cached[0].written_elsewhere()):
            _open.move_to_end(worktree)
            return cached[0]
        state = WorktreeIndex(worktree)
        _open[worktree] = (state, _identity(state.repo))
        while len(_open) > MAX_OPEN:
            _open.popitem(last=False)
        return state


def index_seen(worktree: Path) -> tuple[Path, Identity | None] | None:
    """The private index file this process keeps open for ``worktree`` and
    its identity as this process last read or wrote it (compare it with
    ``index_lock.identity`` of the file: another process wrote it when they
    differ); None when none is open (a jj worktree, or one not opened yet
    or evicted)."""
    with _open_lock:
        cached = _open.get(worktree)
    return None if cached is None else cached[0].seen()


def forget(worktree: Path) -> None:
    """Drop the open state of ``worktree`` (after an error, or in tests)."""
    with _open_lock:
        _open.pop(worktree, None)


#: Touched by ``durability forget`` beside the private indexes it rewrote: a
#: process that keeps one open reads it again (its entries may name blobs
#: that are gone).
FORGOTTEN_MARK = "forgotten"


def _identity(repo: pygit2.Repository) -> tuple[int, int, int]:
    try:
        st = os.stat(repo.path)
    except OSError:
        return (-1, -1, -1)
    try:
        mark = os.stat(os.path.join(repo.path, "durability", FORGOTTEN_MARK)).st_mtime_ns
    except OSError:
        mark = 0
    return st.st_dev, st.st_ino, mark


class GitBackend:
    """Capture and restore plain git working trees."""

    name = "git"
    stamps_commits = True
    #: A git restore takes no snapshot of its own: its verification stages
    #: the tree, trusting the index entries the restore wrote.
    restored: Snapshot | None = None

    def snapshot(
        self,
        worktree: Path,
        stamps: Sequence[Stamp] = (),
        *,
        changed_paths: Collection[str] | None = None,
    ) -> Snapshot:
        """Stage the worktree and commit it for each stamp's attempt.

        ``changed_paths``: see ``Backend.snapshot``; it is used only once this
        process has fully scanned the worktree, and ignored otherwise.
        Without stamps the tree is committed unpinned (a restore's check).
        """
        state = worktree_index(worktree)
        with state.lock, _git_errors(worktree):
            tree = state.stage(changed_paths)
            state.own(tree)  # before any ref names it: ours holds all it reaches
            store = state.store.repo
            commits = {s.key: commit_checkpoint(store, tree, s, state.repo) for s in stamps}
            first = (commits[stamps[0].key] if stamps
                     else scratch_commit(store, tree, state.repo))
            state.own_parents(commits.values() if stamps else [first])
            skipped = (tuple(Skipped(p, "unreadable-path") for p in state.skipped)
                       + tuple(Skipped(p, MOVING) for p in sorted(state.moving)))
        return Snapshot(first, commits=commits, skipped=skipped)

    def restore(self, worktree: Path, commit_id: str, *, pre_restore: str | None = None,
                paths: Sequence[str] | None = None, dry_run: bool = False,
                progress: Progress | None = None) -> Changes:
        """Make the working directory equal to ``commit_id``'s tree, changing
        only the paths that differ; HEAD and the user's index stay put."""
        state = worktree_index(worktree)
        with state.lock, _git_errors(worktree):
            state.tree = None  # the restore rewrites entries: the next tree is written whole
            return changes(restore_tree(state, _commit(state.repo, worktree, commit_id),
                                        pre_restore, paths=paths, dry_run=dry_run,
                                        progress=progress))

    def tree_id(self, worktree: Path, commit_id: str) -> str:
        state = worktree_index(worktree)
        with state.lock, _git_errors(worktree):
            return str(_commit(state.repo, worktree, commit_id).tree_id)

    @staticmethod
    def checkpoint_repository(worktree: Path) -> pygit2.Repository:
        """The private checkpoint store of the worktree's repository (see
        ``Backend.checkpoint_repository`` and ``git_store``): bare, borrowing
        the user's objects, holding every checkpoint ref; created, and an
        earlier toolkit's checkpoints moved into it, on first use.  A new
        object: never the one kept open with the private index."""
        if not worktree.is_dir():
            raise WorktreeMissing(f"worktree {worktree} does not exist")
        user = pygit2.Repository(str(worktree), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        try:
            store = open_store(common_dir(Path(user.path)))
        except GitFailed as exc:
            raise pygit2.GitError(str(exc)) from exc
        # Bare on disk; this object reads the worktree as its working folder
        # (in memory only), so the worktree can be compared with a checkpoint.
        # Bytes: pygit2 encodes a str strictly, and a name may not be UTF-8.
        store.workdir = os.fsencode(worktree)  # type: ignore[assignment]
        return store


def _commit(repo: pygit2.Repository, worktree: Path, commit_id: str) -> pygit2.Commit:
    try:
        return repo[commit_id].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError) as exc:
        raise GitFailed(f"commit {commit_id} is not in {worktree}'s repository") from exc


@contextmanager
def _git_errors(worktree: Path) -> Iterator[None]:
    """Turn pygit2 and file errors into ``git-failed`` and forget the open
    state, so the next capture starts from a fresh repository object."""
    try:
        yield
    except (pygit2.GitError, OSError) as exc:
        forget(worktree)
        if not worktree.is_dir():
            raise WorktreeMissing(f"worktree {worktree} disappeared") from exc
        full = disk_full(exc, [worktree, *_git_dirs(worktree)])
        if full is not None:
            raise full from exc
        raise GitFailed(f"git capture of {worktree} failed: {exc}") from exc


def _git_dirs(worktree: Path) -> list[str]:
    """The worktree's git folder (a linked worktree's, and the common one)."""
    try:
        repo = pygit2.Repository(str(worktree), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    except pygit2.GitError:
        return []
    common = common_dir(Path(repo.path))
    return [repo.path, str(common), str(store_path(common))]
