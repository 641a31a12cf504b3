"""The replication outbox's rows (docs/how-to/remote.md, "The outbox"): one per
checkpoint and remote of its worktree that the remote does not hold yet.

Written inside the transaction that makes a row due, so that no checkpoint
can be recorded, and no remote named, without its rows: the store's
``record_checkpoint``, ``Remotes.add`` and ``Remotes.import_checkpoints``
call ``queue_*`` here; a push deletes what it carried (``Remotes.mark``).
The replicator then reads only this table, whose size is the work still to
do, not the worktree's history.  Under PostgreSQL a checkpoint's write holds
the writers' lock shared and a remote's exclusively (``durability.store.dialect``,
decision 0059), so a checkpoint and a remote recorded at the same time cannot
each miss the other.

Its own module because both the store and ``durability.store.remote_rows`` (which
imports the store) write it.
"""

from __future__ import annotations

from durability.store.db import Connection
from durability.store.text import to_db

__all__ = ["missing", "queue_checkpoint", "queue_missing", "queue_remote"]

# Checkpoints of worktrees with a remote that neither the remote holds (a
# pushed row) nor the outbox lists; ``{where}`` narrows them.
_DUE = """
  FROM remotes r JOIN workspace_checkpoints c ON c.worktree = r.worktree AND c.host = r.host
 WHERE {where}
   AND NOT EXISTS (SELECT 1 FROM replication p WHERE p.request_id = c.request_id
                      AND p.remote = r.name AND p.state = 'pushed')
   AND NOT EXISTS (SELECT 1 FROM replication_outbox o WHERE o.request_id = c.request_id
                      AND o.remote = r.name)
"""
_FILL = "INSERT INTO replication_outbox (request_id, worktree, host, remote) " \
        "SELECT c.request_id, c.worktree, c.host, r.name" + _DUE


def queue_checkpoint(conn: Connection, request_id: str) -> None:
    """The rows of a checkpoint just recorded: one per remote of its worktree
    (none, and two index look-ups, when it has none)."""
    conn.execute(_FILL.format(where="c.request_id = $1"), (to_db(request_id),))


def queue_remote(conn: Connection, host: str, worktree: str, name: str) -> None:
    """The rows of a remote just named: every earlier checkpoint of its
    worktree (of machine ``host``) is due on it."""
    conn.execute(_FILL.format(where="r.host = $1 AND r.worktree = $2 AND r.name = $3"),
                 (host, to_db(worktree), name))


def missing(conn: Connection) -> bool:
    """Whether a due checkpoint has no row: one recorded by a toolkit older
    than the outbox table, against a store this one migrated.  A read of
    every checkpoint of the worktrees with a remote: run it rarely."""
    return conn.execute("SELECT 1" + _DUE.format(where="1 = 1") + " LIMIT 1").fetchone() \
        is not None


def queue_missing(conn: Connection) -> None:
    """Write the rows ``missing`` found lacking."""
    conn.execute(_FILL.format(where="1 = 1"))
