"""The backends' half of ``durability gc``: unpinning, rewriting and collecting.

What pins a checkpoint (contract 4, docs/DESIGN.md) differs per backend:

- jj: one ref per commit, ``refs/durability/jj/<commit>``, in the git store
  behind jj.  Unpinning deletes it; jj's own op log (and its
  ``refs/jj/keep/*``) keeps the commit until the operations that knew it are
  abandoned (``trim_op_log``) and ``jj util gc`` runs.
- git: one ref per attempt on its newest checkpoint, whose chain of parents
  holds the older ones, so a commit in the middle cannot be let go by deleting
  a ref.  ``rewrite_chain`` writes the kept checkpoints again as a new chain
  (same trees, messages and dates; each parent is the previous kept one), so
  kept checkpoints get new commit ids, which the caller records.

``durability forget`` (``durability.retention.forget``) writes checkpoints
again with some paths taken out of their trees (``Stripper``): a git chain
whole (``forget_chain``, the old tip pinned under ``FORGET_PENDING_PREFIX``
meanwhile), jj commits one by one (``forget_commits``, each new one pinned).

Every function here is called under the worktree locks of the repository's
worktrees (``durability.retention.gc``); none decides what expires.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from durability.backends.git import FORGOTTEN_MARK
from durability.backends.git_commit import PIN_PREFIX as GIT_PIN_PREFIX
from durability.backends.git_commit import key_ref, parse_trailers
from durability.backends.git_store import is_store, user_common
from durability.backends.index_lock import writing
from durability.backends.jj import PIN_PREFIX as JJ_PIN_PREFIX
from durability.backends.modes import PREFIX as MODES_PREFIX
from durability.ground import proc
from durability.ground.errors import GitFailed, JjFailed
from durability.store import AttemptKey

__all__ = ["FORGET_PENDING_PREFIX", "PENDING_PREFIX", "Collected", "Interrupted", "StoreFigures",
           "Stripper", "collect_git", "collect_jj", "drop_from_indexes", "figures",
           "finish_forget", "finish_rewrite", "forget_chain", "forget_commits",
           "forget_pending", "move_modes", "pending", "quiet_operation", "resume_forget",
           "resume_rewrite", "rewrite_chain", "snapshot_jj", "trim_op_log", "unpin_jj",
           "workspace_count"]

#: The old tip of a chain being rewritten, pinned until the store records the
#: new ids: a gc killed in between leaves both chains reachable, never neither.
PENDING_PREFIX = "refs/durability/gc-pending/"
#: A private index's tree, pinned while objects are pruned.
INDEX_PREFIX = "refs/durability/gc-index/"
_OP_LINE = re.compile(r"^([0-9a-f]+) (-?\d+)$")
_ROOT_OP = re.compile(r"^0+$")


@dataclass(frozen=True)
class StoreFigures:
    """A git store's size: bytes on disk, our refs, jj's keep refs, objects."""

    bytes: int
    refs: int
    keep_refs: int
    objects: int


@dataclass(frozen=True)
class Collected:
    ran: bool
    note: str | None = None


def figures(git_dir: Path, measured: Sequence[Path]) -> StoreFigures:
    """The figures of the store at ``git_dir``; bytes are those of the
    ``measured`` folders (the git folder; for jj also its repo folder)."""
    repo = pygit2.Repository(str(git_dir))
    ours = keep = 0
    for name in repo.references:
        if name.startswith("refs/durability/"):
            ours += 1
        elif name.startswith("refs/jj/keep/"):
            keep += 1
    roots = sorted({p.resolve() for p in measured})
    # A folder inside another is counted once (jj's own git store is in .jj/repo).
    roots = [p for p in roots if not any(o != p and o in p.parents for o in roots)]
    return StoreFigures(sum(map(disk_bytes, roots)), ours, keep, _objects(git_dir))


def disk_bytes(root: Path) -> int:
    """Bytes the files under ``root`` take on disk (allocated blocks)."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                continue  # removed while walking (a concurrent gc's temp file)
    return total


def _objects(git_dir: Path) -> int:
    """Loose plus packed objects (``git count-objects -v``); -1 without git."""
    try:
        done = proc.run(["git", "--git-dir", str(git_dir), "count-objects", "-v"], timeout=120)
    except (OSError, proc.TimedOut):
        return -1
    found = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    try:
        return int(found.get("count", 0)) + int(found.get("in-pack", 0))
    except ValueError:
        return -1


# -- jj --------------------------------------------------------------------


def unpin_jj(git_dir: Path, commits: Iterable[str]) -> int:
    """Delete the pins (and kept file modes) of ``commits``; returns refs removed."""
    try:
        repo = pygit2.Repository(str(git_dir))
    except pygit2.GitError as exc:
        raise JjFailed(f"cannot open {git_dir}: {exc}") from exc
    return sum(_delete(repo, prefix + c) for c in commits
               for prefix in (JJ_PIN_PREFIX, MODES_PREFIX))


def workspace_count(jj: str, worktree: Path, timeout_s: float) -> int:
    """How many workspaces share the jj repo of ``worktree``."""
    done = _jj(jj, worktree, timeout_s, "--ignore-working-copy", "workspace", "list")
    return len([line for line in done.splitlines() if line.strip()])


def trim_op_log(jj: str, worktree: Path, cutoff_ms: int, timeout_s: float, *,
                hold: Sequence[int] = ()) -> int:
    """Abandon every operation that ended before ``cutoff_ms`` (never the
    current one); returns how many operations were older.  Only for a repo
    with one workspace: another workspace's working copy names an operation
    that abandoning would rewrite under it.  ``hold``: the worktree locks'
    descriptors, kept by jj while it runs (``proc.run``)."""
    listing = _jj(jj, worktree, timeout_s, "--ignore-working-copy", "op", "log", "--no-graph",
                  "-T", 'id ++ " " ++ time.end().format("%s") ++ "\\n"')
    found = [m.groups() for m in map(_OP_LINE.match, listing.splitlines()) if m]
    ops = [(op, int(ts)) for op, ts in found if not _ROOT_OP.match(op)]
    older = [i for i, (_op, ts) in enumerate(ops) if ts * 1000 < cutoff_ms]
    if not older:
        return 0
    first = max(older[0], 1)  # ops are newest first: index 0 is the current one
    if first >= len(ops):
        return 0
    _jj(jj, worktree, timeout_s, "op", "abandon", f"..{ops[first][0]}", hold=hold)
    return len(ops) - first


def collect_jj(jj: str, worktree: Path, grace_s: float, timeout_s: float, *,
               hold: Sequence[int] = ()) -> Collected:
    """``jj util gc``: at once with no grace (jj takes only "now"), else with
    jj's own two weeks for objects nothing names any more.  jj runs
    ``git gc --prune=<now>`` under it; both keep the worktree locks of
    ``hold`` until they end, so that a gc killed meanwhile cannot leave them
    pruning what the captures that then go ahead write (a capture's fresh
    commit was gone before it was pinned: test_gc_kill9)."""
    _jj(jj, worktree, timeout_s, "util", "gc", *(["--expire=now"] if grace_s <= 0 else []),
        hold=hold)
    return Collected(True, None if grace_s <= 0 else "jj keeps unreferenced objects 2 weeks")


def snapshot_jj(jj: str, worktree: Path, timeout_s: float, *,
                hold: Sequence[int] = ()) -> str:
    """Have jj snapshot the working copy (its current operation then records
    the tree as it is on disk); returns ``@``'s commit id."""
    return _jj(jj, worktree, timeout_s, "log", "-r", "@", "--no-graph", "-T", "commit_id",
               hold=hold).strip()


def quiet_operation(jj: str, worktree: Path, timeout_s: float, *,
                    hold: Sequence[int] = ()) -> None:
    """Two jj operations that leave the repo as it was (a bookmark made and
    deleted): the current operation then rewrote nothing, so abandoning the
    older ones lets go of every predecessor of the working-copy commit."""
    name = f"durability-forget-{os.getpid()}-{os.urandom(4).hex()}"
    _jj(jj, worktree, timeout_s, "bookmark", "create", name, "-r", "@", hold=hold)
    _jj(jj, worktree, timeout_s, "bookmark", "delete", name, hold=hold)


def _jj(jj: str, worktree: Path, timeout_s: float, *args: str,
        hold: Sequence[int] = ()) -> str:
    try:
        done = proc.run([jj, "--no-pager", "--color=never", "-R", ".", *args],
                        cwd=str(worktree), timeout=timeout_s, hold=hold)
    except (OSError, proc.TimedOut) as exc:
        raise JjFailed(f"jj {args[-1] if args else ''} in {worktree}: {exc}") from exc
    if done.returncode != 0:
        raise JjFailed(f"jj {' '.join(args[:3])} in {worktree}: {done.stderr.strip()}")
    return done.stdout


# -- git -------------------------------------------------------------------


def rewrite_chain(repo: pygit2.Repository, key: AttemptKey,
                  drop: set[str]) -> tuple[dict[str, str], list[str]]:
    """Write attempt ``key``'s chain again without the commits in ``drop``.

    Returns (old id -> new id for every kept commit whose id changed, the
    dropped commits found in the chain).  The attempt's ref moves to the new
    tip; the old tip stays pinned under ``PENDING_PREFIX`` until the caller
    has recorded the new ids and calls ``finish_rewrite``.  Commits the chain
    holds without a row in ``drop`` (a row lost to a store failure) are kept.
    """
    ref = key_ref(key)
    try:
        tip = repo.references[ref].peel(pygit2.Commit)
    except (KeyError, pygit2.GitError, ValueError):
        return {}, []
    if pending(repo, key):
        raise Interrupted(f"an earlier gc of {ref} was interrupted")
    chain = _chain(tip, key)
    dropped = [str(c.id) for c in chain if str(c.id) in drop]
    if not dropped:
        return {}, []
    base = chain[-1].parent_ids[:1]
    parents: list[pygit2.Oid] = list(base)
    renamed: dict[str, str] = {}
    for commit in reversed(chain):  # oldest first
        if str(commit.id) in drop:
            continue
        new = repo.create_commit(None, commit.author, commit.committer, commit.message,
                                 commit.tree_id, parents)
        if new != commit.id:
            renamed[str(commit.id)] = str(new)
        parents = [new]
    try:
        repo.references.create(PENDING_PREFIX + ref[len(GIT_PIN_PREFIX):], tip.id, force=True)
        if parents:
            repo.references.create(ref, parents[0], force=True)
        else:
            repo.references.delete(ref)  # cannot happen: the newest is never dropped
        _move_modes(repo, renamed, dropped)
    except (pygit2.GitError, KeyError, ValueError, OSError) as exc:
        raise GitFailed(f"cannot move {ref}: {exc}") from exc
    return renamed, dropped


class Interrupted(GitFailed):
    """An earlier gc moved this attempt's chain and was killed before the
    store named the new commits: its rows may still name the old chain, which
    only the pending ref keeps, so the attempt is left exactly as it is."""


def pending(repo: pygit2.Repository, key: AttemptKey) -> bool:
    return PENDING_PREFIX + key_ref(key)[len(GIT_PIN_PREFIX):] in repo.references


def resume_rewrite(repo: pygit2.Repository,
                   key: AttemptKey) -> tuple[dict[str, str], list[str]] | None:
    """What an interrupted rewrite of ``key``'s chain did, read from the two
    chains: (old id -> new id for each commit of the old chain, the one the
    pending ref keeps, that the current chain holds again; the old commits it
    does not hold, i.e. dropped).  A rewritten commit keeps its message (whose
    trailers name its seq and requests) and tree, so the pair finds it; a
    capture since the kill added commits to the current chain only.  File
    modes follow as in ``rewrite_chain``.  None when either ref is missing
    (the caller then leaves the attempt as it is)."""
    ref = key_ref(key)
    try:
        old_tip = repo.references[PENDING_PREFIX + ref[len(GIT_PIN_PREFIX):]].peel(
            pygit2.Commit)
        tip = repo.references[ref].peel(pygit2.Commit)
    except (KeyError, pygit2.GitError, ValueError):
        return None
    now = {(c.message, str(c.tree_id)): str(c.id) for c in _chain(tip, key)}
    renamed: dict[str, str] = {}
    dropped: list[str] = []
    for commit in _chain(old_tip, key):
        new = now.get((commit.message, str(commit.tree_id)))
        if new is None:
            dropped.append(str(commit.id))
        elif new != str(commit.id):
            renamed[str(commit.id)] = new
    try:
        _move_modes(repo, renamed, [])
    except (pygit2.GitError, KeyError, ValueError, OSError) as exc:
        raise GitFailed(f"cannot move the file modes of {ref}: {exc}") from exc
    return renamed, dropped


def finish_rewrite(repo: pygit2.Repository, key: AttemptKey) -> int:
    """Let go of the old chain once the store names the new one."""
    return _delete(repo, PENDING_PREFIX + key_ref(key)[len(GIT_PIN_PREFIX):])


def _chain(tip: pygit2.Commit, key: AttemptKey) -> list[pygit2.Commit]:
    """The attempt's checkpoints, newest first: first parents while the
    trailers name this attempt (the first one's parent is HEAD of that time)."""
    chain = [tip]
    commit = tip
    while commit.parent_ids:
        try:
            parent = commit.parents[0]
        except (KeyError, pygit2.GitError):
            break
        if not _of(parent, key):
            break
        chain.append(parent)
        commit = parent
    return chain


def _of(commit: pygit2.Commit, key: AttemptKey) -> bool:
    t = parse_trailers(commit.message)
    return (t.get("Run") == [key.run_id] and t.get("Node") == [key.node_id]
            and t.get("Iteration") == [str(key.iteration)]
            and t.get("Attempt") == [str(key.attempt)])


def _move_modes(repo: pygit2.Repository, renamed: dict[str, str], dropped: Sequence[str]) -> None:
    """File modes kept beside a pre-restore commit follow it to its new id."""
    for old, new in renamed.items():
        try:
            target = repo.references[MODES_PREFIX + old].target
        except KeyError:
            continue
        repo.references.create(MODES_PREFIX + new, target, force=True)
        _delete(repo, MODES_PREFIX + old)
    for old in dropped:
        _delete(repo, MODES_PREFIX + old)


def collect_git(git_dir: Path, grace_s: float, timeout_s: float, *,
                locked_at_s: float | None = None, hold: Sequence[int] = ()) -> Collected:
    """Drop unreachable objects older than the grace, as ``git gc`` does
    for objects: repack what is reachable (unreachable packed objects younger
    than the grace come out loose), then prune loose ones past it.  Not
    ``git gc`` itself: its ``pack-refs`` and ``reflog expire`` take ref locks
    that a capture moving its attempt's ref at that moment would fail on,
    and they are the user's housekeeping, not ours.  Needs git.

    Without a grace, objects go up to the second of ``locked_at_s`` (when gc
    took the worktree locks), not "now": git runs in a session of its own, so
    a gc killed meanwhile leaves it running after the locks are gone, and
    "now" would prune what the captures that then go ahead are writing.  (git
    compares whole seconds: a capture within that same second would still be
    exposed, so git also keeps the worktree locks of ``hold`` while it runs.)"""
    if grace_s > 0:
        expire = f"{int(grace_s)}.seconds.ago"
    elif locked_at_s is not None:
        expire = f"@{int(locked_at_s)}"
    else:
        expire = "now"
    base = ["git", "--git-dir", str(git_dir)]
    pins = _pin_private_indexes(git_dir)
    try:
        # Not --local in a private checkpoint store: it would leave out the
        # copies it holds of objects the user's store also has (git_store).
        return _repack_and_prune(base, git_dir, expire, timeout_s, hold,
                                 local=not is_store(git_dir))
    finally:
        _unpin(git_dir, pins)


def _repack_and_prune(base: list[str], git_dir: Path, expire: str,
                      timeout_s: float, hold: Sequence[int], local: bool = True) -> Collected:
    repack = ["repack", "-d", "-l"] if local else ["repack", "-d"]
    for argv in ([*base, *repack, "-A", "-q", f"--unpack-unreachable={expire}"],
                 [*base, "prune", f"--expire={expire}"]):
        try:
            done = proc.run(argv, timeout=timeout_s, hold=hold)
        except FileNotFoundError:
            return Collected(False, "git not found: objects are left for git's own gc")
        except (OSError, proc.TimedOut) as exc:
            raise GitFailed(f"git {argv[3]} in {git_dir}: {exc}") from exc
        if done.returncode != 0:
            raise GitFailed(f"git {argv[3]} in {git_dir}: {done.stderr.strip()}")
    return Collected(True)


def _pin_private_indexes(git_dir: Path) -> list[str]:
    """Pin the tree each worktree's private index holds while objects are
    pruned.  git counts its own index as a root, never ours: after a restore
    the index holds the restored checkpoint's blobs, and were that checkpoint
    dropped, the next capture would find entries whose blobs were pruned."""
    repo = pygit2.Repository(str(git_dir))
    found = _private_indexes(git_dir)
    pins = []
    for number, path in enumerate(p for p in found if not p.name.endswith(".lock")):
        try:
            tree = pygit2.Index(str(path)).write_tree(repo)
        except (pygit2.GitError, OSError, ValueError):
            continue  # unreadable, or already naming a missing blob: nothing to keep
        name = f"{INDEX_PREFIX}{os.getpid()}-{number}"
        repo.references.create(name, tree, force=True)
        pins.append(name)
    return pins


def _private_indexes(git_dir: Path) -> list[Path]:
    """The private index files of the repository whose checkpoints
    ``git_dir`` holds (a private checkpoint store: its user's)."""
    user = user_common(git_dir) if is_store(git_dir) else git_dir
    return sorted(user.glob("durability/index-*")) + sorted(
        user.glob("worktrees/*/durability/index-*"))


def _unpin(git_dir: Path, names: Sequence[str]) -> None:
    repo = pygit2.Repository(str(git_dir))
    for name in names:
        _delete(repo, name)


def _delete(repo: pygit2.Repository, name: str) -> int:
    try:
        repo.references.delete(name)
    except KeyError:
        return 0
    return 1


# -- forget: the same commits without some paths -------------------------------

#: The old tip of a chain ``forget`` is rewriting, pinned until the store
#: names the new commits (``forget_chain``); apart from gc's, whose repair
#: matches commits by tree, which a forget changes.
FORGET_PENDING_PREFIX = "refs/durability/forget-pending/"
_TREE = pygit2.enums.ObjectType.TREE


class Stripper:
    """Trees without some worktree-relative paths (files, links, folders),
    remembered per tree: 50 checkpoints of one tree cost one rewrite."""

    def __init__(self, repo: pygit2.Repository, paths: Sequence[str]) -> None:
        self.repo = repo
        self.paths = tuple(paths)
        #: The blobs the removed entries held (to check they are gone after).
        self.blobs: set[str] = set()
        self._done: dict[pygit2.Oid, pygit2.Oid] = {}

    def __call__(self, tree_id: pygit2.Oid) -> pygit2.Oid:
        found = self._done.get(tree_id)
        if found is None:
            found = self._done[tree_id] = self._strip(tree_id, self.paths)
        return found

    def holds(self, tree_id: pygit2.Oid) -> bool:
        return self(tree_id) != tree_id

    def _strip(self, tree_id: pygit2.Oid, paths: Sequence[str]) -> pygit2.Oid:
        tree = self.repo[tree_id].peel(pygit2.Tree)
        here: set[str] = set()
        below: dict[str, list[str]] = {}
        for path in paths:
            head, _, rest = path.partition("/")
            if rest:
                below.setdefault(head, []).append(rest)
            else:
                here.add(head)
        builder: pygit2.TreeBuilder | None = None
        for name in sorted(here | set(below)):
            if name not in tree:
                continue
            entry = tree[name]
            if name in here:
                self._note(entry)
                new: pygit2.Oid | None = None
            elif entry.type == _TREE:
                new = self._strip(entry.id, below[name])
                if new == entry.id:
                    continue
                if len(self.repo[new].peel(pygit2.Tree)) == 0:
                    new = None  # git keeps no empty folder
            else:
                continue  # a file where a folder of the path would be: not it
            builder = builder or self.repo.TreeBuilder(tree)
            if new is None:
                builder.remove(name)
            else:
                builder.insert(name, new, entry.filemode)
        return tree_id if builder is None else builder.write()

    def _note(self, entry: pygit2.Object) -> None:
        if entry.type == _TREE:
            for item in entry.peel(pygit2.Tree):
                self._note(item)
        else:
            self.blobs.add(str(entry.id))


def forget_chain(repo: pygit2.Repository, key: AttemptKey,
                 strip: Stripper) -> dict[str, str]:
    """Write attempt ``key``'s chain again with every tree ``strip``ped
    (same messages, dates and order; each parent the previous rewritten
    commit); returns old id -> new id of each commit whose id changed.  The
    attempt's ref moves to the new tip; the old tip stays pinned under
    ``FORGET_PENDING_PREFIX`` until ``finish_forget``."""
    ref = key_ref(key)
    try:
        tip = repo.references[ref].peel(pygit2.Commit)
    except (KeyError, pygit2.GitError, ValueError):
        return {}
    if pending(repo, key) or forget_pending(repo, key):
        raise Interrupted(f"an earlier gc or forget of {ref} was interrupted")
    chain = _chain(tip, key)
    if not any(strip.holds(c.tree_id) for c in chain):
        return {}
    parents: list[pygit2.Oid] = list(chain[-1].parent_ids)
    renamed: dict[str, str] = {}
    for commit in reversed(chain):  # oldest first
        new = repo.create_commit(None, commit.author, commit.committer, commit.message,
                                 strip(commit.tree_id), parents)
        if new != commit.id:
            renamed[str(commit.id)] = str(new)
        parents = [new, *commit.parent_ids[1:]]
    try:
        repo.references.create(_forget_pending_ref(key), tip.id, force=True)
        repo.references.create(ref, parents[0], force=True)
        move_modes(repo, renamed, strip.paths)
    except (pygit2.GitError, KeyError, ValueError, OSError) as exc:
        raise GitFailed(f"cannot move {ref}: {exc}") from exc
    return renamed


def forget_pending(repo: pygit2.Repository, key: AttemptKey) -> bool:
    return _forget_pending_ref(key) in repo.references


def resume_forget(repo: pygit2.Repository, key: AttemptKey,
                  strip: Stripper) -> dict[str, str] | None:
    """What an interrupted ``forget_chain`` of ``key`` did: old id -> new id
    of each commit of the pending (old) chain, found in the current chain by
    its message (whose trailers name its seq and requests).  None when either
    ref is missing."""
    try:
        old_tip = repo.references[_forget_pending_ref(key)].peel(pygit2.Commit)
        tip = repo.references[key_ref(key)].peel(pygit2.Commit)
    except (KeyError, pygit2.GitError, ValueError):
        return None
    now = {c.message: str(c.id) for c in _chain(tip, key)}
    renamed = {str(c.id): now[c.message] for c in _chain(old_tip, key)
               if c.message in now and now[c.message] != str(c.id)}
    try:
        move_modes(repo, renamed, strip.paths)
    except (pygit2.GitError, KeyError, ValueError, OSError) as exc:
        raise GitFailed(f"cannot move the file modes of {key_ref(key)}: {exc}") from exc
    return renamed


def finish_forget(repo: pygit2.Repository, key: AttemptKey) -> int:
    """Let go of the old chain once the store names the new one."""
    return _delete(repo, _forget_pending_ref(key))


def _forget_pending_ref(key: AttemptKey) -> str:
    return FORGET_PENDING_PREFIX + key_ref(key)[len(GIT_PIN_PREFIX):]


def forget_commits(repo: pygit2.Repository, commits: Iterable[str],
                   strip: Stripper) -> dict[str, str]:
    """jj's checkpoints written again with their trees ``strip``ped (same
    messages and dates; a parent that is one of ``commits`` is its rewritten
    commit), each pinned under its new id; returns old id -> new id of each
    commit that changed.  The old pins stay (``unpin_jj`` once the rows name
    the new ids)."""
    wanted = {pygit2.Oid(hex=c) for c in commits}
    done: dict[pygit2.Oid, pygit2.Oid] = {}
    for start in sorted(wanted):
        stack = [start]
        while stack:
            oid = stack[-1]
            if oid in done:
                stack.pop()
                continue
            commit = repo[oid].peel(pygit2.Commit)
            todo = [p for p in commit.parent_ids if p in wanted and p not in done]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            parents = [done.get(p, p) for p in commit.parent_ids]
            tree = strip(commit.tree_id)
            if tree == commit.tree_id and parents == list(commit.parent_ids):
                done[oid] = oid
                continue
            done[oid] = repo.create_commit(None, commit.author, commit.committer,
                                           commit.message, tree, parents)
    renamed = {str(old): str(new) for old, new in done.items() if old != new}
    try:
        for new in renamed.values():
            repo.references.create(JJ_PIN_PREFIX + new, pygit2.Oid(hex=new), force=True)
        move_modes(repo, renamed, strip.paths, keep_old=True)
    except (pygit2.GitError, KeyError, ValueError, OSError) as exc:
        raise JjFailed(f"cannot pin the rewritten checkpoints: {exc}") from exc
    return renamed


def move_modes(repo: pygit2.Repository, renamed: dict[str, str], paths: Sequence[str], *,
               keep_old: bool = False) -> None:
    """The file modes kept beside each renamed commit, under its new id,
    without the entries of ``paths``; the old ref goes unless ``keep_old``."""
    from durability.backends.selection import covers

    for old, new in renamed.items():
        try:
            blob = repo.references[MODES_PREFIX + old].peel(pygit2.Blob)
        except (KeyError, ValueError, pygit2.GitError):
            continue
        try:
            data = json.loads(blob.data)
            data["modes"] = {k: v for k, v in data["modes"].items() if not covers(paths, k)}
            target = repo.create_blob(json.dumps(data, sort_keys=True).encode())
        except (ValueError, TypeError, KeyError, AttributeError):
            target = blob.id  # not ours to read: it follows as it is
        repo.references.create(MODES_PREFIX + new, target, force=True)
        if not keep_old:
            _delete(repo, MODES_PREFIX + old)


def drop_from_indexes(git_dir: Path, paths: Sequence[str]) -> int:
    """Remove ``paths`` from every private index of the store (a capture
    hashes such a file again if it comes back); returns entries removed."""
    from durability.backends.selection import covers

    found = _private_indexes(git_dir)
    removed = 0
    for path in (p for p in found if not p.name.endswith(".lock")):
        try:
            with writing(path):  # read and written whole under its writer lock
                index = pygit2.Index(str(path))
                gone = [e.path for e in index if covers(paths, e.path)]
                for name in gone:
                    index.remove(name)
                if gone:
                    index.write()
        except (pygit2.GitError, OSError, ValueError) as exc:
            raise GitFailed(f"cannot drop forgotten paths from {path}: {exc}") from exc
        removed += len(gone)
    for folder in {p.parent for p in found}:
        # A process keeping an index open (the service) opens it again.
        mark = folder / FORGOTTEN_MARK
        mark.touch(mode=0o600)
        os.utime(mark, ns=(time.time_ns(), time.time_ns()))
    return removed
