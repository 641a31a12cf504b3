"""The hook starts the service when none answers: once, however many hooks
find it missing at the same moment, and never when told not to."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.helpers import cli, git, hook_payload, make_git_repo, pid_alive, ping, wait_for


def _hook(repo: Path, call: str, env: dict[str, str]) -> None:
    (repo / f"{call}.txt").write_text(call)
    payload = hook_payload(repo, session_id="sess-auto", tool_use_id=call,
                           file_path=str(repo / f"{call}.txt"))
    done = cli("snapshot-hook", input=json.dumps(payload), env=env)
    assert done.returncode == 0 and done.stdout == "", done.stderr


def test_sixteen_first_calls_start_one_service_then_use_it(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    env = {**os.environ, "DURABILITY_AUTOSTART": "1"}
    sock = Path(env["DURABILITY_SOCKET"])
    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: _hook(repo, f"t{i}", env), range(16)))
        first = wait_for(lambda: ping(sock, timeout=1), timeout=30)
        pid = first["pid"]
        # Every one of the 16 calls was captured (in process, while it
        # started): no gap, and the newest checkpoint holds every file.
        rows = json.loads(cli("snapshots", "sess-auto", "--json").stdout)
        files = git(repo, "ls-tree", "--name-only", rows[-1]["commit_id"]).stdout.split()
        assert {f"t{i}.txt" for i in range(16)} <= set(files)
        assert json.loads(cli("gaps", "sess-auto", "--json").stdout) == []
        before = first["captures"]
        _hook(repo, "after", env)
        after = ping(sock, timeout=5)
        assert after is not None and after["pid"] == pid  # the same, single service
        assert after["captures"] == before + 1  # the next call went through it
        services = [p for p in os.listdir("/proc") if p.isdigit() and _is_service(p, sock)]
        assert services == [str(pid)]
    finally:
        cli("stop", "--kill", "--timeout", "10")
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
    assert len(json.loads(cli("snapshots", "sess-auto", "--json").stdout)) == 1
