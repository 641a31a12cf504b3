"""A request is a gap or a checkpoint, never both, also when its gap is only
in the spool (contract 5 and docs/RELIABILITY.md).

A hook past its budget files its `timeout` gap through its watchdog, which
writes the spool and exits: the store does not hear of it until the
service's next ingest (every 30 s).  A service capture of the same request
that began in time and finishes after that (stopped, slow) used to record a
checkpoint beside the spooled gap; on PostgreSQL, where the hook's store
takes long to open, that happened to the fallback's own gap as well.

Real parts: the installed ``durability serve``, a jj that waits at a gate
after its snapshot, the spool written as the hook writes it.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from durability.config import Settings
from durability.gaps import spool
from durability.ground import client
from durability.store import Store
from tests.helpers import GatedJj, start_service

RUN = "run-spooled"


def _request(repo: Path, request_id: str, tool_use_id: str) -> dict[str, Any]:
    return client.capture_request(
        request_id=request_id, run_id=RUN, node_id="session", iteration=0, attempt=1,
        worktree=str(repo), source="hook", tool_use_id=tool_use_id, label="Edit f.txt",
        timeout_ms=60_000, deadline_ms=time.time_ns() // 1_000_000 + 60_000)


def _ask(socket_path: Path, request: dict[str, Any], answers: list[dict[str, Any]]) -> None:
    answers.append(client.call(str(socket_path), request, timeout_s=60))


def _gap_line(request_id: str, tool_use_id: str, repo: Path) -> dict[str, Any]:
    """The line the hook's watchdog spools when its budget runs out."""
    return spool.gap_record(run_id=RUN, request_id=request_id, reason="timeout",
                            node_id="session", iteration=0, attempt=1, worktree=str(repo),
                            source="hook", tool_use_id=tool_use_id,
                            detail="hook budget of 4s ran out")


def test_a_late_capture_of_a_request_spooled_as_a_gap_records_no_checkpoint(
    tmp_path: Path, repo: Path
) -> None:
    gated = GatedJj(tmp_path / "gated", when="after")
    svc = start_service(tmp_path, env={**os.environ, "DURABILITY_JJ": str(gated.path)})
    answers: list[dict[str, Any]] = []
    try:
        gated.close()
        (repo / "f.txt").write_text("v1\n")
        asking = threading.Thread(
            target=_ask, args=(svc.socket_path, _request(repo, "req-late-1", "t1"), answers))
        asking.start()
        gated.wait_held(1)  # the service's snapshot is taken; its record waits
        settings = Settings.from_env()
        spool.append_gap(settings.spool_dir, _gap_line("req-late-1", "t1", repo))
        gated.open()
        asking.join(timeout=60)
    finally:
        gated.open()
        svc.stop()
    [answer] = answers
    assert answer["ok"] is False
    assert (answer["error"]["code"], answer["gap_recorded"]) == ("timeout", True)
    with Store(Settings.from_env().database) as store:
        assert store.checkpoints(RUN) == []
        # The spooled gap is now in the store too: one record, the gap.
        assert [(g.request_id, g.reason, g.tool_use_id) for g in store.gaps(RUN)] == [
            ("req-late-1", "timeout", "t1")]


def test_a_spooled_gap_of_another_request_does_not_stop_a_record(
    tmp_path: Path, repo: Path
) -> None:
    svc = start_service(tmp_path)
    try:
        settings = Settings.from_env()
        spool.append_gap(settings.spool_dir, _gap_line("req-other-1", "t1", repo))
        (repo / "f.txt").write_text("v2\n")
        answer = client.call(str(svc.socket_path), _request(repo, "req-other-2", "t2"),
                             timeout_s=60)
    finally:
        svc.stop()
    assert answer["ok"] is True, answer
    with Store(Settings.from_env().database) as store:
        assert [(c.seq, c.tool_use_id) for c in store.checkpoints(RUN)] == [(1, "t2")]


def test_a_spool_folder_reached_through_a_symlink_is_not_believed(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    spool.append_gap(real, spool.gap_record(run_id=RUN, request_id="req-planted",
                                            reason="timeout"))
    link = tmp_path / "spool-link"
    link.symlink_to(real)
    assert spool.find_request([real], RUN, "req-planted") is not None
    assert spool.find_request([link], RUN, "req-planted") is None
    assert spool.find_request([real], RUN, "req-absent") is None
