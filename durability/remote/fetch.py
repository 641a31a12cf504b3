"""What ``restore --from-remote`` fetches before it restores (docs/how-to/remote.md).

On a machine whose store knows nothing of the run (a fresh clone of the
project, or an empty folder): fetch the remote's manifest, pick the run's
entries, fetch the refs that pin their commits, and record them in the local
store as checkpoints of this worktree (their seq as captured).  The restore
itself is then an ordinary local restore: the same confined writer, the same
guard, the same verification.

Fetched refs never replace local ones: pins and manifests land under
``refs/durability/remotes/<name>/``; a pin then seeds the local ref when there
is none yet (a jj pin only when it holds the commit it is named for), so later
captures of an attempt continue the remote's chain and their pushes
fast-forward.  This machine's own manifest is a chain of its own (its name
holds this state store's replica id), never a continuation of the remote's.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import pygit2

from durability.backends import resolve_worktree
from durability.backends.git_commit import PIN_PREFIX as GIT_PIN_PREFIX
from durability.backends.git_commit import key_ref
from durability.config import Settings
from durability.ground import ids
from durability.ground.errors import InvalidInput
from durability.inspect.repository import open_checkpoints
from durability.remote import manifest, transport
from durability.store import AttemptKey, Checkpoint, NotFound
from durability.store.remote_rows import Remotes

__all__ = ["Fetched", "fetch_run", "pre_restore_key", "prepare_folder"]

_JJ_PREFIX = "refs/durability/jj/"
_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Fetched:
    """The worktree fetched into, the run's checkpoints, and how many of
    them the local store did not have."""

    worktree: Path
    checkpoints: list[Checkpoint]
    added: int


def prepare_folder(folder: Path) -> Path:
    """The worktree root at ``folder``; an empty folder becomes a git
    repository first (a restore captures and verifies through a backend)."""
    folder = Path(os.path.abspath(folder))
    if not folder.is_dir():
        raise InvalidInput(f"{folder} is not a folder")
    if not ids.is_jj_root(folder) and not ids.is_git_root(folder) and not any(folder.iterdir()):
        pygit2.init_repository(str(folder))
    return resolve_worktree(folder)


def fetch_run(settings: Settings, *, name: str, run_id: str, folder: Path,
              env: Mapping[str, str] = os.environ) -> Fetched:
    """Fetch run ``run_id``'s checkpoints from remote ``name`` into the
    worktree at ``folder`` and record them in the local store."""
    root = prepare_folder(folder)
    remotes = Remotes(settings.database)
    remote = remotes.get(str(root), name)
    repo = open_checkpoints(root, env)
    mirror = f"refs/durability/remotes/{name}/"
    transport.fetch(repo.path, remote.url, [f"+{manifest.PREFIX}*:{mirror}manifests/*"],
                    env=env)
    entries = [e for e in manifest.read_all(repo, f"{mirror}manifests/")
               if e.checkpoint.run_id == run_id and _sound(e)]
    if not entries:
        raise NotFound(f"remote {name!r} lists no checkpoints of run {run_id!r}")
    specs = sorted({f"+{e.ref}:{_mirrored(mirror, e.ref)}" for e in entries})
    transport.fetch(repo.path, remote.url, specs, env=env)
    _seed(repo, mirror, entries)
    rows = [replace(e.checkpoint, worktree=str(root)) for e in entries]
    missing = [c for c in rows if c.commit_id not in repo]
    if missing:
        raise transport.RemoteFailed(f"remote {name!r} did not hand over commit "
                                     f"{missing[0].commit_id[:12]} (seq {missing[0].seq})")
    added = remotes.import_checkpoints(rows, pushed_to=name)
    if not added and not remotes.has_checkpoints(run_id):
        # Every entry was refused (the import records none whose request id
        # is another checkpoint's or a gap's): say so, not that the run is unknown.
        many = "checkpoint" if len(rows) == 1 else "checkpoints"
        raise NotFound(f"remote {name!r} lists {len(rows)} {many} of run {run_id!r} and none "
                       "could be recorded here: each carries the request id of another "
                       "checkpoint or a gap on record here")
    return Fetched(root, rows, added)


def pre_restore_key(run_id: str, node_id: str) -> AttemptKey:
    """Where the pre-restore checkpoint of a ``--from-remote`` restore goes: a
    run of its own (``RUN.pre-restore.<random>``), never the restored run.

    In the restored attempt it would take the next seq of a chain that the
    machine which took the run goes on writing: once pushed, that machine's
    own next checkpoints would be refused by the remote, and a later
    ``--from-remote`` would pick this machine's seq (issue 15).  A run no other
    machine names pushes to refs and a manifest entry of its own."""
    return AttemptKey(f"{run_id[:150]}.pre-restore.{uuid.uuid4().hex}", node_id, 0, 1)


def _sound(entry: manifest.Entry) -> bool:
    """An entry a restore can use: ids that are ids, a commit that is a
    commit, the pin our replicator names for it (a jj commit's own pin, else
    its attempt's git pin): a remote is data from outside."""
    c = entry.checkpoint
    if not (ids.is_valid_id(c.run_id) and ids.is_valid_id(c.node_id)
            and all(_is_int(v) for v in (c.seq, c.iteration, c.attempt, c.created_at_ms))
            and isinstance(c.commit_id, str) and bool(_COMMIT.fullmatch(c.commit_id))
            and isinstance(c.request_id, str) and bool(c.request_id)
            and isinstance(c.worktree, str) and isinstance(c.source, str)
            and all(v is None or isinstance(v, str) for v in (
                c.change_id, c.operation_id, c.tool_use_id, c.label, c.harness, c.agent_id,
                c.agent_type))):
        return False
    return entry.ref in (_JJ_PREFIX + c.commit_id, key_ref(c.key))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mirrored(mirror: str, ref: str) -> str:
    """Where a pin of the remote lands here: under the remote's own refs,
    never over a local ref (a local pin keeps a local commit alive)."""
    if ref.startswith(_JJ_PREFIX):
        return f"{mirror}jj/{ref[len(_JJ_PREFIX):]}"
    return f"{mirror}git/{ref[len(GIT_PIN_PREFIX):]}"


def _seed(repo: pygit2.Repository, mirror: str, entries: list[manifest.Entry]) -> None:
    """Give each fetched pin its local name where there is none yet; a jj pin
    only when it holds the commit it is named for."""
    for ref in {e.ref for e in entries}:
        fetched = _mirrored(mirror, ref)
        if ref.startswith(_JJ_PREFIX) and fetched in repo.references and (
                str(repo.references[fetched].target) != ref[len(_JJ_PREFIX):]):
            continue
        _seed_ref(repo, ref, fetched)


def _seed_ref(repo: pygit2.Repository, local: str, fetched: str) -> None:
    """Point ``local`` where ``fetched`` points, unless ``local`` exists."""
    if local in repo.references or fetched not in repo.references:
        return
    repo.references.create(local, repo.references[fetched].target)
