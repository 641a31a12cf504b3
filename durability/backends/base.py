"""What a capture backend provides."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from durability.store import AttemptKey

if TYPE_CHECKING:
    import pygit2

__all__ = ["Backend", "Changes", "Progress", "Skipped", "Snapshot", "Stamp", "backend_type"]

#: Called as ``progress(done, total)`` while a restore writes and deletes
#: files (the CLI draws it; the library never prints).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Stamp:
    """Whom a capture answers: one attempt and the requests of it in the batch.

    A backend that writes its own commits (git) names them after this; jj
    ignores it.  ``seq`` is the seq the store will give the checkpoint, read
    by the capturer under the worktree lock just before capturing, or None when
    the store could not be read (the store stays the authority: see
    ``durability.capture.capturer``).
    """

    key: AttemptKey
    source: str
    request_ids: tuple[str, ...]
    tool_use_id: str | None = None
    label: str | None = None
    seq: int | None = None


@dataclass(frozen=True, order=True)
class Skipped:
    """A path a capture left out: its checkpoint does not hold what is there now.

    ``reason`` is a gap reason: ``unreadable-path`` (the file or folder could
    not be read; a file the checkpoint already held keeps its previous
    content there) or ``file-too-large`` (jj refused a new file over
    ``snapshot.max-new-file-size``).
    """

    path: str
    reason: str


#: The ``Skipped`` reason of a path still changing after every retry (the
#: checkpoint holds its last consistent content).  Not a gap: the agent was
#: busy, and the next capture takes it.  But its current content is in no
#: checkpoint, so a restore must not overwrite it.  The path ``""`` means the
#: whole tree (jj answered with its last snapshot).
MOVING = "moving"


@dataclass(frozen=True)
class Snapshot:
    """One captured state of a worktree, pinned against garbage collection.

    ``commits`` maps an attempt to its own commit when the backend wrote one
    per attempt (git: each attempt's checkpoints form their own chain); any
    other attempt is answered by ``commit_id``.
    """

    commit_id: str
    change_id: str | None = None
    operation_id: str | None = None
    commits: Mapping[AttemptKey, str] = field(default_factory=dict)
    #: Paths left out of this capture; the commit holds everything else.
    skipped: tuple[Skipped, ...] = ()

    def commit_for(self, key: AttemptKey) -> str:
        """The commit that records this capture for attempt ``key``."""
        return self.commits.get(key, self.commit_id)


@dataclass(frozen=True)
class Changes:
    """What a restore writes, deletes and leaves, by worktree-relative path.

    ``write`` pairs a path with how it is written: ``create`` (nothing there
    in the recorded tree), ``overwrite`` (other content), ``chmod`` (same
    content, the executable bit changes) or ``replace`` (a file becomes a
    symlink or the other way round).  ``left`` pairs a path that differs from
    the checkpoint but is left as it is with why: ``outside --path`` or
    ``submodule`` (a submodule's commit is never checked out).
    """

    write: tuple[tuple[str, str], ...] = ()
    delete: tuple[str, ...] = ()
    left: tuple[tuple[str, str], ...] = ()


class Backend(Protocol):
    """A way to capture and restore one kind of worktree."""

    name: str
    #: Whether the backend writes the stamps (attempt, seq) into its commits,
    #: so the capturer reads the next seq from the store before capturing.
    stamps_commits: bool
    #: The snapshot this backend's last ``restore`` took once it had written
    #: everything (jj: the one that records the files written), or None when
    #: it took none: the verification that follows reads the tree from it
    #: instead of snapshotting again (decision 0054).
    restored: Snapshot | None

    def snapshot(
        self,
        worktree: Path,
        stamps: Sequence[Stamp] = (),
        *,
        changed_paths: Collection[str] | None = None,
    ) -> Snapshot:
        """Capture the worktree as it is now and pin the commit (contracts 1, 4: docs/DESIGN.md).

        ``changed_paths`` (worktree-relative) is a watcher's promise that
        nothing else changed since this requester's previous capture; None
        means "unknown", and the backend scans the whole tree.  A backend may
        always ignore it and scan.
        """
        ...

    def restore(self, worktree: Path, commit_id: str, *, pre_restore: str | None = None,
                paths: Sequence[str] | None = None, dry_run: bool = False,
                progress: Progress | None = None) -> Changes:
        """Make the worktree's files equal to ``commit_id``'s tree, writing
        only inside the worktree (never through a symlink) and never over a
        file no checkpoint holds.  ``pre_restore`` is the checkpoint just taken
        of the worktree as it is: the plan starts from its tree, and the modes
        of the files replaced are kept under it for an undo.

        ``paths`` (worktree-relative, from ``selection.normalize``) limits the
        restore to them; ``dry_run`` makes the same plan and the same checks
        and changes nothing.  Returns what was (or would be) changed."""
        ...

    def tree_id(self, worktree: Path, commit_id: str) -> str:
        """The id of ``commit_id``'s tree, for verifying a restore."""
        ...

    @staticmethod
    def checkpoint_repository(worktree: Path) -> pygit2.Repository:
        """The git repository that holds ``worktree``'s checkpoints, opened
        afresh (the caller may set its working folder or ignore rules): for
        git the worktree's own (a linked worktree's shares the main one's
        objects and refs), for jj the git store behind jj.  Raises
        ``pygit2.GitError`` when it cannot be opened.  A static method: it
        needs no backend (no jj binary) to answer."""
        ...


def backend_type(name: str) -> type[Backend]:
    """The backend class called ``name`` (``jj`` or ``git``, as
    ``backends.backend_name`` answers), for what needs no instance of it."""
    if name == "git":
        from durability.backends.git import GitBackend

        return GitBackend
    if name == "jj":
        from durability.backends.jj import JjBackend

        return JjBackend
    raise ValueError(f"no backend called {name!r}")
