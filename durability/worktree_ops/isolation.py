"""Isolated worktrees for the engine's tasks (``durability.runs.isolated.IsolationOps``).

An isolated task gets a worktree of its own under the state folder
(``$DURABILITY_HOME/worktrees/durability-<hash>``), holding the shared
worktree's tree as it was when the task began (the *base*):

- jj: ``jj workspace add`` (not colocated) on the base's parents, then ``jj
  restore --from BASE`` in the new workspace, so its working-copy commit is
  no descendant of the shared ``@`` (which every snapshot rewrites: a child
  would be rebased under the task and its workspace go stale).
- git: ``git worktree add`` on a private branch, ``refs/durability/isolated/
  <name>``, at the base's checkpoint commit.

Merging back is a three-way merge of trees through pygit2 (base, the shared
worktree now, the task's tree), for both backends: the merged tree is
written into the shared worktree with the backend's confined restore writer
(jj records it with its next snapshot, as the task's commit squashed onto
the shared line).  Both sides are checkpoints of the task's attempt: the
task's tree (``merge``) and the shared tree after the merge (``merged``), or
as it stood when the merge conflicted (``merge-conflict``); nothing is
written into the shared worktree when it conflicts.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import filelock
import pygit2

from durability.backends import Backend, git_cli
from durability.backends.git_commit import signature
from durability.capture.capturer import Capturer, CaptureRequest, Outcome
from durability.capture.inprocess import lazy_store
from durability.config import Settings
from durability.ground import proc
from durability.ground.errors import CaptureError, JjFailed, LockTimeout
from durability.ground.paths import ensure_private_dir
from durability.ground.store_errors import WorktreeConflict
from durability.runs.isolated import Made, TaskWorktree
from durability.store import AttemptKey

__all__ = ["REF_PREFIX", "DurabilityIsolation", "worktree_name"]

#: The private branches of isolated git worktrees.
REF_PREFIX = "refs/durability/isolated/"
#: Where a merge back in progress pins the shared tree before and after it.
JOURNAL_PREFIX = "refs/durability/merging/"


def worktree_name(run_id: str, node_id: str, iteration: int) -> str:
    """A name fit for a folder, a jj workspace and a ref (ids may hold
    characters none of them takes, such as ``@`` in a revset)."""
    basis = "\0".join([run_id, node_id, str(iteration)])
    return "durability-" + hashlib.sha256(basis.encode("utf-8", "surrogatepass")).hexdigest()[:20]


class DurabilityIsolation:
    """Isolated jj workspaces and git worktrees, merged back with pygit2."""

    def __init__(self, settings: Settings, env: Mapping[str, str] = os.environ) -> None:
        self.settings = settings
        self.env = env

    # -- making -------------------------------------------------------------

    def create(self, run_id: str, node_id: str, iteration: int, shared: str,
               base: str | None = None) -> Made:
        root = Path(shared)
        name = worktree_name(run_id, node_id, iteration)
        # Resolved: captures key a worktree by its real path.
        path = ensure_private_dir(self.settings.state_dir / "worktrees").resolve() / name
        capturer = self._capturer()
        backend = capturer.backend(root)
        if base is None:
            with self._locked(capturer, root):
                base = backend.snapshot(root).commit_id
        self._clear(backend.name, root, path, name)  # what a crash mid-create left
        if backend.name == "jj":
            self._jj(root, "--config", "git.colocate=false", "workspace", "add", "--name", name,
                     "-r", f"parents({base})", str(path))
            self._jj(path, "restore", "--from", base)
        else:
            # The base checkpoint is in the private store (decision 0049): a
            # worktree of the user's repository needs its commit in the user's
            # store, under the ref its HEAD names while the task runs.
            store = backend.checkpoint_repository(root).path
            git_cli.run(["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", store,
                         f"+{base}:{REF_PREFIX + name}"], env=self.env,
                        timeout=self.settings.jj_timeout_s,
                        needs="an isolated git worktree needs it", cwd=str(root),
                        options=["-C", str(root), "-c", "gc.auto=0",
                                 "-c", "maintenance.auto=false"], timeout_code="timeout")
            self._git(root, "worktree", "add", "--detach", str(path), base)
            self._git(path, "symbolic-ref", "HEAD", REF_PREFIX + name)
        return Made(str(path), backend.name, base, name)

    def usable(self, row: TaskWorktree) -> bool:
        marker = ".jj" if row.kind == "jj" else ".git"
        return os.path.lexists(os.path.join(row.path, marker))

    # -- merging back -------------------------------------------------------

    def merge_back(self, row: TaskWorktree, key: AttemptKey) -> str:
        shared, mine = Path(row.shared), Path(row.path)
        capturer = self._capturer()
        theirs = _ok(capturer.capture([_request(key, mine, "merge", "the task's tree, merged "
                                                "back")], lock_timeout_s=self._lock_s())[0])
        _whole(key, theirs, mine)
        with self._locked(capturer, shared):
            backend = capturer.backend(shared)
            ours = backend.snapshot(shared).commit_id
            repo = backend.checkpoint_repository(shared)
            journal = _Journal(repo, row.name)
            index = repo.merge_trees(_tree(repo, row.base_commit),
                                     journal.ours(_tree(repo, ours)),
                                     _tree(repo, theirs.commit_id or ""))
            if index.conflicts is not None:
                paths = sorted({e.path for entries in index.conflicts for e in entries if e})
                kept = _ok(capturer.capture_locked([_request(
                    key, shared, "merge-conflict", "the shared tree a merge conflicted with")])[0])
                raise WorktreeConflict(
                    f"{key.node_id} changed {_listing(paths)} differently from the shared "
                    f"worktree since it began: nothing merged; the task's tree is seq "
                    f"{theirs.seq} ({mine}, kept), the shared tree seq {kept.seq}")
            merged = index.write_tree(repo)
            if merged != _tree(repo, ours).id:
                journal.begin(_tree(repo, ours).id, merged)
                self._write(backend, repo, shared, merged, ours)
            after = _ok(capturer.capture_locked([_request(
                key, shared, "merged", f"{key.node_id}'s tree merged back")])[0])
            journal.end()
        got = _tree(repo, after.commit_id or "").id
        if got != merged:
            raise CaptureError(f"after merging {key.node_id} back, {shared} has tree "
                               f"{str(got)[:12]}, expected {str(merged)[:12]}", code="git-failed")
        return (f"merged {key.node_id} iteration {key.iteration} from {mine} into {shared} "
                f"(seq {after.seq})")

    def _write(self, backend: Backend, repo: pygit2.Repository, shared: Path,
               tree: pygit2.Oid, ours: str) -> None:
        """Write ``tree`` into ``shared`` (now at ``ours``) with the confined
        writer, changing only the paths that differ."""
        sig = signature()
        commit = repo.create_commit(None, sig, sig, "durability: merge back\n", tree, [])
        if backend.name == "jj":
            from durability.backends.jj import pin

            pin(Path(repo.path), str(commit))  # jj reads it from the store: keep it there
        backend.restore(shared, str(commit), pre_restore=ours)

    # -- removing -----------------------------------------------------------

    def remove(self, row: TaskWorktree) -> None:
        self._clear(row.kind, Path(row.shared), Path(row.path), row.name)

    def _clear(self, kind: str, shared: Path, path: Path, name: str) -> None:
        """Forget the workspace or worktree ``name`` and delete its folder
        (its commits stay: checkpoints pin them)."""
        if path.is_symlink():
            # Never made by us: working through it would make (and leave)
            # the worktree wherever it points.  Only the link goes.
            path.unlink()
        if kind == "jj":
            listing = self._jj(shared, "--ignore-working-copy", "workspace", "list")
            workspaces = {line.split(":", 1)[0] for line in listing.splitlines()}
            if name in workspaces:
                # Abandon its commit first, or it stays a visible head in the
                # user's log; forgetting then drops the empty one jj makes.
                self._jj(shared, "--ignore-working-copy", "abandon", f"{name}@")
                self._jj(shared, "--ignore-working-copy", "workspace", "forget", name)
            shutil.rmtree(path, ignore_errors=True)
        else:
            if path.exists():
                self._git(shared, "worktree", "remove", "--force", str(path))
            self._git(shared, "worktree", "prune")
            self._git(shared, "update-ref", "-d", REF_PREFIX + name, check=False)

    # -- running jj and git -------------------------------------------------

    def _jj(self, cwd: Path, *args: str) -> str:
        from durability.backends.jj import find_jj

        argv = [find_jj(self.env).path, "--no-pager", "--color=never", "-R", ".", *args]
        done = self._run(argv, cwd)
        if done.returncode != 0:
            raise JjFailed(f"jj {' '.join(args[:3])} in {cwd}: "
                           f"{proc.last_words(done.stderr) or 'no message'}")
        return done.stdout

    def _git(self, cwd: Path, *args: str, check: bool = True) -> str:
        return git_cli.run(args, env=self.env, timeout=self.settings.jj_timeout_s,
                           needs="an isolated git worktree needs it", options=["-C", str(cwd)],
                           cwd=str(cwd), timeout_code="timeout", check=check)

    def _run(self, argv: list[str], cwd: Path) -> proc.Finished:
        try:
            return proc.run(argv, cwd=str(cwd), timeout=self.settings.jj_timeout_s,
                            env=dict(self.env))
        except proc.TimedOut as exc:
            raise CaptureError(str(exc), code="timeout") from exc

    def _capturer(self) -> Capturer:
        return Capturer(settings=self.settings, store=lazy_store(self.settings), env=self.env)

    def _lock_s(self) -> float:
        return self.settings.jj_timeout_s + 30

    @contextmanager
    def _locked(self, capturer: Capturer, root: Path) -> Iterator[None]:
        """The worktree lock every capture takes: no capture interleaves."""
        try:
            with capturer.lock(root, timeout_s=self._lock_s()):
                yield
        except filelock.Timeout:
            raise LockTimeout(f"the worktree lock of {root} was not free within "
                              f"{self._lock_s():g}s") from None


class _Journal:
    """What a merge back was writing into the shared worktree, kept until the
    merged tree is captured.

    The writer replaces a file in place (unlink, create, write: see
    ``backends.confined``), so a process killed while writing a large merged
    file leaves part of it.  Taken as the shared tree's own change, that part
    conflicted with the very file the merge was writing, and the resume
    failed with ``WORKTREE_CONFLICT`` over nothing but the torn write.  With
    the journal, the next merge back of the same task takes each path the
    interrupted merge was writing back to the tree before it, where what is
    there is that merge's own work (missing, the merged file whole, or a
    first part of it); every other change to the shared tree is merged as
    before (a conflict there is real).  Two refs pin the trees until the
    merge ends.
    """

    def __init__(self, repo: pygit2.Repository, name: str) -> None:
        self.repo = repo
        self.refs = (f"{JOURNAL_PREFIX}{name}/before", f"{JOURNAL_PREFIX}{name}/merged")

    def begin(self, before: pygit2.Oid, merged: pygit2.Oid) -> None:
        """Say the shared tree goes from ``before`` to ``merged``."""
        sig = signature()
        for ref, tree in zip(self.refs, (before, merged), strict=True):
            commit = self.repo.create_commit(None, sig, sig, "durability: merging\n", tree, [])
            self.repo.references.create(ref, commit, force=True)

    def ours(self, now: pygit2.Tree) -> pygit2.Tree:
        """The shared tree to merge with: ``now``, less what an interrupted
        merge of this task had written of its own."""
        try:
            before, merged = (self.repo.references[r].peel(pygit2.Tree) for r in self.refs)
        except (KeyError, ValueError, pygit2.GitError):
            return now  # no merge was interrupted
        own = [p for p in sorted(_changed(before, now) & _changed(before, merged))
               if self._written(p, now, merged)]
        if not own:
            return now
        index = pygit2.Index()
        index.read_tree(now)
        for path in own:
            entry = _entry(before, path)
            if entry is None:
                index.remove(path)
            else:
                index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
        return self.repo[index.write_tree(self.repo)].peel(pygit2.Tree)

    def _written(self, path: str, now: pygit2.Tree, merged: pygit2.Tree) -> bool:
        """Whether ``path`` in ``now`` is what writing ``merged`` there
        leaves at any moment: nothing yet, the whole file, or its first part."""
        here, there = _entry(now, path), _entry(merged, path)
        if here is None or (there is not None and here.id == there.id):
            return True
        if there is None or here.type_str != "blob" or there.type_str != "blob":
            return False
        whole, part = (self.repo[e.id].peel(pygit2.Blob).data for e in (there, here))
        return bytes(whole).startswith(bytes(part))

    def end(self) -> None:
        for ref in self.refs:
            with contextlib.suppress(KeyError):
                self.repo.references.delete(ref)


def _changed(a: pygit2.Tree, b: pygit2.Tree) -> set[str]:
    found: set[str] = set()
    for delta in a.diff_to_tree(b).deltas:
        found.update((delta.old_file.path, delta.new_file.path))
    return found


def _entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    try:
        return tree[path]
    except KeyError:
        return None


def _request(key: AttemptKey, root: Path, source: str, label: str) -> CaptureRequest:
    return CaptureRequest(key=key, worktree=root, source=source,
                          request_id=f"{source}-{uuid.uuid4()}", label=label)


def _ok(outcome: Outcome) -> Outcome:
    if not outcome.ok or outcome.commit_id is None:
        raise CaptureError(f"capture for the merge failed: {outcome.error_message}",
                           code=outcome.error_code or "internal-error")
    return outcome


def _whole(key: AttemptKey, theirs: Outcome, mine: Path) -> None:
    """Refuse to merge a task's tree its checkpoint left files out of (jj's
    max-new-file-size, an unreadable file): in a shared worktree they stay on
    disk, but an isolated worktree is deleted once merged, and them with it."""
    if not theirs.skipped:
        return
    paths = sorted({s.path for s in theirs.skipped})
    raise CaptureError(
        f"{key.node_id}'s tree (seq {theirs.seq}) left {_listing(paths)} out of its "
        f"checkpoint ({', '.join(sorted({s.reason for s in theirs.skipped}))}): merged back, "
        f"it would be lost with the worktree; nothing merged, {mine} kept: raise "
        "DURABILITY_MAX_NEW_FILE_SIZE, or move or delete the file there, then resume",
        code=theirs.skipped[0].reason)


def _tree(repo: pygit2.Repository, commit_id: str) -> pygit2.Tree:
    return repo[commit_id].peel(pygit2.Tree)


def _listing(paths: list[str], limit: int = 10) -> str:
    shown = ", ".join(paths[:limit]) or "the same paths"
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
