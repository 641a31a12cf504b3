"""Many hook processes on one worktree at once (docs/DESIGN.md contracts 1-3): 8 workers x 6
calls of the installed ``durability snapshot-hook``, each writing its own file
first, with the service running and with no service (in-process, under the
file lock).  Every call is answered, seqs are contiguous, nothing is lost.

The contention is the number of workers, not of calls: all 8 start together
(a barrier), so from the first call on 8 hooks race for the service's
coalescer or the file lock, as they did with 25 calls each."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from durability.config import Settings
from durability.store import Store
from tests.helpers import (
    ServiceProcess,
    cli_json,
    commit_manifest,
    durability_exe,
    hook_payload,
    ping,
)

RUN = "sess-many"
WORKERS = 8
CALLS = 6


def _file(worker: int, call: int) -> str:
    return f"w{worker}/call-{call:02d}.txt"


def _worker(
    repo: Path, worker: int, env: dict[str, str], start: threading.Barrier
) -> list[subprocess.CompletedProcess[bytes]]:
    """One agent: write a file, then run the hook for that tool call; CALLS times."""
    (repo / f"w{worker}").mkdir()
    done = []
    start.wait(timeout=60)
    for call in range(CALLS):
        path = repo / _file(worker, call)
        path.write_text(f"worker {worker} call {call}\n")
        payload = hook_payload(repo, session_id=RUN, tool_use_id=f"toolu_{worker}_{call}",
                               file_path=str(path))
        done.append(subprocess.run([durability_exe(), "snapshot-hook"],
                                   input=json.dumps(payload).encode(), capture_output=True,
                                   env=env, timeout=120))
    return done


def _hammer(repo: Path) -> None:
    # A loaded 2-core machine can be slow; the budget is not what is tested here.
    env = {**os.environ, "DURABILITY_HOOK_TIMEOUT_MS": "90000"}
    start = threading.Barrier(WORKERS)
    with ThreadPoolExecutor(WORKERS) as pool:
        results = [r for rs in pool.map(lambda w: _worker(repo, w, env, start), range(WORKERS))
                   for r in rs]
    assert len(results) == WORKERS * CALLS
    for r in results:
        assert (r.returncode, r.stdout, r.stderr) == (0, b"", b""), r.stderr.decode()


def _check_store(repo: Path, settings: Settings) -> int:
    with Store(settings.database) as store:
        rows = store.checkpoints(RUN)
        gaps = store.gaps(RUN)
    assert gaps == []
    assert not list(settings.spool_dir.glob("*.ndjson")) or cli_json("gaps", RUN) == []
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    tool_ids = [r.tool_use_id for r in rows]
    assert len(set(tool_ids)) == len(tool_ids)
    assert len({r.commit_id for r in rows}) == len(rows)
    assert all(r.source == "hook" and r.label and r.label.startswith("Write w") for r in rows)
    # A row's commit holds every file its worker wrote up to that call: the
    # capture that answered a call began after the call's write.
    for row in rows:
        assert row.tool_use_id is not None
        worker, call = (int(x) for x in row.tool_use_id.split("_")[1:])
        files = commit_manifest(repo, row.commit_id)
        assert all(_file(worker, c) in files for c in range(call + 1)), row.tool_use_id
    final = commit_manifest(repo, rows[-1].commit_id)
    assert all(_file(w, c) in final for w in range(WORKERS) for c in range(CALLS))
    (attempt,) = cli_json("attempts", RUN)
    assert attempt["jj_pointer"] == rows[-1].commit_id
    return len(rows)


@pytest.mark.slow
def test_eight_processes_with_the_service(
    repo: Path, settings: Settings, service_process: ServiceProcess
) -> None:
    _hammer(repo)
    answer = ping(settings.socket_path) or {}
    rows = _check_store(repo, settings)
    # Every request went through the service, and it coalesced: at most one
    # capture per request, and never fewer rows than distinct trees it saw.
    assert answer.get("requests", 0) >= WORKERS * CALLS
    assert rows <= answer["captures"] <= WORKERS * CALLS


@pytest.mark.slow
def test_eight_processes_without_a_service(repo: Path, settings: Settings) -> None:
    assert ping(settings.socket_path) is None
    _hammer(repo)
    _check_store(repo, settings)
