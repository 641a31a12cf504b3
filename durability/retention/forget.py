"""``durability forget``: take paths out of every checkpoint (docs/how-to/forget.md).

Under the worktree locks of every worktree the repository's store holds (as
gc takes them: a capture waits, and is answered after), and the replication
lock (the service's replicator neither pushes nor moves a manifest meanwhile):

1. every checkpoint of the worktree (or of one run) whose tree holds a path
   is written again without it (``backends.prune``): git, each attempt's
   chain of commits, from its first checkpoint on (the old tip pinned under
   ``refs/durability/forget-pending/`` until the rows name the new one); jj,
   each commit, with its parents that are checkpoints rewritten too, pinned
   under its new id before the rows change;
2. in one store transaction the rows and the attempts' pointers are renamed
   to the new commits (seqs, labels and every other column stay), and so is
   every other record that quotes an old id: the tool-call boundaries, the
   fork records, the event log's and the gaps' texts (decision 0057); then
   the old pins go (jj: only those no row names any more);
3. the kept file modes follow their commits; the private indexes of a git
   repository drop the paths; refs under ``refs/durability/`` that named a
   rewritten commit (a remote's fetched copy) name the new one;
4. on each remote of the worktree, the refs that pinned rewritten commits
   are replaced (a forced push, only while the remote holds them where they
   were read, ``transport.replace``) and the manifest gets a commit naming
   the new ids.  What one push leaves undone is kept in the state folder
   (``forget/``) and tried again by the next ``forget`` of the worktree;
5. objects nothing reaches any more are pruned at once (git: repack and
   prune; jj: its op log trimmed to the current operation, then ``jj util
   gc``), and the removed blobs are looked up again: the report names those
   still in the store (another file with the same content, the user's own
   history, a jj repo with several workspaces).

A path still in the worktree is refused, by the dry run too: the next
capture would take it in again.  Not so a path the git backend's current
ignore rules ignore (and the user's index does not track): no capture takes
it in, so it may stay on disk.  jj keeps tracking a file it has snapshotted
once, ignored or not, so for jj every path must be gone.  The dry run reads
only: which checkpoints hold the paths.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import pygit2

from durability.backends import history as backend_prune
from durability.backends.git_commit import key_ref
from durability.backends.jj import PIN_PREFIX as JJ_PIN_PREFIX
from durability.backends.modes import PREFIX as MODES_PREFIX
from durability.backends.selection import covers, normalize
from durability.capture.capturer import Capturer
from durability.config import Settings
from durability.ground.errors import DurabilityError, InvalidInput, LockTimeout
from durability.ground.fsutil import replace_file
from durability.remote import manifest, transport
from durability.retention import gc
from durability.store import AttemptKey, Checkpoint, NotFound, Store
from durability.store import gc_rows as store_prune
from durability.store.remote_rows import Remote, Remotes

__all__ = ["ForgetReport", "run_forget"]

log = logging.getLogger("durability.forget")

#: How long forget waits for a capture, or a push under way, to let go.
LOCK_TIMEOUT_S = 120.0
#: Ceiling on the object collection.
COLLECT_TIMEOUT_S = 3600.0
_OURS = "refs/durability/"


@dataclass
class ForgetReport:
    dry_run: bool
    worktree: str
    paths: list[str]
    backend: str = ""
    #: The checkpoints whose trees held a path (before the rewrite).
    holding: list[Checkpoint] = field(default_factory=list)
    #: Old commit id -> new one, for every commit written again.
    renamed: dict[str, str] = field(default_factory=dict)
    #: Rows now naming a rewritten commit.
    rewritten: int = 0
    index_entries: int = 0
    remotes: list[dict[str, Any]] = field(default_factory=list)
    blobs: int = 0
    blobs_left: list[str] = field(default_factory=list)
    collected: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def remote_failed(self) -> list[dict[str, Any]]:
        return [r for r in self.remotes if r.get("error")]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run, "worktree": self.worktree, "paths": self.paths,
            "backend": self.backend,
            "checkpoints": [{"run_id": c.run_id, "node_id": c.node_id,
                             "iteration": c.iteration, "attempt": c.attempt, "seq": c.seq,
                             "commit_id": c.commit_id,
                             "new_commit_id": self.renamed.get(c.commit_id)}
                            for c in self.holding],
            "commits_rewritten": len(self.renamed), "rows_renamed": self.rewritten,
            "index_entries_removed": self.index_entries, "remotes": self.remotes,
            "blobs": self.blobs, "blobs_left": self.blobs_left,
            "collected": self.collected, "notes": self.notes,
        }


def run_forget(settings: Settings, store: Store, worktree: Path, paths: Sequence[str], *,
               run_id: str | None = None, dry_run: bool = False,
               env: Mapping[str, str] = os.environ,
               lock_timeout_s: float = LOCK_TIMEOUT_S) -> ForgetReport:
    """Remove ``paths`` (worktree-relative, or absolute inside it) from every
    checkpoint of ``worktree`` (a resolved root), or of run ``run_id`` only."""
    wt = str(worktree)
    try:
        rel = list(normalize(paths, worktree))
    except InvalidInput as exc:  # worded for restore --path
        raise InvalidInput(str(exc).removeprefix("--path ").replace(
            "which a restore never writes", "which no checkpoint holds")) from None
    if not rel or "" in rel:
        raise InvalidInput("forget needs paths inside the worktree, not the worktree itself")
    report = ForgetReport(dry_run, wt, rel)
    kind, where = gc._repository(worktree, env)
    report.backend = kind
    repo_report = gc.RepoReport(kind, where, [wt])
    git_dir, _ = gc._store_paths(repo_report)
    if run_id is not None and not any(c.worktree == wt for c in store.checkpoints(run_id)):
        raise NotFound(f"run {run_id} has no checkpoint of {wt}")
    if dry_run:
        _refuse_present(kind, worktree, rel)
        strip = backend_prune.Stripper(pygit2.Repository(str(git_dir)), rel)
        report.holding = _holding(strip, _rows(store, wt, run_id), report)
        return report
    capturer = Capturer(settings=settings, store=lambda: store, env=env)
    siblings = _siblings(store, kind, where, wt, env)
    try:
        with gc._locked(capturer, siblings, lock_timeout_s) as held, \
                _replication_lock(settings, lock_timeout_s):
            # Objects older than this moment may go: nothing of ours writes
            # any now, and one a process outside the locks writes meanwhile
            # (a jj command of the user's) is younger.
            locked_at_s = time.time()
            _forget_locked(settings, store, worktree, rel, run_id, kind, repo_report, git_dir,
                           siblings, env, held, locked_at_s, report)
    except filelock.Timeout as exc:
        raise LockTimeout(f"a capture or a push held {exc.lock_file} past {lock_timeout_s:g}s; "
                          f"nothing was changed") from None
    return report


def _forget_locked(settings: Settings, store: Store, worktree: Path, rel: list[str],
                   run_id: str | None, kind: str, repo_report: gc.RepoReport, git_dir: Path,
                   siblings: list[str], env: Mapping[str, str], held: Sequence[int],
                   locked_at_s: float, report: ForgetReport) -> None:
    wt = str(worktree)
    _refuse_present(kind, worktree, rel)
    repo = pygit2.Repository(str(git_dir))
    remotes = Remotes(settings.database).all(wt)
    report.remotes += _retry_remotes(settings, repo, wt, remotes, env)
    if kind == "git":
        _repair(store, repo, git_dir, wt, repo_report)
    strip = backend_prune.Stripper(repo, rel)
    rows = _rows(store, wt, run_id)
    report.holding = _holding(strip, rows, report)
    orphans = ([] if kind == "git" or run_id is not None else
               _orphan_pins(repo, strip, store_prune.retention_rows(store, siblings)))
    if report.holding or orphans:
        for remote in remotes:  # reachable before anything changes, or nothing does
            transport.ls_remote(repo.path, remote.url, [_OURS + "*"], env=env)
        if kind == "git":
            keys = sorted({c.key for c in report.holding})
            _rewrite_git(store, repo, git_dir, keys, strip, report)
        else:
            keys = []
            _rewrite_jj(store, repo, git_dir, report.holding, orphans, strip, report)
        _retarget(repo, report.renamed)
        if kind == "git":
            from durability.backends.git import forget as drop_open_index

            report.index_entries = backend_prune.drop_from_indexes(git_dir, rel)
            for sibling in siblings:
                drop_open_index(Path(sibling))
        for remote in remotes:
            report.remotes.append(_replace_on(settings, repo, wt, remote, kind, keys,
                                              report.renamed, env))
    if report.holding or report.renamed:
        _collect(settings, repo_report, git_dir, worktree, env, held, locked_at_s, report)
    report.blobs = len(strip.blobs)
    after = pygit2.Repository(str(git_dir))  # a fresh look at the packs
    report.blobs_left = sorted(b for b in strip.blobs if b in after)


# -- what is still in the worktree -------------------------------------------


def _refuse_present(kind: str, worktree: Path, rel: Sequence[str]) -> None:
    """Refuse (``invalid-value``) the paths the next capture would take in
    again; the dry run and the real run alike."""
    found = _captured_again(kind, worktree, rel)
    if found:
        hint = ", or have git ignore it," if kind == "git" else ""
        raise InvalidInput(f"{', '.join(found)} still in {worktree}: delete or move it out "
                           f"first{hint} (the next capture would take it in again)")


def _captured_again(kind: str, worktree: Path, rel: Sequence[str]) -> list[str]:
    """The paths still on disk that the next capture would take in: for jj,
    every one (jj keeps tracking what it snapshotted, whatever the ignore
    rules say now); for git, one the user's index tracks (a fresh private
    index starts from it), or one git does not ignore, or a folder holding
    a file git does not ignore."""
    present = [p for p in rel if os.path.lexists(worktree / p)]
    if not present or kind != "git":
        return present
    repo = pygit2.Repository(str(worktree), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    tracked = _user_tracked(repo)
    return [p for p in present
            if any(covers([p], t) for t in tracked) or _not_ignored_below(repo, worktree, p)]


def _user_tracked(repo: pygit2.Repository) -> list[str]:
    try:
        return [e.path for e in pygit2.Index(str(Path(repo.path, "index")))]
    except (pygit2.GitError, OSError, ValueError):
        return []  # no index yet (or one libgit2 cannot read: HEAD's tree then seeds)


def _not_ignored_below(repo: pygit2.Repository, root: Path, rel: str) -> bool:
    """Whether git does not ignore ``rel``, or a file below it."""
    full = root.joinpath(*rel.split("/"))
    is_dir = full.is_dir() and not full.is_symlink()
    try:
        if repo.path_is_ignored(rel + "/" if is_dir else rel):
            return False
    except (UnicodeEncodeError, pygit2.GitError):
        return True  # a name libgit2 cannot judge: taken as captured
    if not is_dir:
        return True
    try:
        with os.scandir(full) as it:
            names = [e.name for e in it]
    except OSError:
        return True
    # A nested repository is captured (its HEAD, as a gitlink).
    return ".git" in names or any(_not_ignored_below(repo, root, f"{rel}/{n}") for n in names)


# -- which checkpoints -------------------------------------------------------


def _rows(store: Store, wt: str, run_id: str | None) -> list[Checkpoint]:
    rows = [r.checkpoint for r in store_prune.retention_rows(store, [wt])]
    return [c for c in rows if run_id is None or c.run_id == run_id]


def _holding(strip: backend_prune.Stripper, rows: list[Checkpoint],
             report: ForgetReport) -> list[Checkpoint]:
    found = []
    missing = 0
    for c in rows:
        try:
            tree = strip.repo[c.commit_id].peel(pygit2.Commit).tree_id
        except (KeyError, ValueError, pygit2.GitError):
            missing += 1
            continue
        if strip.holds(tree):
            found.append(c)
    if missing:
        report.notes.append(f"{missing} checkpoints name a commit this store does not hold "
                            f"(left as they are)")
    return found


def _siblings(store: Store, kind: str, where: str, wt: str,
              env: Mapping[str, str]) -> list[str]:
    """The worktrees whose checkpoints the same store holds: their captures
    write objects the collection must not race."""
    found = {wt}
    for other in sorted({r.checkpoint.worktree for r in store_prune.retention_rows(store)}):
        if other == wt:
            continue
        try:
            if gc._repository(Path(other), env) == (kind, where):
                found.add(other)
        except (DurabilityError, pygit2.GitError, OSError):
            continue
    return sorted(found)


@contextlib.contextmanager
def _replication_lock(settings: Settings, timeout_s: float) -> Iterator[None]:
    """The replicator's lock: no push, and no move of a local manifest, while
    chains are rewritten and replaced on the remotes."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(settings.state_dir / "replicate.lock"), timeout=timeout_s,
                             mode=0o600)
    with lock:
        yield


# -- rewriting -----------------------------------------------------------------


def _repair(store: Store, repo: pygit2.Repository, git_dir: Path, wt: str,
            repo_report: gc.RepoReport) -> None:
    """Finish an interrupted gc or forget of this worktree's attempts first."""
    rows = store_prune.retention_rows(store, [wt])
    gc._repair(store, git_dir, rows, repo_report)
    for key in sorted({r.checkpoint.key for r in rows}):
        if not backend_prune.forget_pending(repo, key):
            continue
        moved = backend_prune.resume_forget(repo, key, backend_prune.Stripper(repo, []))
        if moved is None:
            continue
        store_prune.apply(store, [], moved, forgotten=True)
        if store_prune.commits_in_use(store, set(moved)):
            continue  # an isolated task's merge base: the old chain stays
        backend_prune.finish_forget(repo, key)
        log.info("forget finished an interrupted rewrite of %s", key)


def _rewrite_git(store: Store, repo: pygit2.Repository, git_dir: Path,
                 keys: list[AttemptKey], strip: backend_prune.Stripper,
                 report: ForgetReport) -> None:
    moved: dict[AttemptKey, set[str]] = {}
    for key in keys:
        found = backend_prune.forget_chain(repo, key, strip)
        report.renamed.update(found)
        if found:
            moved[key] = set(found)
    report.rewritten = _rename_rows(store, report.renamed)
    # Rows and pointers name the new commits now; an isolated task's merge
    # base may still name an old one, which only the pending ref then keeps.
    still = store_prune.commits_in_use(store, set(report.renamed))
    for key, old in moved.items():
        if old & still:
            report.notes.append(f"an isolated task of {key.run_id} is based on a checkpoint "
                                f"that held a path: its old chain is kept until the task is "
                                f"removed (then run forget again)")
            continue
        backend_prune.finish_forget(repo, key)


def _orphan_pins(repo: pygit2.Repository, strip: backend_prune.Stripper,
                 rows: list[store_prune.RetentionRow]) -> list[str]:
    """Commits our jj pins keep that no row of the repo's worktrees names
    (the snapshot a restore takes after writing, a row lost to a store
    failure) and that hold a path: rewritten as well, or they would keep it."""
    named = {r.checkpoint.commit_id for r in rows}
    found = []
    for name in repo.references:
        if not name.startswith(JJ_PIN_PREFIX) or name[len(JJ_PIN_PREFIX):] in named:
            continue
        try:
            commit = repo.references[name].peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            continue
        if strip.holds(commit.tree_id):
            found.append(str(commit.id))
    return found


def _rewrite_jj(store: Store, repo: pygit2.Repository, git_dir: Path,
                holding: list[Checkpoint], orphans: list[str],
                strip: backend_prune.Stripper, report: ForgetReport) -> None:
    report.renamed.update(backend_prune.forget_commits(
        repo, sorted({c.commit_id for c in holding} | set(orphans)), strip))
    report.rewritten = _rename_rows(store, report.renamed)
    old = set(report.renamed)
    backend_prune.unpin_jj(git_dir, sorted(old - store_prune.commits_in_use(store, old)))


def _rename_rows(store: Store, renamed: dict[str, str]) -> int:
    if not renamed:
        return 0
    before = len(_all_named(store, renamed))
    store_prune.apply(store, [], renamed, forgotten=True)
    return before


def _all_named(store: Store, renamed: dict[str, str]) -> list[Checkpoint]:
    return [r.checkpoint for r in store_prune.retention_rows(store)
            if r.checkpoint.commit_id in renamed]


def _retarget(repo: pygit2.Repository, renamed: dict[str, str]) -> None:
    """Our other refs that name a rewritten commit (``remotes/NAME/...``, the
    copies a ``restore --from-remote`` fetched) follow it; a name holding
    the old id takes the new one."""
    for name in [n for n in repo.references if n.startswith(_OURS + "remotes/")]:
        ref = repo.references[name]
        target = str(ref.target)
        if target not in renamed:
            continue
        new = renamed[target]
        fresh = name.replace(target, new) if name.endswith(target) else name
        repo.references.create(fresh, pygit2.Oid(hex=new), force=True)
        if fresh != name:
            repo.references.delete(name)


# -- remotes -------------------------------------------------------------------


def _pending_file(settings: Settings, wt: str, remote: str) -> Path:
    digest = hashlib.sha256(f"{wt}\0{remote}".encode("utf-8", "surrogateescape")).hexdigest()
    return settings.state_dir / "forget" / f"{digest[:32]}.json"


def _retry_remotes(settings: Settings, repo: pygit2.Repository, wt: str,
                   remotes: list[Remote], env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Replace, on each remote, what an earlier forget could not."""
    done = []
    for remote in remotes:
        path = _pending_file(settings, wt, remote.name)
        try:
            data = json.loads(path.read_text())
            keys = [AttemptKey(*k) for k in data["keys"]]
            renamed = {str(k): str(v) for k, v in data["renamed"].items()}
            kind = str(data["kind"])
        except FileNotFoundError:
            continue
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # not ours to read: nothing to retry
            continue
        done.append(_replace_on(settings, repo, wt, remote, kind, keys, renamed, env))
    return done


def _replace_on(settings: Settings, repo: pygit2.Repository, wt: str, remote: Remote,
                kind: str, keys: list[AttemptKey], renamed: dict[str, str],
                env: Mapping[str, str]) -> dict[str, Any]:
    """Replace our refs on ``remote`` that pin a rewritten commit, and move
    its manifest on; what fails is kept for the next forget."""
    pending = _pending_file(settings, wt, remote.name)
    pending.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    replace_file(pending, json.dumps({"kind": kind, "renamed": renamed, "keys": [
        [k.run_id, k.node_id, k.iteration, k.attempt] for k in keys]}).encode(),
        mode=0o600, exact_mode=True, sync=True)
    result: dict[str, Any] = {"name": remote.name, "refs_replaced": 0, "refs_deleted": 0,
                              "error": None}
    try:
        there = transport.ls_remote(repo.path, remote.url, [_OURS + "*"], env=env)
        specs, leases = _plan(repo, kind, keys, renamed, there)
        mref = manifest.local_ref(wt, remote.name, manifest.replica_id(settings.state_dir))
        theirs = _renamed_manifest(repo, there.get(mref), renamed)
        if theirs is not None:
            specs.append(f"{theirs}:{mref}")
            leases[mref] = there[mref]
        transport.replace(repo.path, remote.url, specs, leases, env=env)
        _follow_manifest(repo, mref, theirs, there.get(mref), renamed)
    except (DurabilityError, pygit2.GitError, OSError) as exc:
        result["error"] = str(exc)
        log.info("forget could not replace the refs on %s: %s", remote.name, exc)
        return result
    pending.unlink(missing_ok=True)
    result["refs_replaced"] = sum(1 for s in specs if not s.startswith(":"))
    result["refs_deleted"] = sum(1 for s in specs if s.startswith(":"))
    return result


def _plan(repo: pygit2.Repository, kind: str, keys: list[AttemptKey], renamed: dict[str, str],
          there: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The refspecs and leases that put the rewritten commits where the old
    ones are on the remote (a ref there at a commit we did not rewrite is
    not touched: another machine's, or never held a path)."""
    specs: list[str] = []
    leases: dict[str, str] = {}
    if kind == "git":
        for key in keys:
            ref = key_ref(key)
            old = there.get(ref)
            if old in renamed:
                specs.append(f"{renamed[old]}:{ref}")
                leases[ref] = old
    else:
        for old, new in sorted(renamed.items()):
            ref = JJ_PIN_PREFIX + old
            if ref in there:
                specs += [f"{new}:{JJ_PIN_PREFIX + new}", f":{ref}"]
                leases[ref] = there[ref]
                leases[JJ_PIN_PREFIX + new] = there.get(JJ_PIN_PREFIX + new, "")
    for old, new in sorted(renamed.items()):
        ref = MODES_PREFIX + old
        if ref in there and MODES_PREFIX + new in repo.references:
            specs += [f"{repo.references[MODES_PREFIX + new].target}:{MODES_PREFIX + new}",
                      f":{ref}"]
            leases[ref] = there[ref]
            leases[MODES_PREFIX + new] = there.get(MODES_PREFIX + new, "")
    return specs, leases


def _renamed_manifest(repo: pygit2.Repository, commit: str | None,
                      renamed: dict[str, str]) -> pygit2.Oid | None:
    """A manifest commit on top of ``commit`` (the remote's) whose entries
    name the new ids; None when it names no rewritten commit.  Built on the
    remote's own tip, not the local one: the local manifest may list
    checkpoints a failed push left behind, which the remote must not be
    said to hold."""
    if commit is None:
        return None
    scratch = f"{_OURS}forget-manifest/{os.getpid()}-{os.urandom(4).hex()}"
    try:
        repo.references.create(scratch, pygit2.Oid(hex=commit), force=True)
    except (KeyError, ValueError, pygit2.GitError):
        return None  # not a commit this store has: not ours to rewrite
    try:
        changed = _renamed_entries(manifest.read(repo, scratch), renamed)
        if not changed:
            return None
        manifest.add(repo, scratch, changed)
        return pygit2.Oid(hex=str(repo.references[scratch].target))
    finally:
        repo.references.delete(scratch)


def _follow_manifest(repo: pygit2.Repository, mref: str, theirs: pygit2.Oid | None,
                     was: str | None, renamed: dict[str, str]) -> None:
    """The local manifest names the new ids too, and descends from what the
    remote now holds (so the replicator's next push of it is a fast-forward)."""
    try:
        tip = repo.references[mref].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return
    changed = _renamed_entries(manifest.read(repo, mref), renamed)
    if changed:
        manifest.add(repo, mref, changed)
    if theirs is None:
        return
    mine = repo.references[mref].peel(pygit2.Commit)
    if str(tip.id) == was and mine.tree_id == repo[theirs].peel(pygit2.Commit).tree_id:
        repo.references.create(mref, theirs, force=True)
        return
    from durability.backends.git_commit import signature

    sig = signature()
    merged = repo.create_commit(None, sig, sig, "durability manifest: forget\n", mine.tree_id,
                                [theirs, mine.id])
    repo.references.create(mref, merged, force=True)


def _renamed_entries(entries: list[manifest.Entry],
                     renamed: dict[str, str]) -> list[manifest.Entry]:
    changed = []
    for e in entries:
        new = renamed.get(e.checkpoint.commit_id)
        if new is None:
            continue
        ref = JJ_PIN_PREFIX + new if e.ref == JJ_PIN_PREFIX + e.checkpoint.commit_id else e.ref
        changed.append(manifest.Entry(dataclasses.replace(e.checkpoint, commit_id=new), ref))
    return changed


# -- collecting ----------------------------------------------------------------


def _collect(settings: Settings, repo_report: gc.RepoReport, git_dir: Path, worktree: Path,
             env: Mapping[str, str], held: Sequence[int], locked_at_s: float,
             report: ForgetReport) -> None:
    """Prune what nothing reaches now, at once (no grace: the objects held a
    path the user asked to forget)."""
    if report.backend == "git":
        done = backend_prune.collect_git(git_dir, 0, COLLECT_TIMEOUT_S,
                                         locked_at_s=locked_at_s, hold=held)
        report.collected = done.ran
        if done.note:
            report.notes.append(done.note)
        return
    jj = gc._jj_path(repo_report, env)
    assert jj is not None
    timeout = settings.jj_timeout_s
    # jj's current operation must be one whose working copy lacks the paths
    # (they are gone from disk) and that rewrote nothing (an operation names
    # the predecessors of what it rewrote, which jj keeps): a snapshot, an
    # operation that changes nothing, then every older operation goes.
    if backend_prune.workspace_count(jj, worktree, timeout) == 1:
        backend_prune.snapshot_jj(jj, worktree, timeout, hold=held)
        backend_prune.quiet_operation(jj, worktree, timeout, hold=held)
        backend_prune.trim_op_log(jj, worktree, int(time.time() * 1000) + 60_000, timeout,
                                  hold=held)
    else:
        report.notes.append("jj op log kept: the repo has several workspaces, whose "
                            "operations may still name the old commits")
    done = backend_prune.collect_jj(jj, worktree, 0, COLLECT_TIMEOUT_S, hold=held)
    report.collected = done.ran
