"""Crash safety: SIGKILL of the service or of a hook in the middle of a
capture loses nothing that was acknowledged, leaves no torn row and a sound
database, and the next service or hook carries on with the next seq."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.ground import client
from durability.ground.errors import ConnectionLost, ServiceUnreachable
from durability.store import Store
from tests.helpers import (
    GatedJj,
    cli,
    commit_manifest,
    durability_exe,
    hook_payload,
    pid_alive,
    start_service,
    wait_for,
)

RUN = "run-crash"


def _wire(repo: Path, request_id: str) -> dict[str, Any]:
    return {"v": 1, "op": "capture", "request_id": request_id, "run_id": RUN, "node_id": "n",
            "worktree": str(repo.resolve()), "source": "hook", "tool_use_id": request_id,
            "timeout_ms": 120_000}


def _send(settings: Settings, repo: Path, request_id: str) -> dict[str, Any]:
    return client.call(settings.socket_path, _wire(repo, request_id), timeout_s=120)


def _rows(settings: Settings) -> list[Any]:
    with Store(settings.database) as store:
        assert store.integrity_check() == "ok"
        return store.checkpoints(RUN)


def _assert_acknowledged(settings: Settings, acks: list[dict[str, Any]]) -> list[Any]:
    rows = _rows(settings)
    by_request = {r.tool_use_id: r for r in rows}
    for ack in acks:
        if ack["deduped"]:
            continue
        row = by_request[ack["request_id"]]
        assert (row.seq, row.commit_id) == (ack["seq"], ack["commit_id"])
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    return rows


def _wait_gone(pids: list[int]) -> None:
    wait_for(lambda: not any(pid_alive(p) for p in pids), timeout=60)


def test_kill_the_service_during_a_capture(
    repo: Path, tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated = GatedJj(tmp_path / "gated")
    monkeypatch.setenv("DURABILITY_JJ", str(gated.path))
    service = start_service(tmp_path)
    acks = []
    try:
        for n in range(3):
            (repo / "n.txt").write_text(f"{n}\n")
            acks.append(_send(settings, repo, f"ack-{n}"))
        assert [a["seq"] for a in acks] == [1, 2, 3]
        gated.close()
        (repo / "n.txt").write_text("doomed\n")
        with ThreadPoolExecutor(1) as pool:
            doomed = pool.submit(_send, settings, repo, "doomed")
            held = gated.wait_held()
            service.proc.send_signal(signal.SIGKILL)
            service.proc.wait(30)
            with pytest.raises(ConnectionLost):
                doomed.result(60)
    finally:
        gated.open()
        service.kill()
    _wait_gone(held)  # the jj it had started finishes on its own and exits
    rows = _assert_acknowledged(settings, acks)
    assert [r.tool_use_id for r in rows] == ["ack-0", "ack-1", "ack-2"]
    assert settings.socket_path.exists()  # left behind by the killed service

    again = start_service(tmp_path)  # replaces the stale socket
    try:
        (repo / "n.txt").write_text("after\n")
        after = _send(settings, repo, "after")
    finally:
        again.stop()
    assert after["ok"] and after["seq"] == 4
    assert cli("gaps", RUN, "--json").stdout.strip() == "[]"


@pytest.mark.slow
def test_kill_the_service_at_random_moments(
    repo: Path, tmp_path: Path, settings: Settings
) -> None:
    rng = random.Random(1234)
    acks: list[dict[str, Any]] = []
    for round_ in range(3):
        service = start_service(tmp_path)
        stop = threading.Event()

        def agent(
            worker: int, round_: int = round_, stop: threading.Event = stop
        ) -> list[dict[str, Any]]:
            mine = []
            while not stop.is_set():
                name = f"r{round_}-w{worker}-{uuid.uuid4().hex[:8]}"
                (repo / f"{name}.txt").write_text(name)
                try:
                    answer = _send(settings, repo, name)
                except ServiceUnreachable:
                    return mine
                assert answer["ok"], answer
                mine.append(answer)
            return mine

        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(agent, w) for w in range(3)]
            threading.Event().wait(rng.uniform(0.3, 1.5))
            service.proc.send_signal(signal.SIGKILL)
            service.proc.wait(30)
            stop.set()
            acks += [a for f in futures for a in f.result(60)]
    assert len(acks) >= 3
    _assert_acknowledged(settings, acks)


def _hook(repo: Path, tool_use_id: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    payload = hook_payload(repo, session_id=RUN, tool_use_id=tool_use_id)
    proc = subprocess.Popen([durability_exe(), "snapshot-hook"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(payload).encode())
    proc.stdin.close()
    return proc


def _finish(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert (proc.wait(120), out, err) == (0, b"", b""), err.decode()


def test_kill_a_hook_during_its_in_process_capture(
    repo: Path, tmp_path: Path, settings: Settings
) -> None:
    env = {**os.environ, "DURABILITY_HOOK_TIMEOUT_MS": "60000"}
    for n in range(2):
        (repo / "h.txt").write_text(f"{n}\n")
        _finish(_hook(repo, f"toolu_{n}", env))
    gated = GatedJj(tmp_path / "gated", when="after")  # jj has snapshotted, not yet recorded
    gated.close()
    (repo / "h.txt").write_text("killed\n")
    victim = _hook(repo, "toolu_killed", {**env, "DURABILITY_JJ": str(gated.path)})
    try:
        held = gated.wait_held()
        victim.kill()
        victim.wait(30)
    finally:
        gated.open()
        for pipe in (victim.stdout, victim.stderr):
            if pipe is not None:
                pipe.close()
    _wait_gone(held)
    (repo / "h.txt").write_text("next\n")
    _finish(_hook(repo, "toolu_next", env))  # the dead hook's lock was released
    rows = _rows(settings)
    assert [(r.seq, r.tool_use_id) for r in rows] == [
        (1, "toolu_0"), (2, "toolu_1"), (3, "toolu_next")]


def test_a_hook_whose_service_dies_mid_capture_captures_in_process(
    repo: Path, tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_env = {**os.environ, "DURABILITY_HOOK_TIMEOUT_MS": "60000"}
    gated = GatedJj(tmp_path / "gated")
    monkeypatch.setenv("DURABILITY_JJ", str(gated.path))
    service = start_service(tmp_path)  # only the service runs the gated jj
    try:
        gated.close()
        (repo / "tool-output.txt").write_text("written by the tool call\n")
        hook = _hook(repo, "toolu_orphaned", real_env)
        held = gated.wait_held()
        service.proc.send_signal(signal.SIGKILL)
        service.proc.wait(30)
        _finish(hook)  # silent and 0: it fell back to an in-process capture
    finally:
        gated.open()
        service.kill()
    _wait_gone(held)
    (row,) = _rows(settings)
    assert (row.seq, row.tool_use_id) == (1, "toolu_orphaned")
    assert "tool-output.txt" in commit_manifest(repo, row.commit_id)
    assert cli("gaps", RUN, "--json").stdout.strip() == "[]"
