"""Remotes and replication state: the rows behind ``durability remote`` and
the service's replicator (docs/how-to/remote.md).

A remote is named per worktree (``remotes``).  The outbox is a table
(``replication_outbox``, written by ``durability.store.outbox``): a row per checkpoint
and remote of its worktree not pushed there yet, written in the transaction
that records the checkpoint (or names the remote), deleted in the one that
records the push.  So a restarted service finds exactly what is left, a
checkpoint taken in-process while no service ran is replicated too, and the
replicator's look at an empty outbox costs the same whatever the history.

Like ``watches``, each call opens its own connection, except with
``keep_open``: the replicator, which looks every 2 s for as long as the
service runs, keeps one (a PostgreSQL connection costs a server process and
tens of milliseconds to open, more than the look itself).  The SQL is one text for both
databases (no ``INSERT OR``, no SQLite-only functions).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from threading import RLock
from typing import Any
from urllib.parse import unquote

from durability.ground.store_errors import CredentialInURL, InvalidValue, NotFound, StoreUnavailable
from durability.store.database import Location, is_url, migrate, open_database
from durability.store.db import DB_ERRORS, Connection, marks, write_transaction
from durability.store.host import host_id
from durability.store.models import Checkpoint
from durability.store.outbox import missing, queue_checkpoint, queue_missing, queue_remote
from durability.store.store import _CHECKPOINT_COLS, gap_reason, now_ms
from durability.store.text import row_from_db, to_db

__all__ = ["FAILED", "PENDING", "PUSHED", "Pending", "Remote", "Remotes"]

PUSHED = "pushed"
FAILED = "failed"
#: Not a ``replication`` row: a checkpoint in the outbox with no ``failed`` row.
PENDING = "pending"

# The store's checkpoint columns, as ``c.`` of the join (``durability.store.gc_rows`` alike).
_CP_COLS = ", ".join(f"c.{c.strip()}" for c in _CHECKPOINT_COLS.split(","))
_CP_WIDTH = len(_CHECKPOINT_COLS.split(","))
# Request ids per `IN (...)` query: under the 999 bound of older SQLite builds.
_CHUNK = 500
# The outbox: each row's checkpoint (by its unique request id), remote (by
# its key) and ``failed`` state (by the replication key), so the cost is the
# outbox's size, never the history's.
_PENDING_SQL = f"""
SELECT {_CP_COLS}, r.name, r.url, r.created_at_ms,
       (SELECT p.state FROM replication p
         WHERE p.request_id = o.request_id AND p.remote = o.remote)
  FROM replication_outbox o
  JOIN workspace_checkpoints c ON c.request_id = o.request_id
  JOIN remotes r ON r.host = o.host AND r.worktree = o.worktree AND r.name = o.remote
 WHERE o.host = $1
 ORDER BY c.worktree, r.name, c.created_at_ms, c.seq
"""


@dataclass(frozen=True)
class Remote:
    worktree: str
    name: str
    url: str
    created_at_ms: int


@dataclass(frozen=True)
class Pending:
    """One checkpoint not yet on one remote."""

    checkpoint: Checkpoint
    remote: Remote
    #: ``failed`` when its replication-failed gap is already filed, else None.
    state: str | None

    @property
    def since_ms(self) -> int:
        """When it became due: its capture, or the remote's creation if later
        (adding a remote replicates the worktree's earlier checkpoints too)."""
        return max(self.checkpoint.created_at_ms, self.remote.created_at_ms)


class Remotes:
    """The ``remotes`` and ``replication`` tables of the state database at
    ``path``, for one machine's worktrees (``host``, default
    ``durability.store.host.host_id``: another machine's worktree at the same path has
    its own remotes, and its checkpoints are never this one's to push)."""

    def __init__(self, location: Location, *, keep_open: bool = False,
                 host: str | None = None) -> None:
        self.location: Location = location if is_url(location) else Path(location)
        self.host: str = host or host_id()
        self._keep_open = keep_open
        self._kept: Connection | None = None
        self._lock = RLock()
        with self._open() as conn:
            migrate(conn, host=self.host)

    def close(self) -> None:
        """Close the kept connection, if any (the next call opens another)."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._kept is not None:
            self._kept.close()
            self._kept = None

    @contextmanager
    def _open(self) -> Iterator[Connection]:
        if self._keep_open:
            with self._lock:
                try:
                    if self._kept is None:
                        self._kept = open_database(self.location)
                    yield self._kept
                except DB_ERRORS as exc:
                    self._drop()  # whatever broke it, the next call starts afresh
                    raise StoreUnavailable("cannot use the remotes of the state database: "
                                           f"{exc}") from exc
            return
        conn = open_database(self.location)
        try:
            yield conn
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot use the remotes of the state database: {exc}"
                                   ) from exc
        finally:
            conn.close()

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._open() as conn:
            return [row_from_db(r) for r in conn.execute(sql, params).fetchall()]

    # -- the remotes -------------------------------------------------------

    def add(self, worktree: str, name: str, url: str) -> Remote:
        """Name a remote for ``worktree`` (its earlier checkpoints join the
        outbox); a name already used is ``InvalidValue``, a URL holding a
        credential ``CredentialInURL`` (whoever calls: never stored)."""
        held = credential_in_url(url)
        if held is not None:
            raise CredentialInURL(
                f"the remote URL holds {held}, which would be stored and shown: give the URL "
                "without it and let git's credential helper (git help credential) or ssh "
                "keys supply it")
        remote = Remote(worktree, name, url, now_ms())
        with self._open() as conn, write_transaction(conn):
            if conn.execute("SELECT 1 FROM remotes WHERE host=$1 AND worktree=$2 AND name=$3",
                            (self.host, to_db(worktree), name)).fetchone():
                raise InvalidValue(f"remote {name!r} already exists for {worktree}; "
                                   "remove it first")
            conn.execute("INSERT INTO remotes (host, worktree, name, url, created_at_ms) "
                         "VALUES ($1,$2,$3,$4,$5)",
                         (self.host, to_db(worktree), name, url, remote.created_at_ms))
            queue_remote(conn, self.host, worktree, name)
        return remote

    def remove(self, worktree: str, name: str) -> Remote:
        """Forget a remote and what was pushed to it (a remote added again
        under that name may be another repository: everything is due again)."""
        with self._open() as conn, write_transaction(conn):
            mine = (self.host, to_db(worktree), name)
            found = conn.execute("SELECT worktree, name, url, created_at_ms FROM remotes "
                                 "WHERE host=$1 AND worktree=$2 AND name=$3", mine).fetchone()
            if found is None:
                raise NotFound(f"no remote {name!r} for {worktree}")
            conn.execute("DELETE FROM remotes WHERE host=$1 AND worktree=$2 AND name=$3", mine)
            conn.execute("DELETE FROM replication WHERE host=$1 AND worktree=$2 AND remote=$3",
                         mine)
            conn.execute("DELETE FROM replication_outbox WHERE host=$1 AND worktree=$2 AND "
                         "remote=$3", mine)
        return _remote(row_from_db(found))

    def all(self, worktree: str | None = None) -> list[Remote]:
        """The remotes of ``worktree`` (of every worktree when None)."""
        sql = "SELECT worktree, name, url, created_at_ms FROM remotes WHERE host=$1"
        params: tuple[Any, ...] = (self.host,)
        if worktree is not None:
            sql += " AND worktree=$2"
            params += (to_db(worktree),)
        return [_remote(r) for r in self._read(sql + " ORDER BY worktree, name", params)]

    def get(self, worktree: str, name: str) -> Remote:
        for remote in self.all(worktree):
            if remote.name == name:
                return remote
        raise NotFound(f"no remote {name!r} for {worktree} (see `durability remote list`)")

    # -- replication -------------------------------------------------------

    def pending(self) -> list[Pending]:
        """Every checkpoint not yet on a remote of its worktree, oldest first
        per worktree and remote (the outbox)."""
        return [_pending(r) for r in self._read(_PENDING_SQL, (self.host,))]

    def repair(self) -> bool:
        """Queue the due checkpoints the outbox lacks (recorded by a toolkit
        that predates it, against a store this one migrated); whether there
        were any.  Reads the whole history of the worktrees with a remote,
        outside the write lock: the replicator runs it once at its start."""
        with self._open() as conn:
            if not missing(conn):
                return False
        with self._open() as conn, write_transaction(conn):
            queue_missing(conn)
        return True

    def unreplicated(self, worktree: str | None = None) -> list[Checkpoint]:
        """Checkpoints some configured remote does not hold yet: what a
        garbage collector must keep (their refs are still to be pushed)."""
        seen: dict[str, Checkpoint] = {}
        for item in self.pending():
            if worktree is None or item.checkpoint.worktree == worktree:
                seen.setdefault(item.checkpoint.request_id, item.checkpoint)
        return list(seen.values())

    def mark(self, items: Iterable[Pending], state: str, error: str | None = None) -> None:
        """Record ``state`` for each item, over any earlier row (``pushed``
        takes it out of the outbox, ``failed`` leaves it there: retried); an
        item whose remote was removed meanwhile (a push under way when the
        user removed it, or named another repository under its name) is not
        recorded."""
        now = now_ms()
        with self._open() as conn, write_transaction(conn):
            live = {r: self._still_there(conn, r) for r in {i.remote for i in items}}
            for item in items:
                if not live[item.remote]:
                    continue
                key = (to_db(item.checkpoint.request_id), item.remote.name)
                conn.execute("DELETE FROM replication WHERE request_id=$1 AND remote=$2", key)
                conn.execute(
                    "INSERT INTO replication (request_id, worktree, host, remote, state, "
                    "updated_at_ms, error) VALUES ($1,$2,$3,$4,$5,$6,$7)",
                    (key[0], to_db(item.checkpoint.worktree), self.host, item.remote.name,
                     state, now, error))
                if state == PUSHED:
                    conn.execute("DELETE FROM replication_outbox WHERE request_id=$1 AND "
                                 "remote=$2", key)

    def _still_there(self, conn: Connection, remote: Remote) -> bool:
        return conn.execute("SELECT 1 FROM remotes WHERE host=$1 AND worktree=$2 AND name=$3 AND "
                            "url=$4 AND created_at_ms=$5",
                            (self.host, to_db(remote.worktree), remote.name, remote.url,
                             remote.created_at_ms)).fetchone() is not None

    def states(self, checkpoints: Iterable[Checkpoint]) -> dict[str, dict[str, str]]:
        """``{request id: {remote: pushed | pending | failed}}`` for each
        checkpoint whose worktree has a remote (missing: it has none)."""
        wanted = list(checkpoints)
        by_tree: dict[str, list[str]] = {}
        for remote in self.all():
            by_tree.setdefault(remote.worktree, []).append(remote.name)
        done: dict[tuple[str, str], str] = {}
        asked = [to_db(c.request_id) for c in wanted if c.worktree in by_tree]
        # By the checkpoints asked about (the primary key), not by worktree:
        # `show` of one checkpoint must not read the whole history's rows.
        for start in range(0, len(asked), _CHUNK):
            chunk = asked[start:start + _CHUNK]
            for req, name, state in self._read(
                    "SELECT request_id, remote, state FROM replication WHERE request_id IN ("
                    + marks(1, len(chunk)) + ")", tuple(chunk)):
                done[(str(req), str(name))] = str(state)
        return {c.request_id: {n: done.get((c.request_id, n), PENDING)
                               for n in by_tree[c.worktree]}
                for c in wanted if c.worktree in by_tree}

    # -- checkpoints from a remote -----------------------------------------

    def import_checkpoints(self, rows: Iterable[Checkpoint], *,
                           pushed_to: str | None = None) -> int:
        """Record checkpoints read from a remote's manifest (their seq as
        captured), with the runs and attempts they belong to; rows already
        on record are left alone.  A row whose place (attempt and seq) holds
        another commit is ``InvalidValue``: this store already has a
        different history for that attempt.  ``pushed_to`` names the remote
        they came from: they are on it already, so nothing pushes them back.
        A checkpoint another machine of a shared store took is recorded as
        this machine's copy (``_copy_request_id``).  A row whose request id
        is another checkpoint's, or a gap's (each request is on record once,
        checkpoint or gap: ``Store.record_checkpoint``), is not recorded: a
        remote is data from outside.  Returns how many were new."""
        added = 0
        now = now_ms()
        with self._open() as conn, write_transaction(conn):
            for c in rows:
                key = (c.run_id, c.node_id, c.iteration, c.attempt)
                there = conn.execute(
                    "SELECT commit_id FROM workspace_checkpoints WHERE run_id=$1 AND node_id=$2 "
                    "AND iteration=$3 AND attempt=$4 AND host=$5 AND seq=$6",
                    (*key, self.host, c.seq)).fetchone()
                if there is not None:
                    if there[0] != c.commit_id:
                        raise InvalidValue(
                            f"run {c.run_id!r} node {c.node_id!r} seq {c.seq} is commit "
                            f"{str(there[0])[:12]} here and {c.commit_id[:12]} on the remote")
                    continue
                request_id = self._import_one(conn, c, now)
                if request_id is None:
                    continue  # its request id is another checkpoint's: not this one's record
                added += 1
                if pushed_to is not None:
                    conn.execute("DELETE FROM replication_outbox WHERE request_id=$1 AND "
                                 "remote=$2", (to_db(request_id), pushed_to))
                    conn.execute("DELETE FROM replication WHERE request_id=$1 AND remote=$2",
                                 (to_db(request_id), pushed_to))
                    conn.execute("INSERT INTO replication (request_id, worktree, host, remote, "
                                 "state, updated_at_ms) VALUES ($1,$2,$3,$4,$5,$6)",
                                 (to_db(request_id), to_db(c.worktree), self.host, pushed_to,
                                  PUSHED, now))
        return added

    def has_checkpoints(self, run_id: str) -> bool:
        """Whether this machine has a checkpoint of ``run_id``: what a restore
        after an import of it can restore."""
        return bool(self._read("SELECT 1 FROM workspace_checkpoints WHERE run_id=$1 AND "
                               "host=$2 LIMIT 1", (run_id, self.host)))

    def _import_one(self, conn: Connection, c: Checkpoint, now: int) -> str | None:
        """Record ``c`` as this machine's; the request id it is recorded
        under, or None when it is not recorded."""
        key = (c.run_id, c.node_id, c.iteration, c.attempt)
        request_id = c.request_id
        held = conn.execute("SELECT host, run_id, node_id, iteration, attempt, seq, commit_id "
                            "FROM workspace_checkpoints WHERE request_id=$1",
                            (to_db(request_id),)).fetchone()
        if held is not None:
            if held[0] == self.host or tuple(held[1:]) != (*key, c.seq, c.commit_id):
                return None  # this machine's, at another place; or a forged entry's
            # The same checkpoint, taken by another machine of this shared
            # store: this machine's row of it needs a request id of its own
            # (they are unique), and leaves the attempt's pointer alone (the
            # checkpoint is not new to the store).
            request_id = _copy_request_id(c.request_id, self.host)
            if conn.execute("SELECT 1 FROM workspace_checkpoints WHERE request_id=$1",
                            (to_db(request_id),)).fetchone():
                return None
        if gap_reason(conn, request_id) is not None:
            # A gap on record for the request (the entry is forged, or the
            # remote stale): the gap is its record, never a checkpoint beside it.
            return None
        if not conn.execute("SELECT 1 FROM runs WHERE run_id=$1", (c.run_id,)).fetchone():
            conn.execute("INSERT INTO runs (run_id, created_at_ms) VALUES ($1, $2)",
                         (c.run_id, now))
        if not conn.execute("SELECT 1 FROM attempts WHERE run_id=$1 AND node_id=$2 AND "
                            "iteration=$3 AND attempt=$4", key).fetchone():
            conn.execute("INSERT INTO attempts (run_id, node_id, iteration, attempt, state, "
                         "started_at_ms, worktree) VALUES ($1,$2,$3,$4,'running',$5,$6)",
                         (*key, now, to_db(c.worktree)))
        conn.execute(
            "INSERT INTO workspace_checkpoints (run_id, node_id, iteration, attempt, seq, "
            "commit_id, change_id, operation_id, worktree, source, tool_use_id, label, "
            "request_id, created_at_ms, harness, agent_id, agent_type, host) "
            "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18)",
            (*key, c.seq, c.commit_id, c.change_id, c.operation_id, to_db(c.worktree),
             c.source, to_db(c.tool_use_id), to_db(c.label), to_db(request_id),
             c.created_at_ms, c.harness, to_db(c.agent_id), to_db(c.agent_type), self.host))
        if held is None:
            # The attempt's pointer names its newest checkpoint, whichever arrived last.
            conn.execute(
                "UPDATE attempts SET jj_pointer=(SELECT commit_id FROM workspace_checkpoints w "
                "WHERE w.run_id=$1 AND w.node_id=$2 AND w.iteration=$3 AND w.attempt=$4 "
                "AND w.host=$5 ORDER BY seq DESC LIMIT 1) WHERE run_id=$6 AND node_id=$7 "
                "AND iteration=$8 AND attempt=$9", (*key, self.host, *key))
        queue_checkpoint(conn, request_id)  # due on this worktree's remotes
        return request_id


def _copy_request_id(request_id: str, host: str) -> str:
    """The request id of machine ``host``'s copy of a checkpoint another
    machine of the same store recorded under ``request_id``: the same for
    every import of it, so it is recorded once."""
    return f"{request_id}@{host}"


def _pending(r: tuple[Any, ...]) -> Pending:
    """A row of ``_PENDING_SQL``: the checkpoint, its remote, the state."""
    c, n = Checkpoint(*r[:_CP_WIDTH]), _CP_WIDTH
    return Pending(c, Remote(str(c.worktree), str(r[n]), str(r[n + 1]), int(r[n + 2])), r[n + 3])


def _remote(r: tuple[Any, ...]) -> Remote:
    return Remote(str(r[0]), str(r[1]), str(r[2]), int(r[3]))


#: A plain ssh user name (``git@``): not a credential.
_SSH_USER = re.compile(r"[A-Za-z0-9._-]{1,32}")
_SSH_SCHEMES = ("ssh://", "git+ssh://", "ssh+git://")


def credential_in_url(url: str) -> str | None:
    """What credential a remote URL holds (a phrase), or None: the floor
    every stored URL passes (``durability.ground.redact.credential_in_url`` also
    knows the token shapes).  Any user information in a URL other than
    ssh; in ssh a user that is not a plain name; a password in
    ``user:password@host:path``; a query string or fragment."""
    if "://" in url:
        scheme, rest = url.split("://", 1)
        authority = rest.split("/", 1)[0]
        ssh = f"{scheme.lower()}://" in _SSH_SCHEMES
    else:  # [user@]host:path, or a path
        head = url.split("/", 1)[0]
        if "@" in head and ":" in head.split("@", 1)[0]:
            return "a password"
        authority, ssh = head.partition(":")[0], True
    user, at, _host = authority.rpartition("@")
    if at:
        if not ssh:
            return "a user name or password"
        if not _SSH_USER.fullmatch(unquote(user)):
            return "a password or token"
    if "?" in url or "#" in url:
        return "a query string"
    return None
