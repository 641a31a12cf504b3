"""The hook starts the service when none answers: once, however many hooks
find it missing at the same moment, and never when told not to."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import (
    cli,
    hook_payload,
    make_git_repo,
    pid_alive,
    ping,
    run_cli,
    store_git,
    wait_for,
    write_script,
)


def _hook(repo: Path, call: str, env: dict[str, str], cwd: Path | None = None) -> None:
    (repo / f"{call}.txt").write_text(call)
    payload = hook_payload(repo, session_id="sess-auto", tool_use_id=call,
                           file_path=str(repo / f"{call}.txt"))
    # The installed command: the service it starts is a process of its own.
    done = cli("snapshot-hook", input=json.dumps(payload), env=env, cwd=cwd)
    assert done.returncode == 0 and done.stdout == "", done.stderr


@pytest.mark.timing
def test_sixteen_first_calls_start_one_service_then_use_it(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    # A long budget: sixteen interpreters starting at once, then capturing one
    # after another under one worktree lock, took 7.5 s of the default 10 s on
    # the loaded 2-core machine, and past it (timeout gaps) at lower priority.
    env = {**os.environ, "DURABILITY_AUTOSTART": "1", "DURABILITY_HOOK_TIMEOUT_MS": "60000"}
    sock = Path(env["DURABILITY_SOCKET"])
    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: _hook(repo, f"t{i}", env), range(16)))
        first = wait_for(lambda: ping(sock, timeout=1), timeout=30)
        pid = first["pid"]
        # Every one of the 16 calls was captured (in process, while it
        # started): no gap, and the newest checkpoint holds every file.
        rows = json.loads(run_cli("snapshots", "sess-auto", "--json").stdout)
        files = store_git(repo, "ls-tree", "--name-only", rows[-1]["commit_id"]).stdout.split()
        assert {f"t{i}.txt" for i in range(16)} <= set(files)
        assert json.loads(run_cli("gaps", "sess-auto", "--json").stdout) == []
        before = first["captures"]
        _hook(repo, "after", env)
        after = ping(sock, timeout=5)
        assert after is not None and after["pid"] == pid  # the same, single service
        assert after["captures"] == before + 1  # the next call went through it
        services = [p for p in os.listdir("/proc") if p.isdigit() and _is_service(p, sock)]
        assert services == [str(pid)]
    finally:
        run_cli("stop", "--kill", "--timeout", "10")
    assert not pid_alive(pid)


def _is_service(pid: str, sock: Path) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"serve" in cmd and f"DURABILITY_SOCKET={sock}".encode() in environ


def test_autostart_off_starts_nothing(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    env = {**os.environ, "DURABILITY_AUTOSTART": "0"}
    _hook(repo, "t1", env)
    assert ping(Path(env["DURABILITY_SOCKET"]), timeout=1) is None
    assert len(json.loads(run_cli("snapshots", "sess-auto", "--json").stdout)) == 1


def test_a_service_that_cannot_start_is_not_respawned_on_every_call(tmp_path: Path) -> None:
    # The socket's folder is a file: every start fails at once.  One start is
    # tried; the calls after it (within the backoff) spawn nothing more.
    repo = make_git_repo(tmp_path / "repo")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    env = {**os.environ, "DURABILITY_AUTOSTART": "1",
           "DURABILITY_SOCKET": str(blocker / "service.sock")}
    for i in range(3):
        _hook(repo, f"b{i}", env)
    log = Path(env["DURABILITY_HOME"]) / "service.log"
    starts = wait_for(lambda: (log.exists() and log.read_text().count("durability:")) or 0,
                      timeout=20)
    assert starts == 1, log.read_text()
    rows = json.loads(run_cli("snapshots", "sess-auto", "--json", env=env).stdout)
    assert len(rows) == 3  # every call was still captured, in process


def test_the_spawned_service_does_not_import_from_the_worktree(tmp_path: Path) -> None:
    # With `python -m`, the current folder would come first on sys.path: a
    # worktree's own durability/ package must never be what the service runs.
    repo = make_git_repo(tmp_path / "repo")
    (repo / "durability").mkdir()
    (repo / "durability" / "__init__.py").write_text("")
    marker = tmp_path / "SHADOWED"
    (repo / "durability" / "__main__.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\n")
    env = {**os.environ, "DURABILITY_AUTOSTART": "1"}
    try:
        _hook(repo, "t1", env, cwd=repo)  # harnesses run hooks in the worktree
        wait_for(lambda: ping(Path(env["DURABILITY_SOCKET"]), timeout=1), timeout=30)
        assert not marker.exists()
    finally:
        run_cli("stop", "--kill", "--timeout", "10")


def test_a_call_that_runs_out_of_budget_still_starts_the_service(tmp_path: Path) -> None:
    """The service is started once the in-process capture is done (its
    start-up would take the CPU the capture needs), or by the watchdog when
    the budget runs out first: here a git that never answers holds the
    first capture (its prescan waits for it) past the budget."""
    repo = make_git_repo(tmp_path / "repo")
    stuck = tmp_path / "stuck-bin"
    stuck.mkdir()
    write_script(stuck / "git", "#!/bin/sh\nexec sleep 8\n")
    # A state folder and socket of its own: no other test's service (or its
    # start lock, released as it exits) is in the way.
    env = {**os.environ, "DURABILITY_AUTOSTART": "1", "DURABILITY_HOOK_TIMEOUT_MS": "1500",
           "PATH": f"{stuck}{os.pathsep}{os.environ['PATH']}",
           "DURABILITY_HOME": str(tmp_path / "home"),
           "DURABILITY_SOCKET": str(tmp_path / "run" / "service.sock")}
    try:
        _hook(repo, "t1", env)
        gaps = json.loads(run_cli("gaps", "sess-auto", "--json", env=env).stdout)
        assert [g["reason"] for g in gaps] == ["timeout"]
        log = Path(env["DURABILITY_HOME"]) / "service.log"
        deadline = time.monotonic() + 60
        while ping(Path(env["DURABILITY_SOCKET"]), timeout=1) is None:
            assert time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
            time.sleep(0.05)
    finally:
        run_cli("stop", "--kill", "--timeout", "10", env=env)


def test_the_service_a_first_call_starts_watches_and_scans_its_worktree_at_once(
        tmp_path: Path) -> None:
    """The hook names its worktree to the service it starts (``serve
    --warm``): the service watches and scans it as soon as it serves, so the
    next call is an informed capture, not a whole-tree scan of its own
    (decision 0062)."""
    repo = make_git_repo(tmp_path / "repo").resolve()
    for i in range(50):
        (repo / f"f{i}.txt").write_text(f"{i}\n")
    env = {**os.environ, "DURABILITY_AUTOSTART": "1",
           "DURABILITY_HOME": str(tmp_path / "home"),
           "DURABILITY_SOCKET": str(tmp_path / "run" / "service.sock")}
    sock = Path(env["DURABILITY_SOCKET"])
    log = Path(env["DURABILITY_HOME"]) / "service.log"
    try:
        _hook(repo, "t1", env)  # in process; starts the service
        wait_for(lambda: log.exists() and f"warmed {repo}" in log.read_text(), timeout=30)
        before = ping(sock, timeout=5)
        assert before is not None and before["informed"]["worktrees"] == 1
        assert before["informed"]["full"] == 0  # the warm scan is no request's batch
        _hook(repo, "t2", env)
        after = ping(sock, timeout=5)
        assert after is not None
        assert (after["informed"]["informed"], after["informed"]["full"]) == (1, 0), after
        rows = json.loads(run_cli("snapshots", "sess-auto", "--json", env=env).stdout)
        assert len(rows) == 2
        tree = store_git(repo, "ls-tree", "--name-only", rows[-1]["commit_id"]).stdout.split()
        assert {"t1.txt", "t2.txt", "f49.txt"} <= set(tree)
    finally:
        run_cli("stop", "--kill", "--timeout", "10", env=env)
