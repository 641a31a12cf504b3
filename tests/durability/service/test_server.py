"""The snapshot service as a process: its socket, its lifecycle and how it
answers bad requests.  Every test runs the installed ``durability serve``."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.service import protocol
from durability.store import Store
from tests.helpers import (
    ServiceProcess,
    cli,
    make_jj_repo,
    ping,
    start_service,
    wait_for,
)


@pytest.fixture
def sock() -> Path:
    return Path(os.environ["DURABILITY_SOCKET"])


def raw_call(path: Path, data: bytes, timeout: float = 30.0) -> dict[str, Any]:
    """Send raw bytes on a fresh connection and read one response line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(str(path))
        conn.sendall(data)
        return read_line(conn)


def read_line(conn: socket.socket) -> dict[str, Any]:
    buf = b""
    while b"\n" not in buf:
        chunk = conn.recv(65536)
        assert chunk, f"connection closed without an answer (got {buf!r})"
        buf += chunk
    answer: dict[str, Any] = json.loads(buf.split(b"\n", 1)[0])
    return answer


def capture_req(worktree: str, **fields: Any) -> dict[str, Any]:
    req = {"v": 1, "op": "capture", "request_id": "req-1", "run_id": "run-s",
           "node_id": "n", "iteration": 0, "attempt": 1, "worktree": worktree,
           "source": "manual", "tool_use_id": None, "label": None, "timeout_ms": 60_000}
    req.update(fields)
    return req


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def store_gaps(run_id: str) -> list[Any]:
    with Store(Settings.from_env().database) as store:
        return store.gaps(run_id)


def store_checkpoints(run_id: str) -> list[Any]:
    with Store(Settings.from_env().database) as store:
        return store.checkpoints(run_id)


# -- the socket ----------------------------------------------------------------


def test_socket_is_0600_in_a_new_0700_folder(tmp_path: Path, sock: Path) -> None:
    nested = sock.parent / "fresh" / "service.sock"
    svc = start_service(tmp_path, socket_path=nested)
    try:
        st = os.lstat(nested)
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert stat.S_IMODE(os.stat(nested.parent).st_mode) == 0o700
        assert os.stat(nested.parent).st_uid == os.getuid()
    finally:
        assert svc.stop() == 0


def test_ping_answers_with_pid_and_version(service_process: ServiceProcess) -> None:
    answer = ping(service_process.socket_path)
    assert answer is not None
    assert answer["v"] == 1 and answer["ok"] is True
    assert answer["pid"] == service_process.proc.pid
    assert isinstance(answer["version"], str) and answer["version"]


def test_second_serve_refuses_while_first_lives(service_process: ServiceProcess) -> None:
    done = cli("serve", timeout=60)
    assert done.returncode != 0
    assert "service-running" in done.stderr
    assert "Traceback" not in done.stderr
    # The first one still owns and answers the socket.
    answer = ping(service_process.socket_path)
    assert answer is not None and answer["pid"] == service_process.proc.pid


def test_stale_socket_of_killed_service_is_replaced(tmp_path: Path, sock: Path) -> None:
    first = start_service(tmp_path)
    first.kill()  # SIGKILL: no chance to clean up
    assert stat.S_ISSOCK(os.lstat(sock).st_mode), "a SIGKILLed service leaves its socket"
    assert ping(sock) is None
    second = start_service(tmp_path)
    try:
        answer = ping(sock)
        assert answer is not None and answer["pid"] == second.proc.pid != first.proc.pid
    finally:
        assert second.stop() == 0


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_non_socket_at_socket_path_is_left_alone(tmp_path: Path, sock: Path, kind: str) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    if kind == "file":
        sock.write_text("keep me\n")
    else:
        sock.symlink_to(target)
    done = cli("serve", timeout=60)
    assert done.returncode != 0
    assert "insecure-path" in done.stderr
    assert "Traceback" not in done.stderr
    assert sock.read_text() == "keep me\n"
    assert target.read_text() == "keep me\n"
    assert sock.is_symlink() == (kind == "symlink")


def test_serve_detach_reports_why_the_service_did_not_start(sock: Path) -> None:
    sock.write_text("keep me\n")
    done = cli("serve", "--detach", timeout=60)
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("durability: ") and "insecure-path" in done.stderr
    assert done.stdout == ""
    assert sock.read_text() == "keep me\n"


def test_sigterm_shuts_down_cleanly_and_removes_socket(tmp_path: Path, sock: Path) -> None:
    svc = start_service(tmp_path)
    assert sock.exists()
    assert svc.stop() == 0
    assert not sock.exists() and not sock.is_symlink()
    assert "Traceback" not in svc.log()


def test_serve_detach_then_ping_then_sigterm(sock: Path) -> None:
    done = cli("serve", "--detach", "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    pid = info["pid"]
    try:
        assert info["socket"] == str(sock) and info["already_running"] is False
        answer = ping(sock)
        assert answer is not None and answer["pid"] == pid
        # A second detach sees the live one and leaves it be (idempotent).
        again = cli("serve", "--detach", "--json", timeout=60)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout) == {**info, "already_running": True}
    finally:
        os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not sock.exists(), timeout=30)
    assert ping(sock) is None


# -- bad requests ----------------------------------------------------------------

BAD_REQUESTS = {
    "malformed-json": b'{"v": 1, "op": "ping"\n',
    "not-an-object": b"[1, 2, 3]\n",
    "wrong-version": line({"v": 2, "op": "ping"}),
    "no-version": line({"op": "ping"}),
    "unknown-op": line({"v": 1, "op": "explode"}),
    "bad-run-id": line(capture_req("/tmp", run_id="../../x")),
    "bad-node-id": line(capture_req("/tmp", node_id="a/b")),
    "relative-worktree": line(capture_req("relative/path")),
    "bad-source": line(capture_req("/tmp", source="cron")),
    "negative-attempt": line(capture_req("/tmp", attempt=0)),
    "not-utf8": b"\xff\xfe\n",
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_bad_request_is_refused_and_service_keeps_serving(
    service_process: ServiceProcess, name: str
) -> None:
    answer = raw_call(service_process.socket_path, BAD_REQUESTS[name])
    assert answer["ok"] is False
    assert answer["error"]["code"] == "bad-request"
    assert answer["error"]["message"]
    assert answer["gap_recorded"] is False
    assert ping(service_process.socket_path) is not None
    assert store_checkpoints("run-s") == []


def test_bad_request_then_good_one_on_the_same_connection(service_process: ServiceProcess) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(service_process.socket_path))
        conn.sendall(b"garbage\n" + line({"v": 1, "op": "ping"}))
        answers = conn.makefile("rb")
        assert json.loads(answers.readline())["error"]["code"] == "bad-request"
        assert json.loads(answers.readline())["ok"] is True


@pytest.mark.parametrize("newline", [False, True])
def test_oversized_request_is_refused(service_process: ServiceProcess, newline: bool) -> None:
    big = line(capture_req("/tmp", label="x" * (protocol.MAX_REQUEST_BYTES + 100)))
    answer = raw_call(service_process.socket_path, big if newline else big.rstrip(b"\n"))
    assert answer["ok"] is False
    assert answer["error"]["code"] == "request-too-large"
    assert ping(service_process.socket_path) is not None


def test_request_just_under_the_cap_is_read(service_process: ServiceProcess) -> None:
    # A label too long for the model, but a line within the cap: the service
    # reads it whole and answers bad-request, not request-too-large.
    req = capture_req("/tmp", label="")
    room = protocol.MAX_REQUEST_BYTES - len(json.dumps(req).encode()) - 10
    answer = raw_call(service_process.socket_path, line(capture_req("/tmp", label="y" * room)))
    assert answer["error"]["code"] == "bad-request"


# -- captures that cannot be taken ---------------------------------------------------


@pytest.mark.parametrize(("where", "reason"), [("plain", "not-a-jj-repo"),
                                               ("missing", "worktree-missing")])
def test_capture_of_unusable_worktree_records_one_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, reason: str
) -> None:
    # jj only: a plain folder is then "not a jj repo" (not a git tree to try).
    monkeypatch.setenv("DURABILITY_BACKEND", "jj")
    worktree = tmp_path / where
    if where == "plain":
        worktree.mkdir()
    run_id = f"run-{where}"
    service = start_service(tmp_path)
    try:
        answer = raw_call(service.socket_path, line(
            capture_req(str(worktree), run_id=run_id, request_id=f"r-{where}")))
    finally:
        assert service.stop() == 0
    assert answer["ok"] is False
    assert answer["request_id"] == f"r-{where}"
    assert answer["error"]["code"] == reason
    assert answer["gap_recorded"] is True
    [gap] = store_gaps(run_id)
    assert (gap.reason, gap.request_id, gap.node_id, gap.source) == (
        reason, f"r-{where}", "n", "manual")
    assert gap.worktree == str(worktree)
    # The spool holds the same line; ingesting it again adds nothing.
    listed = json.loads(cli("gaps", run_id, "--json").stdout)
    assert [g["request_id"] for g in listed] == [f"r-{where}"]
    assert store_checkpoints(run_id) == []


def test_capture_of_a_jj_repo_through_the_service(service_process: ServiceProcess,
                                                  tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("a\n")
    answer = raw_call(service_process.socket_path,
                      line(capture_req(str(repo / "."), request_id="ok-1")))
    assert answer["ok"] is True, answer
    assert (answer["seq"], answer["deduped"]) == (1, False)
    [row] = store_checkpoints("run-s")
    assert (row.commit_id, row.worktree) == (answer["commit_id"], str(repo))
    assert ping(service_process.socket_path)["captures"] >= 1  # type: ignore[index]
