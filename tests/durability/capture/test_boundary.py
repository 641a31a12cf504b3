"""Every hook call is a boundary (durability/capture/boundary.py, issue 24):
a call that changed nothing dedups onto the latest checkpoint and still gets
its own boundary row; a request reported twice is one boundary."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from durability.capture.capturer import CaptureRequest
from durability.config import Settings
from durability.store import AttemptKey, Store
from durability.store.boundaries import CallInfo, boundaries, find_boundary
from tests.helpers import ServiceProcess, hook_payload, make_git_repo, run_cli


def _hook(repo: Path, payload: dict[str, object]) -> None:
    done = run_cli("snapshot-hook", input=json.dumps(payload))
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


def _check(repo: Path, transcript: Path) -> None:
    transcript.write_text('{"a": 1}\n')
    (repo / "a.txt").write_text("one\n")
    _hook(repo, hook_payload(repo, session_id="s-b", tool_use_id="toolu_w",
                             file_path=str(repo / "a.txt"), transcript_path=str(transcript)))
    transcript.write_text('{"a": 1}\n{"b": 2}\n')
    # A Read: the tree did not change, the checkpoint row is deduped.
    read = hook_payload(repo, session_id="s-b", tool_use_id="toolu_r", tool_name="Read",
                        file_path=str(repo / "a.txt"), transcript_path=str(transcript))
    _hook(repo, read)
    _hook(repo, read)  # the same call reported twice (a hook installed twice)
    (repo / "b.txt").write_text("two\n")
    _hook(repo, hook_payload(repo, session_id="s-b", tool_use_id="toolu_b", tool_name="Bash",
                             transcript_path=str(transcript)))
    with Store(Settings.from_env().database) as store:
        rows = boundaries(store, "s-b")
        checkpoints = store.checkpoints("s-b")
        by_call = find_boundary(store, "s-b", call="toolu_r")
    assert [(b.seq, b.tool_use_id, b.tool_name, b.event) for b in rows] == [
        (1, "toolu_w", "Write", "PostToolUse"), (2, "toolu_r", "Read", "PostToolUse"),
        (3, "toolu_b", "Bash", "PostToolUse")]
    # Two checkpoint rows for three calls: the Read's boundary names the Write's row.
    assert [c.tool_use_id for c in checkpoints] == ["toolu_w", "toolu_b"]
    assert [(b.checkpoint_seq, b.commit_id) for b in rows] == [
        (1, checkpoints[0].commit_id), (1, checkpoints[0].commit_id),
        (2, checkpoints[1].commit_id)]
    assert [b.transcript_bytes for b in rows] == [9, 18, 18]
    assert {b.transcript_path for b in rows} == {str(transcript)}
    assert by_call == rows[1]
    assert {b.worktree for b in rows} == {os.path.realpath(repo)}


def test_in_process(tmp_path: Path) -> None:
    _check(make_git_repo(tmp_path / "repo"), tmp_path / "t.jsonl")


def test_through_the_service(tmp_path: Path, service_process: ServiceProcess) -> None:
    assert os.environ["DURABILITY_SOCKET"] == str(service_process.socket_path)
    _check(make_git_repo(tmp_path / "repo"), tmp_path / "t.jsonl")


def test_a_call_without_a_tool_is_no_boundary(tmp_path: Path) -> None:
    """Codex's Stop ends a turn and names no tool call: a checkpoint, no boundary."""
    repo = make_git_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("one\n")
    payload = {"session_id": "s-stop", "turn_id": "t1", "cwd": str(repo),
               "hook_event_name": "Stop", "transcript_path": None}
    _hook(repo, payload)
    with Store(Settings.from_env().database) as store:
        assert len(store.checkpoints("s-stop")) == 1
        assert boundaries(store, "s-stop") == []


def test_an_unknown_boundary_names_the_range(tmp_path: Path) -> None:
    from durability.ground.store_errors import NotFound

    repo = make_git_repo(tmp_path / "repo")
    _hook(repo, hook_payload(repo, session_id="s-r", tool_use_id="toolu_1", tool_name="Read"))
    with Store(Settings.from_env().database) as store, \
            pytest.raises(NotFound, match=r"no boundary seq 5 \(seq 1 to 1\)"):
        find_boundary(store, "s-r", seq=5)


def _call_request(repo: Path, request_id: str) -> CaptureRequest:

    return CaptureRequest(key=AttemptKey("s-one", "session", 0, 1), worktree=repo,
                          source="hook", request_id=request_id, tool_use_id=f"t-{request_id}",
                          harness="claude-code",
                          call=CallInfo(tool_name="Bash", event="PostToolUse",
                                        transcript_path="/t.jsonl", transcript_bytes=7))


def test_a_capture_records_its_call_with_its_checkpoint(tmp_path: Path) -> None:
    # Decision 0070: the boundary is part of the checkpoint's own write, so
    # nothing is left for the separate boundary write (one commit, not two).
    from durability.capture.capturer import Capturer

    repo = make_git_repo(tmp_path / "repo")
    settings = Settings.from_env()
    with Store(settings.database) as store:
        capturer = Capturer(settings=settings, store=lambda: store)
        (repo / "a.txt").write_text("one\n")
        (new,) = capturer.capture([_call_request(repo, "q1")], lock_timeout_s=30)
        (same,) = capturer.capture([_call_request(repo, "q2")], lock_timeout_s=30)  # a dedup
        assert (new.ok, new.boundary, same.deduped, same.boundary) == (True, True, True, True)
        rows = boundaries(store, "s-one")
        [checkpoint] = store.checkpoints("s-one")
    assert [(b.seq, b.request_id, b.checkpoint_seq, b.commit_id, b.tool_name,
             b.transcript_bytes) for b in rows] == [
        (1, "q1", 1, checkpoint.commit_id, "Bash", 7),
        (2, "q2", 1, checkpoint.commit_id, "Bash", 7)]


@pytest.mark.sqlite_file  # a trigger of SQLite's own refuses the insert
def test_a_boundary_the_database_refuses_leaves_its_checkpoint_recorded(
        tmp_path: Path) -> None:
    from durability.capture.boundary import record_boundaries
    from durability.capture.capturer import Capturer

    repo = make_git_repo(tmp_path / "repo")
    settings = Settings.from_env()
    with Store(settings.database) as store:
        with store._conn() as conn:  # the store's own connection: a refusing table
            conn.execute("CREATE TEMP TRIGGER refuse BEFORE INSERT ON boundaries "
                         "BEGIN SELECT RAISE(ABORT, 'refused'); END")
        capturer = Capturer(settings=settings, store=lambda: store)
        (repo / "a.txt").write_text("one\n")
        request = _call_request(repo, "q1")
        (outcome,) = capturer.capture([request], lock_timeout_s=30)
        assert (outcome.ok, outcome.seq, outcome.boundary) == (True, 1, False)
        assert [c.request_id for c in store.checkpoints("s-one")] == ["q1"]
        assert boundaries(store, "s-one") == []
        with store._conn() as conn:
            conn.execute("DROP TRIGGER refuse")
        # The separate write that follows every answer records what is left.
        assert record_boundaries(lambda: store, [request], [outcome]) == 1
        assert [b.request_id for b in boundaries(store, "s-one")] == ["q1"]


def test_a_call_whose_event_is_not_text_keeps_its_checkpoint(tmp_path: Path) -> None:
    # Any hook_event_name the hook does not know is a post-call event, and a
    # JSON string may hold a lone surrogate: the boundary is written as the
    # row's other text is, so the checkpoint's write that carries it
    # (decision 0070) is committed, not lost to the driver's refusal.
    repo = make_git_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("one\n")
    payload = hook_payload(repo, session_id="s-odd", tool_use_id="toolu_o", event="Post\udc80")
    done = run_cli("snapshot-hook", input=json.dumps(payload))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    with Store(Settings.from_env().database) as store:
        [checkpoint] = store.checkpoints("s-odd")
        [boundary] = boundaries(store, "s-odd")
    assert (boundary.tool_use_id, boundary.checkpoint_seq, boundary.commit_id) == (
        "toolu_o", checkpoint.seq, checkpoint.commit_id)
