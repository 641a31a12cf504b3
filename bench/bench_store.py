"""Store benchmark (issue 15): state-store operations per second, SQLite vs
PostgreSQL, on this machine, in one run.

Starts a throwaway PostgreSQL server (scripts/postgres-server.sh, fsync ON
like SQLite's ``synchronous=FULL``: an acknowledged checkpoint survives a
power cut on both) on a Unix socket, and for each backend times:

* ``record_checkpoint``: captures recorded (one transaction: the writers'
  lock, the request-id check, the next seq, the row, the attempt's pointer);
* the same from 4 threads, each with its own ``Store`` (own connection),
  on their own attempts: what concurrent writers get in total;
* ``claim`` + ``beat``: a claim compare-and-swap followed by a heartbeat
  (both fenced write transactions), as a supervisor and its child do;
* ``add_gaps`` of one gap (ingestion);
* ``checkpoints(run)``: a listing read of a run of 200 checkpoints.

Usage: ``.venv/bin/python bench/bench_store.py [--ops 300]``.  Prints
operations per second (median of ``--reps`` rounds) and the ratio
PostgreSQL/SQLite.  Not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from durability.runs.fence import Owner  # noqa: E402
from durability.runs.run_rows import Runs  # noqa: E402
from durability.store import AttemptKey, Gap, NewCheckpoint, Store  # noqa: E402


class Server:
    """A throwaway PostgreSQL server with fsync on."""

    def __init__(self) -> None:
        self.top = Path(tempfile.mkdtemp(prefix="dur-bench-pg-"))
        self.top.chmod(0o711)  # the server runs as another user when we are root
        self.dir = self.top / "pg"
        done = subprocess.run(["sh", str(ROOT / "scripts" / "postgres-server.sh"), "start",
                               str(self.dir)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"cannot start PostgreSQL: {done.stderr.strip()}")
        self.url = done.stdout.strip().splitlines()[-1]

    def fresh(self) -> str:
        import psycopg

        schema = f"b_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return f"{self.url}&options={quote(f'-c search_path={schema}')}"

    def stop(self) -> None:
        subprocess.run(["sh", str(ROOT / "scripts" / "postgres-server.sh"), "stop",
                        str(self.dir)], capture_output=True, check=False)
        shutil.rmtree(self.top, ignore_errors=True)


def _new(key: AttemptKey) -> NewCheckpoint:
    return NewCheckpoint(key=key, commit_id=uuid.uuid4().hex + "00000000", worktree="/w",
                         source="bench", request_id=uuid.uuid4().hex)


def _rate(ops: int, fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return ops / (time.perf_counter() - start)


def captures(location: Path | str, ops: int) -> float:
    with Store(location) as store:
        key = AttemptKey(f"r-{uuid.uuid4().hex[:8]}", "n", 0, 1)
        store.record_checkpoint(_new(key))  # the run and attempt rows exist after this
        return _rate(ops, lambda: [store.record_checkpoint(_new(key)) for _ in range(ops)])


def concurrent_captures(location: Path | str, ops: int, threads: int = 4) -> float:
    stores = [Store(location) for _ in range(threads)]
    try:
        def work(store: Store) -> None:
            key = AttemptKey(f"r-{uuid.uuid4().hex[:8]}", "n", 0, 1)
            for _ in range(ops // threads):
                store.record_checkpoint(_new(key))

        def run() -> None:
            pool = [threading.Thread(target=work, args=(s,)) for s in stores]
            for t in pool:
                t.start()
            for t in pool:
                t.join()

        return _rate(ops // threads * threads, run)
    finally:
        for s in stores:
            s.close()


def claims(location: Path | str, ops: int) -> float:
    with Runs(location) as runs:
        run_id = f"c-{uuid.uuid4().hex[:8]}"
        owner = Owner("bench", 1, "bench-host")
        claim = runs.create_run(run_id, owner=owner, workflow_path="/wf.py", repo_root="/r",
                                worktree=None, metadata_json="{}", plan_json="[]",
                                limits_json="{}")

        def run() -> None:
            nonlocal claim
            for _ in range(ops):
                got = runs.claim(run_id, expected_epoch=claim.epoch, owner=owner)
                assert got is not None
                claim = got
                runs.beat(claim)

        return _rate(ops, run)


def gaps(location: Path | str, ops: int) -> float:
    with Store(location) as store:
        def run() -> None:
            for i in range(ops):
                store.add_gaps([Gap(ts_ms=i, run_id="g", request_id=uuid.uuid4().hex,
                                    reason="timeout")])

        return _rate(ops, run)


def listing(location: Path | str, ops: int) -> float:
    with Store(location) as store:
        key = AttemptKey(f"l-{uuid.uuid4().hex[:8]}", "n", 0, 1)
        for _ in range(200):
            store.record_checkpoint(_new(key))
        return _rate(ops, lambda: [store.checkpoints(key.run_id) for _ in range(ops)])


BENCHES: dict[str, Callable[[Path | str, int], float]] = {
    "record_checkpoint": captures,
    "record_checkpoint, 4 writers": concurrent_captures,
    "claim + beat": claims,
    "add_gaps (1 gap)": gaps,
    "checkpoints(run) of 200": listing,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300, help="operations per round")
    parser.add_argument("--reps", type=int, default=3, help="rounds (median reported)")
    args = parser.parse_args()
    server = Server()
    work = Path(tempfile.mkdtemp(prefix="dur-bench-sqlite-"))
    try:
        print(f"store operations per second, median of {args.reps} rounds of {args.ops} "
              "(PostgreSQL on a Unix socket, fsync on; SQLite WAL, synchronous=FULL)")
        print(f"{'operation':32} {'SQLite':>10} {'PostgreSQL':>11} {'PG/SQLite':>10}")
        for name, bench in BENCHES.items():
            results: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
            for rep in range(args.reps):  # interleaved: both see the same machine
                results["sqlite"].append(bench(work / f"s{rep}-{uuid.uuid4().hex[:6]}.db",
                                               args.ops))
                results["postgresql"].append(bench(server.fresh(), args.ops))
            lite = statistics.median(results["sqlite"])
            pg = statistics.median(results["postgresql"])
            print(f"{name:32} {lite:10.0f} {pg:11.0f} {pg / lite:10.2f}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
