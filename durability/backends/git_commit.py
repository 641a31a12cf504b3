"""Checkpoint commits of the git backend and the refs that pin them.

Each attempt has one ref, ``refs/durability/git/<hash of the attempt>`` in
the private checkpoint store (``git_store``: never a ref of the user's
repository), pointing at its newest checkpoint commit; every commit's parent is the
attempt's previous checkpoint (the first one's is HEAD at that time, none on
an unborn branch), so one ref keeps the whole chain reachable for ``git gc``
(contract 4, docs/DESIGN.md).  Nothing here reads or moves HEAD's ref, a branch, the index or
a reflog: commits are written with no ref to update, and only the attempt's
own ref under ``refs/durability/`` is set.

The message names the attempt in trailers::

    durability checkpoint: hook Write src/app.py

    Durability-Run: sess-1
    Durability-Node: session
    Durability-Iteration: 0
    Durability-Attempt: 1
    Durability-Seq: 3
    Durability-Source: hook
    Durability-Tool-Use-Id: toolu_01
    Durability-Request: hook-5f...

``Durability-Seq`` is the store's next seq read under the worktree lock
(``Capturer._next_seq``); ``Durability-Request`` (one per request answered)
joins the commit to its store row, which stays the authority.
"""

from __future__ import annotations

import hashlib
import re
import time

import pygit2

from durability.backends.base import Stamp
from durability.ground.ids import printable
from durability.ground.redact import redact
from durability.store import AttemptKey

__all__ = [
    "EMAIL", "NAME", "PIN_PREFIX", "attempt_ref", "commit_checkpoint", "key_ref", "message",
    "parse_trailers", "scratch_commit", "signature",
]

PIN_PREFIX = "refs/durability/git/"
# A fixed identity: a capture must not depend on (or fail for lack of) the
# user's git configuration, and the commits are the toolkit's, not the user's.
# Every commit the toolkit writes with pygit2 (checkpoints, manifests, merge
# backs) signs with it, through ``signature``.
NAME = "worktree-durability"
EMAIL = "durability@localhost"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def signature() -> pygit2.Signature:
    """The toolkit's identity, now, in UTC (no local offset in a commit)."""
    return pygit2.Signature(NAME, EMAIL, int(time.time()), 0)


def attempt_ref(stamp: Stamp) -> str:
    """The ref that pins ``stamp``'s attempt (ids may hold characters a ref
    name cannot, so the name is a hash; the trailers say which attempt)."""
    return key_ref(stamp.key)


def key_ref(k: AttemptKey) -> str:
    """The ref that pins attempt ``k``'s chain of checkpoints."""
    basis = "\0".join([k.run_id, k.node_id, str(k.iteration), str(k.attempt)])
    return PIN_PREFIX + hashlib.sha256(basis.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def message(stamp: Stamp) -> str:
    """The commit message: a subject, then one trailer per field."""
    subject = f"durability checkpoint: {stamp.source}"
    if stamp.label:
        # A pushed checkpoint's message goes to the remote: no token in it
        # (the store's label keeps the command whole).
        subject += " " + _one_line(redact(stamp.label))[:200]
    k = stamp.key
    trailers = [("Run", k.run_id), ("Node", k.node_id), ("Iteration", str(k.iteration)),
                ("Attempt", str(k.attempt))]
    if stamp.seq is not None:
        trailers.append(("Seq", str(stamp.seq)))
    trailers.append(("Source", stamp.source))
    if stamp.tool_use_id:
        trailers.append(("Tool-Use-Id", stamp.tool_use_id))
    trailers += [("Request", r) for r in stamp.request_ids]
    body = "\n".join(f"Durability-{name}: {_one_line(value)}" for name, value in trailers)
    # A commit message is UTF-8: a label naming a path that is not UTF-8, or a
    # call id with a broken escape, is written escaped (the store keeps it as is).
    return "\n".join(printable(line) for line in f"{subject}\n\n{body}".split("\n")) + "\n"


def parse_trailers(text: str) -> dict[str, list[str]]:
    """The ``Durability-*`` trailers of a checkpoint message, by name."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(": ")
        if sep and name.startswith("Durability-"):
            found.setdefault(name[len("Durability-"):], []).append(value)
    return found


def commit_checkpoint(repo: pygit2.Repository, tree: pygit2.Oid, stamp: Stamp,
                      head: pygit2.Repository | None = None) -> str:
    """The attempt's checkpoint of ``tree``: its previous one when the tree is
    unchanged (so the store dedups), else a new commit on top, pinned.
    ``repo`` holds the checkpoints (the private store); ``head``: the
    repository whose HEAD a first checkpoint sits on (the user's), else
    ``repo``'s own."""
    ref = attempt_ref(stamp)
    previous = _target(repo, ref)
    if previous is not None and previous.tree_id == tree:
        return str(previous.id)
    parents = [previous.id] if previous is not None else _head(head or repo)
    sig = signature()
    oid = repo.create_commit(None, sig, sig, message(stamp), tree, parents)
    repo.references.create(ref, oid, force=True)
    return str(oid)


def scratch_commit(repo: pygit2.Repository, tree: pygit2.Oid,
                   head: pygit2.Repository | None = None) -> str:
    """An unpinned commit of ``tree`` (a capture that answers no attempt, such
    as the check after a restore); ``git gc`` may drop it, nothing records it."""
    sig = signature()
    return str(repo.create_commit(None, sig, sig, "durability: scratch\n", tree,
                                  _head(head or repo)))


def _target(repo: pygit2.Repository, ref: str) -> pygit2.Commit | None:
    try:
        return repo.references[ref].peel(pygit2.Commit)
    except (KeyError, pygit2.GitError, ValueError):
        return None  # no checkpoint yet, or a ref someone broke: start afresh


def _head(repo: pygit2.Repository) -> list[pygit2.Oid]:
    """HEAD's commit as the parent list, or no parent on an unborn branch."""
    if repo.head_is_unborn:
        return []
    try:
        return [repo.head.peel(pygit2.Commit).id]
    except (pygit2.GitError, KeyError, ValueError):
        return []


def _one_line(value: str) -> str:
    return _CONTROL.sub(" ", value).strip()
