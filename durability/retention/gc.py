"""``durability gc``: apply the retention policy, then let git or jj collect.

Work goes repository by repository (the git store that holds the pins: a
plain repository's, or the one behind jj), under the worktree lock of every
worktree the store knows in that repository, taken in path order.  A capture
of one of them waits for gc (contract 1's lock), so no capture can write
objects or a row while rows are dropped, refs move or the op log is trimmed;
its request is answered by a capture that starts after gc lets go.  The
object gc of a git repository (step 4) runs under the locks only without a
prune grace: with one, an object a capture writes meanwhile is younger than
the grace and survives, so captures do not wait for the slow part.

In each repository:

1. judge every checkpoint (``policy.judge``) with the extra keepers;
2. git: write each attempt's chain again without its expired commits
   (``backends.prune.rewrite_chain``), then, in one store transaction, drop
   the expired rows and rename the kept ones; jj: drop the rows, then delete
   the pins of commits no row names any more (rows go before pins, so a row
   never outlives its pin: contract 4);
3. jj: abandon operations older than ``jj_op_log_days`` (one workspace only);
4. collect objects: ``git repack -A`` + ``git prune`` with the grace, or
   ``jj util gc``.

``extra_keepers`` is the hook point for other features: replication adds a
keeper answering "not-pushed" for a checkpoint it has not pushed yet.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import pygit2

from durability.backends import backend_name
from durability.backends import history as backend_prune
from durability.backends.base import Progress
from durability.capture.capturer import Capturer
from durability.config import Settings
from durability.ground.errors import DurabilityError
from durability.retention.policy import DAY_MS, Keeper, Policy, Verdict, judge
from durability.store import AttemptKey, Checkpoint, EngineError, Store
from durability.store import gc_rows as store_prune
from durability.store.remote_rows import Remotes

__all__ = ["GcReport", "RepoReport", "extra_keepers", "run_gc"]

log = logging.getLogger("durability.gc")

#: How long gc waits for a capture to let go of a worktree lock.
LOCK_TIMEOUT_S = 120.0
#: Ceiling on one git or jj gc.
COLLECT_TIMEOUT_S = 3600.0


def extra_keepers(settings: Settings) -> list[Keeper]:
    """The keepers other features add to the policy (the one place to plug
    one in; the CLI and the service's schedule both call this).

    Replication (docs/how-to/remote.md): when a worktree has a remote, a checkpoint
    not yet on it is kept (``not-pushed``), and so is every git checkpoint of
    that worktree (``replicated``): thinning a git attempt rewrites its chain
    of commits, and the remote, which holds the old chain and is never
    force-pushed, would then refuse every later push of that attempt.  jj
    checkpoints are thinned by unpinning, which the remote does not see.
    """
    remotes = Remotes(settings.database)
    with_remote = {r.worktree for r in remotes.all()}
    if not with_remote:
        return []
    pending = {c.request_id for c in remotes.unreplicated()}

    def replication(checkpoint: Checkpoint) -> str | None:
        if checkpoint.request_id in pending:
            return "not-pushed"
        if checkpoint.worktree in with_remote and checkpoint.change_id is None:
            return "replicated"
        return None

    return [replication]


@dataclass
class RepoReport:
    """What gc did (or, in a dry run, would do) in one repository."""

    backend: str
    store: str
    worktrees: list[str]
    checkpoints: int = 0
    dropped: int = 0
    rewritten: int = 0
    refs_removed: int = 0
    op_log_abandoned: int = 0
    collected: bool = False
    note: str | None = None
    kept_by: Counter[str] = field(default_factory=Counter)
    #: The checkpoints judged expired (a dry run's "would drop"; not in to_dict).
    expired: list[Checkpoint] = field(default_factory=list)
    before: backend_prune.StoreFigures | None = None
    after: backend_prune.StoreFigures | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend, "store": self.store, "worktrees": self.worktrees,
            "checkpoints": self.checkpoints, "dropped": self.dropped,
            "rewritten": self.rewritten, "refs_removed": self.refs_removed,
            "op_log_abandoned": self.op_log_abandoned, "collected": self.collected,
            "note": self.note, "kept_by": dict(sorted(self.kept_by.items())),
            "before": _figures(self.before), "after": _figures(self.after),
        }


@dataclass
class GcReport:
    dry_run: bool
    now_ms: int
    policy: Policy
    repositories: list[RepoReport] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def total(self, name: str) -> int:
        return sum(int(getattr(r, name)) for r in self.repositories)

    def figure(self, when: str, name: str) -> int | None:
        found = [getattr(getattr(r, when), name) for r in self.repositories
                 if getattr(r, when) is not None]
        return sum(found) if found else None

    def to_dict(self) -> dict[str, Any]:
        kept: Counter[str] = Counter()
        for r in self.repositories:
            kept.update(r.kept_by)
        return {
            "dry_run": self.dry_run, "now_ms": self.now_ms, "policy": self.policy.to_dict(),
            "checkpoints": {"before": self.total("checkpoints"), "dropped": self.total("dropped"),
                            "kept": self.total("checkpoints") - self.total("dropped"),
                            "kept_by": dict(sorted(kept.items()))},
            "rewritten": self.total("rewritten"),
            "refs": {"before": self.figure("before", "refs"),
                     "after": self.figure("after", "refs"),
                     "removed": self.total("refs_removed")},
            "objects": {"before": self.figure("before", "objects"),
                        "after": self.figure("after", "objects")},
            "bytes": {"before": self.figure("before", "bytes"),
                      "after": self.figure("after", "bytes")},
            "repositories": [r.to_dict() for r in self.repositories],
            "skipped": self.skipped,
        }


def run_gc(settings: Settings, store: Store, policy: Policy, *, now_ms: int,
           dry_run: bool = False, keepers: Sequence[Keeper] = (),
           env: Mapping[str, str] = os.environ, progress: Progress | None = None,
           lock_timeout_s: float = LOCK_TIMEOUT_S,
           measure: bool = True, only: Collection[str] | None = None) -> GcReport:
    """Apply ``policy`` as of ``now_ms`` (the clock is the caller's: tests
    move it, the CLI and the service pass the wall clock).  ``only``: just
    the repositories holding these worktrees (the MCP preview serves one)."""
    report = GcReport(dry_run, now_ms, policy)
    rows = store_prune.retention_rows(store)
    groups = _group(sorted({r.checkpoint.worktree for r in rows}), env, report)
    if only is not None:
        groups = [g for g in groups if set(g.worktrees) & set(only)]
        report.skipped = [s for s in report.skipped if s["worktree"] in only]
    capturer = Capturer(settings=settings, store=lambda: store, env=env)
    total, done = len(rows), 0
    for repo in groups:
        # With a prune grace, what a capture writes meanwhile is younger than
        # the grace and survives git's or jj's gc, so the long object gc runs
        # after the locks are let go; without one it must run under them.
        # jj's own gc is left under them (it may pack refs while a capture pins).
        locked_collect = policy.prune_grace_s <= 0 or repo.backend == "jj"
        try:
            with _locked(capturer, repo.worktrees, lock_timeout_s) as held:
                locked_at_s = time.time()
                _one_repository(settings, store, policy, repo, now_ms=now_ms, dry_run=dry_run,
                                keepers=keepers, env=env, measure=measure, held=held)
                if locked_collect and not dry_run:
                    _collect(repo, policy, env, measure, locked_at_s, held)
            if not locked_collect and not dry_run:
                _collect(repo, policy, env, measure, locked_at_s, ())
        except filelock.Timeout:
            repo.note = "skipped: a capture held a worktree lock past the timeout"
        except (DurabilityError, EngineError, pygit2.GitError, OSError) as exc:
            repo.note = f"stopped: {exc}"
            log.warning("gc of %s stopped: %s", repo.store, exc)
        report.repositories.append(repo)
        done += repo.checkpoints
        if progress is not None:
            progress(done, total)
    return report


def _one_repository(settings: Settings, store: Store, policy: Policy, repo: RepoReport, *,
                    now_ms: int, dry_run: bool, keepers: Sequence[Keeper],
                    env: Mapping[str, str], measure: bool, held: Sequence[int]) -> None:
    # Read under the locks: no capture of these worktrees can add a row now.
    rows = store_prune.retention_rows(store, repo.worktrees)
    if repo.backend == "git" and not dry_run and _repair(store, _store_paths(repo)[0], rows, repo):
        rows = store_prune.retention_rows(store, repo.worktrees)
    verdicts = judge(rows, policy, now_ms, keepers)
    repo.checkpoints = len(verdicts)
    repo.kept_by.update(v.kept_by for v in verdicts if v.kept_by)
    expired = [v.row.checkpoint for v in verdicts if v.expired]
    repo.expired = expired
    git_dir, measured = _store_paths(repo)
    if measure:
        repo.before = backend_prune.figures(git_dir, measured)
    if dry_run:
        repo.dropped = len(expired)
        return
    if repo.backend == "git":
        _drop_git(store, git_dir, expired, repo)
    else:
        _drop_jj(store, git_dir, expired, repo)
    jj = _jj_path(repo, env)
    if jj is not None and policy.jj_op_log_days > 0:
        _trim(jj, repo, now_ms - int(policy.jj_op_log_days * DAY_MS), settings, held)


def _collect(repo: RepoReport, policy: Policy, env: Mapping[str, str], measure: bool,
             locked_at_s: float, held: Sequence[int]) -> None:
    """git's or jj's own gc, then the figures after.  ``held``: the worktree
    locks' descriptors when this runs under them, which git and jj keep
    until they end (``proc.run``)."""
    git_dir, measured = _store_paths(repo)
    jj = _jj_path(repo, env)
    collected = (backend_prune.collect_git(git_dir, policy.prune_grace_s, COLLECT_TIMEOUT_S,
                                           locked_at_s=locked_at_s, hold=held)
                 if jj is None else
                 backend_prune.collect_jj(jj, Path(repo.worktrees[0]), policy.prune_grace_s,
                                          COLLECT_TIMEOUT_S, hold=held))
    repo.collected = collected.ran
    repo.note = repo.note or collected.note
    if measure:
        repo.after = backend_prune.figures(git_dir, measured)


def _drop_git(store: Store, git_dir: Path, expired: list[Checkpoint], repo: RepoReport) -> None:
    """Rewrite each attempt's chain without its expired commits, record the
    new ids and drop the rows in one transaction, then free the old chain."""
    git = pygit2.Repository(str(git_dir))
    by_attempt: dict[AttemptKey, set[str]] = {}
    for c in expired:
        by_attempt.setdefault(_key(c), set()).add(c.commit_id)
    renamed: dict[str, str] = {}
    moved_keys: list[AttemptKey] = []
    for key, drop in by_attempt.items():
        try:
            moved, dropped = backend_prune.rewrite_chain(git, key, drop)
        except (DurabilityError, pygit2.GitError) as exc:
            # Interrupted: its rows may name the old chain only the pending
            # ref keeps.  Any other failure: its chain may be half moved.
            # Either way drop none of its rows, and keep every ref.
            expired = [c for c in expired if _key(c) != key]
            repo.note = f"{exc}; left as it is (docs/how-to/retention.md#limits)"
            log.warning("gc left %s as it is: %s", key, exc)
            continue
        renamed.update(moved)
        if dropped:
            moved_keys.append(key)
    done = store_prune.apply(store, expired, renamed)
    repo.dropped, repo.rewritten = done.dropped, done.renamed
    for key in moved_keys:  # only the pending refs this run made
        backend_prune.finish_rewrite(git, key)


def _repair(store: Store, git_dir: Path, rows: list[store_prune.RetentionRow],
            repo: RepoReport) -> bool:
    """Finish what a gc killed mid-rewrite left (a ``gc-pending`` ref): name
    the new chain's commits in the rows, drop the rows of commits it dropped,
    then let go of the old chain, unless a row still names a commit only
    that keeps.  True when the store changed."""
    git = pygit2.Repository(str(git_dir))
    changed = False
    for key in sorted({_key(r.checkpoint) for r in rows}):
        if not backend_prune.pending(git, key):
            continue
        found = backend_prune.resume_rewrite(git, key)
        if found is None:
            continue
        moved, gone = found
        gone_set = set(gone)
        drop = [r.checkpoint for r in rows
                if _key(r.checkpoint) == key and r.checkpoint.commit_id in gone_set]
        store_prune.apply(store, drop, moved)
        changed = True
        left = {c.commit_id for c in store.checkpoints(key.run_id) if _key(c) == key}
        if left & gone_set:
            continue  # a row still names the old chain: its pending ref stays
        backend_prune.finish_rewrite(git, key)
        repo.note = "finished an interrupted gc of an attempt"
        log.info("gc finished an interrupted rewrite of %s", key)
    return changed


def _key(c: Checkpoint) -> AttemptKey:
    return AttemptKey(c.run_id, c.node_id, c.iteration, c.attempt)


def _drop_jj(store: Store, git_dir: Path, expired: list[Checkpoint], repo: RepoReport) -> None:
    done = store_prune.apply(store, expired)
    repo.dropped = done.dropped
    candidates = {c.commit_id for c in expired}
    unused = candidates - store_prune.commits_in_use(store, candidates)
    repo.refs_removed = backend_prune.unpin_jj(git_dir, sorted(unused))


def _trim(jj: str, repo: RepoReport, cutoff_ms: int, settings: Settings,
          held: Sequence[int]) -> None:
    worktree = Path(repo.worktrees[0])
    if backend_prune.workspace_count(jj, worktree, settings.jj_timeout_s) != 1:
        repo.note = "jj op log kept: the repo has several workspaces"
        return
    repo.op_log_abandoned = backend_prune.trim_op_log(jj, worktree, cutoff_ms,
                                                      settings.jj_timeout_s, hold=held)


def _jj_path(repo: RepoReport, env: Mapping[str, str]) -> str | None:
    if repo.backend != "jj":
        return None
    from durability.backends.jj import find_jj

    return find_jj(env).path


def _store_paths(repo: RepoReport) -> tuple[Path, list[Path]]:
    """The git store that holds the pins, and the folders whose size is the
    store's (jj: its git store and its repo folder, op log and index included)."""
    if repo.backend == "jj":
        from durability.backends.jj import git_dir

        git = git_dir(Path(repo.worktrees[0]))
        return git, [git, Path(repo.store)]
    # A git repository's checkpoints are in its private store (decision 0049),
    # created, and an earlier toolkit's refs moved in, on first use.
    from durability.backends.git_store import open_store

    store = Path(open_store(Path(repo.store)).path)
    return store, [store]


def _group(worktrees: list[str], env: Mapping[str, str], report: GcReport) -> list[RepoReport]:
    """Worktrees by the repository that stores their checkpoints.  A
    worktree that is gone or no longer a repository is skipped and named:
    gc drops nothing it cannot unpin."""
    groups: dict[tuple[str, str], RepoReport] = {}
    for wt in worktrees:
        try:
            kind, where = _repository(Path(wt), env)
        except (DurabilityError, pygit2.GitError, OSError) as exc:
            code = getattr(exc, "code", "error")
            report.skipped.append({"worktree": wt, "reason": str(code), "message": str(exc)})
            continue
        group = groups.setdefault((kind, where), RepoReport(kind, where, []))
        group.worktrees.append(wt)
    return list(groups.values())


def _repository(worktree: Path, env: Mapping[str, str]) -> tuple[str, str]:
    kind = backend_name(worktree, env)
    if kind == "jj":
        from durability.backends.jj import repo_dir

        return kind, str(repo_dir(worktree).resolve())
    git = pygit2.Repository(str(worktree), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    path = Path(git.path)
    common = path / "commondir"  # a linked worktree: refs and objects are the main one's
    if common.is_file():
        path = (path / common.read_text(encoding="utf-8").strip()).resolve()
    return kind, str(path.resolve())


@contextlib.contextmanager
def _locked(capturer: Capturer, worktrees: list[str], timeout_s: float) -> Iterator[list[int]]:
    """Every worktree lock of a repository, in path order (two gcs, or a gc
    and a restore, never wait on each other in a circle); yields their
    locked descriptors, for the git and jj runs that must keep them."""
    held: list[int] = []
    with contextlib.ExitStack() as stack:
        for wt in sorted(worktrees):
            stack.enter_context(capturer.lock(Path(wt), timeout_s, held=held))
        yield held


def _figures(f: backend_prune.StoreFigures | None) -> dict[str, int] | None:
    if f is None:
        return None
    return {"bytes": f.bytes, "refs": f.refs, "keep_refs": f.keep_refs, "objects": f.objects}


def verdicts(store: Store, policy: Policy, now_ms: int,
             keepers: Sequence[Keeper] = ()) -> list[Verdict]:
    """Every checkpoint's verdict (for a listing; nothing locked or changed)."""
    return judge(store_prune.retention_rows(store), policy, now_ms, keepers)

