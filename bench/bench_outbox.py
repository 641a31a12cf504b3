"""Replication outbox benchmark (issue 15): what the replicator's idle look
at the outbox costs, at 10k and 100k checkpoints, before and after the
outbox became a table (migration 0011), on SQLite and PostgreSQL.

For each backend and history size, a fresh store holds that many
checkpoints of one worktree with a remote, every one already pushed (rows
inserted in bulk, as the store writes them: recording 100k captures one by
one would take minutes), so there is nothing to push: the replicator's look
every ``POLL_S`` (2 s) finds nothing.  Timed, median of ``--reps``:

* ``before``: the query of migration 0010, which derived the outbox by
  joining every checkpoint of every worktree with a remote against the
  ``replication`` rows (the baseline, run on the same rows in the same run);
* ``after``: the outbox table's query (``durability.store.remote_rows._PENDING_SQL``), on
  the same open connection;
* ``pending()``: the call as the replicator makes it, on the connection it
  keeps; ``fresh``: the same call opening a connection each time, as the
  replicator did before 0011 (under PostgreSQL the connection dominates);
* ``repair()``: the once-per-service-start look for checkpoints the outbox
  lacks (it reads the history, like ``before``);
* ``record_checkpoint``: a capture's record in a worktree with a remote and
  in one without (the outbox row is written in its transaction).

The idle share of one core is the look's time over ``POLL_S``.  PostgreSQL
runs on a throwaway server (``bench_store.Server``; ``--no-postgresql`` to
skip).  Usage: ``.venv/bin/python bench/bench_outbox.py [--sizes 10000,100000]``.
Not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_store import Server  # noqa: E402

from durability.remote.replicator import POLL_S  # noqa: E402
from durability.store import AttemptKey, NewCheckpoint, Store  # noqa: E402
from durability.store.database import Location, open_database  # noqa: E402
from durability.store.db import write_transaction  # noqa: E402
from durability.store.host import host_id  # noqa: E402
from durability.store.remote_rows import _CP_COLS, _PENDING_SQL, Remotes  # noqa: E402

#: The derived outbox of migration 0010 (durability/store/remote_rows.py before 0011),
#: with the machine in the join and the filter as migration 0012 keys every
#: worktree by it ($1: this machine's id, as the outbox query takes it).
BEFORE_SQL = f"""
SELECT {_CP_COLS}, r.name, r.url, r.created_at_ms,
       (SELECT p.state FROM replication p
         WHERE p.request_id = c.request_id AND p.remote = r.name)
  FROM remotes r JOIN workspace_checkpoints c ON c.host = r.host AND c.worktree = r.worktree
 WHERE r.host = $1
   AND NOT EXISTS (SELECT 1 FROM replication p WHERE p.request_id = c.request_id
                      AND p.remote = r.name AND p.state = 'pushed')
 ORDER BY c.worktree, r.name, c.created_at_ms, c.seq
"""
WORKTREE = "/bench/worktree"
#: This machine's id, as every row of the store names it.
HOST = host_id()
CHUNK = 5000


def fill(location: Location, size: int) -> None:
    """``size`` pushed checkpoints of ``WORKTREE``, which has a remote."""
    Store(location).close()  # created and migrated
    Remotes(location).add(WORKTREE, "backup", "file:///bench/backup.git")
    conn = open_database(location)
    try:
        with write_transaction(conn):
            for run in range(size // 1000 + 1):
                conn.execute("INSERT INTO runs (run_id, created_at_ms) VALUES ($1, 1)",
                             (f"run-{run}",))
                conn.execute("INSERT INTO attempts (run_id, node_id, iteration, attempt, "
                             "state, started_at_ms, worktree) VALUES ($1, 'agent', 0, 1, "
                             "'running', 1, $2)", (f"run-{run}", WORKTREE))
        for start in range(0, size, CHUNK):
            part = range(start + 1, min(start + CHUNK, size) + 1)
            with write_transaction(conn):
                # Every row is this machine's (migration 0012: a worktree is
                # its machine and its path), as the store writes them.
                conn.executemany(
                    "INSERT INTO workspace_checkpoints (run_id, node_id, iteration, attempt, "
                    "host, seq, commit_id, worktree, source, request_id, created_at_ms, "
                    "harness) VALUES ($1, 'agent', 0, 1, $2, $3, $4, $5, 'hook', $6, $7, "
                    "'claude')",
                    [(f"run-{n // 1000}", HOST, n, f"{n:040x}", WORKTREE, f"req-{n}", n)
                     for n in part])
                conn.executemany(
                    "INSERT INTO replication (request_id, host, worktree, remote, state, "
                    "updated_at_ms) VALUES ($1, $2, $3, 'backup', 'pushed', 1)",
                    [(f"req-{n}", HOST, WORKTREE) for n in part])
        conn.execute("ANALYZE")  # what autovacuum (PostgreSQL) would have done
    finally:
        conn.close()


def median_ms(reps: int, fn: Callable[[], Any]) -> float:
    fn()  # warm: the first read brings the pages in
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def looks(location: Location, reps: int) -> dict[str, float]:
    conn = open_database(location)
    remotes = Remotes(location, keep_open=True)
    fresh = Remotes(location)
    try:
        def query(sql: str) -> Callable[[], None]:
            def run() -> None:
                rows = conn.execute(sql, (HOST,)).fetchall()
                if rows:
                    sys.exit(f"bench: {len(rows)} checkpoints pending; expected none")
            return run
        return {"before": median_ms(reps, query(BEFORE_SQL)),
                "after": median_ms(reps, query(_PENDING_SQL)),
                "pending": median_ms(reps, remotes.pending),
                "fresh": median_ms(reps, fresh.pending),
                "repair": median_ms(max(reps // 4, 1), remotes.repair)}
    finally:
        conn.close()
        remotes.close()


def captures(location: Location, ops: int) -> dict[str, float]:
    """Median ms of ``record_checkpoint`` without and with a remote, interleaved."""
    times: dict[str, list[float]] = {"none": [], "remote": []}
    with Store(location) as store:
        for i in range(ops):
            for kind, worktree in (("none", "/bench/other"), ("remote", WORKTREE)):
                new = NewCheckpoint(key=AttemptKey(f"cap-{kind}", "agent", 0, 1),
                                    commit_id=f"{i:08x}" + uuid.uuid4().hex, worktree=worktree,
                                    source="bench", request_id=uuid.uuid4().hex)
                start = time.perf_counter()
                store.record_checkpoint(new)
                times[kind].append((time.perf_counter() - start) * 1000)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="10000,100000",
                        help="history sizes (checkpoints), comma-separated")
    parser.add_argument("--reps", type=int, default=20, help="looks timed (median reported)")
    parser.add_argument("--captures", type=int, default=200,
                        help="record_checkpoint calls timed per case")
    parser.add_argument("--no-postgresql", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    server = None if args.no_postgresql else Server()
    work = Path(tempfile.mkdtemp(prefix="dur-bench-outbox-"))
    try:
        print(f"replicator's idle look at the outbox, median of {args.reps} (ms); nothing "
              f"pending; idle share of a core at one look per {POLL_S:g} s")
        print(f"{'backend':11} {'checkpoints':>11} {'before':>9} {'after':>8} {'pending()':>10} "
              f"{'fresh':>7} {'before/after':>12} {'idle before':>11} {'idle after':>10} "
              f"{'repair()':>9}")
        for backend in ("sqlite", "postgresql"):
            if backend == "postgresql" and server is None:
                continue
            for size in sizes:
                location: Location = (server.fresh() if server is not None
                                      and backend == "postgresql"
                                      else work / f"{size}-{uuid.uuid4().hex[:6]}.db")
                fill(location, size)
                got = looks(location, args.reps)
                # Idle share: the replicator's whole look, connection included.
                print(f"{backend:11} {size:11,} {got['before']:9.2f} {got['after']:8.3f} "
                      f"{got['pending']:10.3f} {got['fresh']:7.2f} "
                      f"{got['before'] / got['after']:11.0f}x "
                      f"{(got['before'] + got['fresh'] - got['after']) / (POLL_S * 10):10.2f}% "
                      f"{got['pending'] / (POLL_S * 10):9.4f}% {got['repair']:9.2f}")
                if size == sizes[-1]:
                    cap = captures(location, args.captures)
                    print(f"{'':11} record_checkpoint at {size:,}: no remote "
                          f"{cap['none']:.2f} ms, with a remote {cap['remote']:.2f} ms "
                          f"({cap['remote'] / cap['none']:.2f}x)")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
