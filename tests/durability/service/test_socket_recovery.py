"""A service finds and fixes its own socket, and leaves when nothing is
left for it: a removed socket (or its whole folder) is bound again, so hooks
are back on the fast path at once; ``status``, ``stop`` and ``doctor`` find
a service whose socket is gone by its lock's pid record and agree; a service
whose state folder is gone leaves; an autostarted one leaves once idle; and
autostart is locked per socket, not per state folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.doctor.checks import run_checks
from durability.service.server import Service
from tests.durability.hook.test_autostart import _is_service
from tests.helpers import (
    cli,
    cli_json,
    hook_payload,
    make_git_repo,
    pid_alive,
    ping,
    start_service,
    wait_for,
)


def _hook(repo: Path, call: str, env: dict[str, str]) -> None:
    (repo / f"{call}.txt").write_text(call)
    payload = hook_payload(repo, session_id="sess-sock", tool_use_id=call,
                           file_path=str(repo / f"{call}.txt"))
    done = cli("snapshot-hook", input=json.dumps(payload), env=env)
    assert done.returncode == 0 and done.stdout == "", done.stderr


def _services(sock: Path) -> list[str]:
    return [p for p in os.listdir("/proc") if p.isdigit() and _is_service(p, sock)]


@pytest.mark.parametrize("removed", ["socket", "folder"])
def test_a_removed_socket_is_bound_again_within_two_calls(tmp_path: Path, removed: str) -> None:
    repo = make_git_repo(tmp_path / "repo")
    env = {**os.environ, "DURABILITY_AUTOSTART": "1", "DURABILITY_HOOK_TIMEOUT_MS": "30000"}
    sock = Path(env["DURABILITY_SOCKET"])
    try:
        _hook(repo, "start", env)  # finds none, starts one (autostart)
        pid = wait_for(lambda: ping(sock, timeout=1), timeout=30)["pid"]
        last = ping(sock)["captures"]  # type: ignore[index]
        via_service = []
        for i in range(20):
            if i == 5:
                if removed == "socket":
                    sock.unlink()
                else:  # a cleared runtime folder: the socket's lock goes too
                    shutil.rmtree(sock.parent)
            if i == 7:
                # The service polls its socket every 0.25 s: two calls are that
                # long on an idle machine, not on a loaded one, so the test
                # waits for the rebind (bounded) rather than racing the poll.
                wait_for(lambda: ping(sock, timeout=1), timeout=30)
            _hook(repo, f"c{i}", env)
            answer = ping(sock, timeout=2)
            via_service.append(answer is not None and answer["captures"] > last)
            if answer is not None:
                last = answer["captures"]
                assert answer["pid"] == pid
        assert all(via_service[:5]), via_service
        assert all(via_service[7:]), via_service  # back on the fast path once bound again
        assert _services(sock) == [str(pid)]  # one service, the same
        rows = cli_json("snapshots", "sess-sock")
        assert len(rows) == 21
        assert cli_json("gaps", "sess-sock") == []
    finally:
        cli("stop", "--kill", "--timeout", "10", env=env)


@pytest.mark.slow
def test_status_stop_and_doctor_find_a_service_whose_socket_is_gone(tmp_path: Path) -> None:
    svc = start_service(tmp_path)
    sock = svc.socket_path
    try:
        # Its socket removed and its name taken by a file it must not delete:
        # it cannot bind again, and keeps serving its watches meanwhile.
        sock.unlink()
        sock.write_text("not a socket")
        wait_for(lambda: "cannot be bound again" in svc.log(), timeout=30)
        assert ping(sock, timeout=1) is None

        status = cli("status", "--json")
        assert status.returncode == 4, status
        shown = json.loads(status.stdout)
        assert shown["running"] and shown["pid"] == svc.proc.pid and shown["socket_missing"]
        plain = cli("status")
        assert f"running (pid {svc.proc.pid}) but not on {sock}" in plain.stdout

        check = next(c for c in run_checks(Settings.from_env(), os.environ, tmp_path)
                     if c.name == "service")
        assert check.status == "warn" and f"pid {svc.proc.pid}" in check.detail, check

        started = cli_json("serve", "--detach", timeout=30)
        assert started == {"pid": svc.proc.pid, "socket": str(sock), "already_running": True}

        stopped = cli_json("stop", "--timeout", "30")
        assert stopped["was_running"] and stopped["pid"] == svc.proc.pid
        assert svc.proc.wait(30) == 0
        assert sock.read_text() == "not a socket"  # never removed: not its own
        assert cli("status").returncode == 3  # and now all say: none
    finally:
        svc.stop()


def test_a_service_whose_state_folder_is_removed_leaves(tmp_path: Path) -> None:
    svc = start_service(tmp_path)
    try:
        # Started all through (it answers pings before its watches resume,
        # and their store would make the folder again).
        wait_for(lambda: "INFO serving on" in svc.log(), timeout=30)
        shutil.rmtree(os.environ["DURABILITY_HOME"])
        try:
            assert svc.proc.wait(30) == 0
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running; its log ends: {svc.log()[-2000:]}")
        assert "state folder" in svc.log() and "is gone" in svc.log()
        assert not svc.socket_path.exists()
    finally:
        svc.stop()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _serving(settings: Settings, **kw: Any) -> tuple[Service, threading.Thread]:
    service = Service(settings, **kw)
    service.start()
    thread = threading.Thread(target=service.serve_forever, name="serve-test")
    thread.start()
    return service, thread


def test_an_autostarted_service_leaves_after_its_idle_time_and_not_while_it_watches(
        tmp_path: Path) -> None:
    settings = Settings.from_env({**os.environ, "DURABILITY_SERVICE_IDLE_MS": "60000"})
    clock = _Clock()
    repo = make_git_repo(tmp_path / "repo")
    service, thread = _serving(settings, autostarted=True, clock=clock)
    try:
        clock.now += 59
        service.housekeep()
        assert thread.is_alive() and not service.left_because
        watch = {"v": 1, "op": "watch", "run_id": "r", "node_id": "n", "worktree": str(repo)}
        assert service.handle(json.dumps(watch).encode())["ok"]
        clock.now += 3600  # a watch keeps it, however long nothing is asked
        service.housekeep()
        assert not service.left_because
        assert service.handle(json.dumps({"v": 1, "op": "unwatch",
                                          "worktree": str(repo)}).encode())["ok"]
        clock.now += 59.9  # idle counts from the last request (the unwatch)
        service.housekeep()
        assert not service.left_because
        clock.now += 0.2
        service.housekeep()
        assert "idle for 60s" in service.left_because
        thread.join(30)
        assert not thread.is_alive()
    finally:
        service.stop()
        thread.join(30)


def test_a_service_started_by_hand_never_leaves_for_idleness(tmp_path: Path) -> None:
    settings = Settings.from_env({**os.environ, "DURABILITY_SERVICE_IDLE_MS": "1000"})
    clock = _Clock()
    service, thread = _serving(settings, clock=clock)
    try:
        clock.now += 86_400
        service.housekeep()
        assert not service.left_because and thread.is_alive()
    finally:
        service.stop()
        thread.join(30)


@pytest.mark.slow
def test_an_idle_autostarted_service_leaves_and_the_next_hook_starts_one(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    env = {**os.environ, "DURABILITY_AUTOSTART": "1", "DURABILITY_SERVICE_IDLE_MS": "1500"}
    sock = Path(env["DURABILITY_SOCKET"])
    try:
        _hook(repo, "a", env)
        first = wait_for(lambda: ping(sock, timeout=1), timeout=30)["pid"]
        wait_for(lambda: not pid_alive(first), timeout=60)
        assert not sock.exists()
        _hook(repo, "b", env)
        second = wait_for(lambda: ping(sock, timeout=1), timeout=30)["pid"]
        assert second != first
    finally:
        cli("stop", "--kill", "--timeout", "10", env=env)


def test_two_sockets_of_one_state_folder_each_get_their_service(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    base = Path(os.environ["DURABILITY_SOCKET"]).parent
    envs = [{**os.environ, "DURABILITY_AUTOSTART": "1",
             "DURABILITY_SOCKET": str(base / f"s{i}" / "service.sock")} for i in (1, 2)]
    try:
        pids = []
        for i, env in enumerate(envs):
            _hook(repo, f"t{i}", env)
            sock = Path(env["DURABILITY_SOCKET"])
            pids.append(wait_for(lambda s=sock: ping(s, timeout=1), timeout=30)["pid"])
        assert pids[0] != pids[1]
        assert all(pid_alive(p) for p in pids)
    finally:
        for env in envs:
            cli("stop", "--kill", "--timeout", "10", env=env)


def _stale_socket(path: Path) -> None:
    """A socket file nothing listens on, as a dead service leaves it."""
    import socket

    path.unlink()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()


def test_a_socket_replaced_by_a_stale_one_is_bound_again(settings: Settings) -> None:
    service, thread = _serving(settings)
    try:
        _stale_socket(settings.socket_path)
        assert ping(settings.socket_path, timeout=1) is None
        answer = wait_for(lambda: ping(settings.socket_path, timeout=1), timeout=30)
        assert answer["pid"] == os.getpid() and thread.is_alive()
    finally:
        service.stop()
        thread.join(30)
    assert not settings.socket_path.exists()  # its own, removed at stop


def test_a_service_whose_socket_another_one_took_leaves(settings: Settings) -> None:
    import socket

    service, thread = _serving(settings)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        settings.socket_path.unlink()
        other.bind(str(settings.socket_path))
        other.listen(8)
        thread.join(30)
        assert not thread.is_alive()
        assert "another service took over" in service.left_because
        assert settings.socket_path.exists()  # the other's: left alone
    finally:
        other.close()
        service.stop()
        thread.join(30)


def _folder_taken_by_a_file(folder: Path) -> None:
    """The socket's folder removed and its name taken by a file: it cannot
    be made again (as a runtime folder removed at logout, or root's)."""
    shutil.rmtree(folder)
    folder.write_text("where the socket's folder was")


def test_status_stop_and_doctor_find_a_service_whose_socket_folder_cannot_be_made(
        tmp_path: Path) -> None:
    svc = start_service(tmp_path)
    sock = svc.socket_path
    try:
        wait_for(lambda: "INFO serving on" in svc.log(), timeout=30)
        _folder_taken_by_a_file(sock.parent)  # its lock file and pid record go with it
        wait_for(lambda: "cannot be bound again" in svc.log(), timeout=30)

        status = cli("status", "--json")
        assert status.returncode == 4, status
        shown = json.loads(status.stdout)
        assert shown["running"] and shown["pid"] == svc.proc.pid and shown["socket_missing"]
        check = next(c for c in run_checks(Settings.from_env(), os.environ, tmp_path)
                     if c.name == "service")
        assert check.status == "warn" and f"pid {svc.proc.pid}" in check.detail, check

        stopped = cli_json("stop", "--timeout", "30")
        assert stopped["was_running"] and stopped["pid"] == svc.proc.pid
        assert svc.proc.wait(30) == 0
        assert cli("status").returncode == 3  # its record went with it
        assert not list(Path(os.environ["DURABILITY_HOME"]).glob("service-*.pid"))
    finally:
        svc.stop()
        if sock.parent.is_file():
            sock.parent.unlink()


def test_a_service_that_cannot_bind_its_socket_again_leaves_after_a_bound(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from durability.service import server

    monkeypatch.setattr(server, "REBIND_LIMIT", 4, raising=False)  # 240 polls (1 min) by default
    service, thread = _serving(settings)
    folder = settings.socket_path.parent
    try:
        _folder_taken_by_a_file(folder)
        thread.join(30)
        assert not thread.is_alive(), "still serving a socket it cannot bind"
        assert "could not be bound again in 1s" in service.left_because
    finally:
        service.stop()
        thread.join(30)
        if folder.is_file():
            folder.unlink()


def test_an_autostarted_service_does_not_leave_while_replication_is_under_way(
        tmp_path: Path) -> None:
    from tests.durability.remote.remotekit import add_remote, bare_remote, capture, quick_states
    from tests.helpers import write_script

    settings = Settings.from_env({**os.environ, "DURABILITY_SERVICE_IDLE_MS": "60000"})
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    go = tmp_path / "go"
    # The remote takes its time: the push waits until the test lets it go.
    write_script(remote / "hooks" / "pre-receive",
                 f"#!/bin/sh\ntouch {tmp_path}/pushing\n"
                 f"while [ ! -e {go} ]; do sleep 0.05; done\ncat >/dev/null\n")
    add_remote(repo, "backup", str(remote))
    clock = _Clock()
    service, thread = _serving(settings, autostarted=True, clock=clock)
    try:
        capture(repo, "one")
        wait_for(lambda: (tmp_path / "pushing").exists(), timeout=60)
        clock.now += 3600  # long past the idle time, with a push under way
        service.housekeep()
        assert not service.left_because and thread.is_alive()
        go.touch()
        wait_for(lambda: [s.get("backup") for s in quick_states()] == ["pushed"], timeout=60)
        wait_for(lambda: not service.replicator.busy(), timeout=30)  # type: ignore[union-attr]
        clock.now += 60.1  # idle counts from the end of the pass
        service.housekeep()
        assert "idle for 60s" in service.left_because
    finally:
        go.touch()
        service.stop()
        thread.join(30)
