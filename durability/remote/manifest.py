"""The manifest: which checkpoints a remote holds, readable on a machine
that has none of the store.

A commit chain per worktree, remote and state store, under the same name
locally and on the remote: ``refs/durability/manifests/<hash of worktree,
remote name and replica id>`` (one per worktree, so the worktrees of a project
can share a remote without overwriting each other's list; one per state
store, so machines that clone a project to the same path, as a fleet of
containers does, never push over each other's list either).  Its tree holds one small JSON blob per
checkpoint, named by a hash of the checkpoint's place (run, node, iteration,
attempt, seq): the store row as captured (its label ``redact``-ed), plus
``ref``, the ref that pins its commit on the remote.  Each push adds the
batch's entries on top of the last commit, so the remote's ref only ever
moves forward, and a fetch of
``refs/durability/manifests/*`` lists every checkpoint pushed there.  Only
checkpoints of the worktree the remote was named for are listed in it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pygit2

from durability.backends.git_commit import signature
from durability.ground.redact import redact
from durability.store import Checkpoint

__all__ = ["PREFIX", "Entry", "add", "local_ref", "read", "read_all", "replica_id"]

#: Where the manifests are, locally and on the remote.
PREFIX = "refs/durability/manifests/"
_VERSION = 1
_REPLICA_FILE = "replica-id"
_REPLICA = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Entry:
    checkpoint: Checkpoint
    #: The ref that pins the commit on the remote (``refs/durability/...``).
    ref: str


def local_ref(worktree: str, remote: str, replica: str) -> str:
    """The manifest of ``worktree``'s checkpoints on ``remote`` that the
    state store ``replica`` (``replica_id``) writes."""
    basis = f"{worktree}\0{remote}\0{replica}".encode("utf-8", "surrogateescape")
    return PREFIX + hashlib.sha256(basis).hexdigest()[:40]


def replica_id(state_dir: Path) -> str:
    """The random id of the state store in ``state_dir``, made on first use
    (``state_dir/replica-id``): a worktree path and a remote name are not
    unique across machines, this is."""
    path = state_dir / _REPLICA_FILE
    found = _read_id(path)
    if found is not None:
        return found
    fresh = secrets.token_hex(16)
    state_dir.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{_REPLICA_FILE}.{fresh}")
    draft.write_text(fresh + "\n")
    try:
        if path.exists():  # unreadable as an id: replace it
            os.replace(draft, path)
        else:
            os.link(draft, path)  # two services racing: the first one's id wins
    except FileExistsError:
        pass
    finally:
        draft.unlink(missing_ok=True)
    won = _read_id(path)
    if won is None:
        raise OSError(f"cannot keep the replica id in {path}")
    return won


def _read_id(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return text if _REPLICA.fullmatch(text) else None


def _entry_name(c: Checkpoint) -> str:
    place = "\0".join([c.run_id, c.node_id, str(c.iteration), str(c.attempt), str(c.seq)])
    return hashlib.sha256(place.encode("utf-8", "surrogateescape")).hexdigest()[:40] + ".json"


def add(repo: pygit2.Repository, ref: str, entries: list[Entry]) -> None:
    """Add ``entries`` to the manifest at ``ref`` (a new commit on top)."""
    parent = _tip(repo, ref)
    builder = repo.TreeBuilder(parent.tree) if parent is not None else repo.TreeBuilder()
    for entry in entries:
        data = {"v": _VERSION, "ref": entry.ref, **asdict(entry.checkpoint)}
        # The label goes off the machine: a Bash call's is its command line,
        # tokens and all (the local record keeps it whole).
        data["label"] = redact(data["label"]) if data["label"] else data["label"]
        blob = repo.create_blob(json.dumps(data, sort_keys=True,
                                           ensure_ascii=True).encode())
        builder.insert(_entry_name(entry.checkpoint), blob, pygit2.enums.FileMode.BLOB)
    tree = builder.write()
    if parent is not None and parent.tree_id == tree:
        return  # every entry already listed: the remote's ref need not move
    sig = signature()
    oid = repo.create_commit(None, sig, sig, f"durability manifest: {len(entries)} added\n",
                             tree, [parent.id] if parent is not None else [])
    repo.references.create(ref, oid, force=True)


def read(repo: pygit2.Repository, ref: str) -> list[Entry]:
    """Every entry of the manifest at ``ref`` (none when there is no such ref);
    an entry that cannot be read is skipped, never guessed at."""
    tip = _tip(repo, ref)
    if tip is None:
        return []
    found = []
    for item in tip.tree:
        try:
            data: dict[str, Any] = json.loads(repo[item.id].peel(pygit2.Blob).data)
            ref_name = str(data.pop("ref"))
            data.pop("v", None)
            found.append(Entry(Checkpoint(**data), ref_name))
        except (KeyError, TypeError, ValueError, pygit2.GitError):
            continue
    return sorted(found, key=lambda e: (e.checkpoint.node_id, e.checkpoint.iteration,
                                        e.checkpoint.attempt, e.checkpoint.seq))


def read_all(repo: pygit2.Repository, prefix: str) -> list[Entry]:
    """The entries of every manifest under ``prefix``, each place once."""
    found: dict[tuple[str, str, int, int, int], Entry] = {}
    for ref in sorted(r for r in repo.references if r.startswith(prefix)):
        for e in read(repo, ref):
            c = e.checkpoint
            found.setdefault((c.run_id, c.node_id, c.iteration, c.attempt, c.seq), e)
    return sorted(found.values(), key=lambda e: (e.checkpoint.node_id, e.checkpoint.iteration,
                                                 e.checkpoint.attempt, e.checkpoint.seq))


def _tip(repo: pygit2.Repository, ref: str) -> pygit2.Commit | None:
    try:
        return repo.references[ref].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return None
