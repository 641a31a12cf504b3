"""The service manages itself: ``serve --detach`` is idempotent (also when
started concurrently), ``stop`` and ``status`` say what they did, and
``service install`` writes a unit the service manager accepts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import cli, durability_exe, pid_alive, ping


def _stop_all() -> None:
    cli("stop", "--kill", "--timeout", "10")


def test_serve_detach_twice_starts_one_service_and_says_so() -> None:
    sock = Path(os.environ["DURABILITY_SOCKET"])
    try:
        first = cli("serve", "--detach")
        assert first.returncode == 0, first.stderr
        assert first.stdout.startswith("started (pid ")
        second = cli("serve", "--detach", "--json")
        assert second.returncode == 0, second.stderr
        answer = json.loads(second.stdout)
        assert list(answer) == ["pid", "socket", "already_running"]  # the wire format
        assert answer["already_running"] is True and answer["socket"] == str(sock)
        assert f"(pid {answer['pid']})" in first.stdout
        again = cli("serve", "--detach")
        assert again.stdout == f"already running (pid {answer['pid']}) on {sock}\n"
    finally:
        _stop_all()


@pytest.mark.slow
def test_concurrent_detached_starts_leave_one_service() -> None:
    try:
        with ThreadPoolExecutor(6) as pool:
            runs = list(pool.map(lambda _: cli("serve", "--detach", "--json"), range(6)))
        assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
        answers = [json.loads(r.stdout) for r in runs]
        assert len({a["pid"] for a in answers}) == 1
        assert sum(not a["already_running"] for a in answers) <= 1
    finally:
        _stop_all()


@pytest.mark.slow
def test_status_and_stop_report_what_they_found_and_did() -> None:
    down = cli("status")
    assert down.returncode == 3 and down.stdout.startswith("not running on ")
    assert cli("stop").stdout.startswith("not running on ")
    started = json.loads(cli("serve", "--detach", "--json").stdout)
    try:
        up = cli("status", "--json")
        assert up.returncode == 0
        status = json.loads(up.stdout)
        assert status["running"] is True and status["pid"] == started["pid"]
    finally:
        done = cli("stop", "--json")
    assert done.returncode == 0, done.stderr
    stopped = json.loads(done.stdout)
    assert stopped["was_running"] is True and stopped["pid"] == started["pid"]
    assert stopped["killed"] is False
    assert not pid_alive(started["pid"])
    assert ping(Path(os.environ["DURABILITY_SOCKET"]), timeout=1) is None
    assert not Path(os.environ["DURABILITY_SOCKET"]).exists()  # a clean stop releases it


@pytest.mark.slow
def test_a_wedged_service_is_seen_reported_and_killed_on_request() -> None:
    started = json.loads(cli("serve", "--detach", "--json").stdout)
    pid = started["pid"]
    os.kill(pid, signal.SIGSTOP)  # it cannot answer, and SIGTERM stays pending
    try:
        seen = cli("status", "--json")
        assert seen.returncode == 4
        assert json.loads(seen.stdout) == {"running": True, "socket": started["socket"],
                                           "pid": pid, "answering": False}
        wedged = cli("stop", "--timeout", "0.5")
        assert wedged.returncode == 4
        assert wedged.stderr.startswith("durability: service-error: ")
        assert f"(pid {pid})" in wedged.stderr and "--kill" in wedged.stderr
        assert pid_alive(pid)
        killed = cli("stop", "--kill", "--timeout", "0.5", "--json")
        assert killed.returncode == 0, killed.stderr
        assert json.loads(killed.stdout)["killed"] is True
        assert not pid_alive(pid)
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _unit_text(tmp_path: Path) -> tuple[Path, str]:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    done = cli("service", "install", "--no-start", "--json", env=env)
    assert done.returncode == 0, done.stderr
    path = Path(json.loads(done.stdout)["unit"])
    assert path == tmp_path / "cfg" / "systemd" / "user" / "durability.service"
    return path, path.read_text()


def test_service_install_writes_a_unit_that_runs_this_durability(tmp_path: Path) -> None:
    path, text = _unit_text(tmp_path)
    lines = text.splitlines()
    assert f'ExecStart="{durability_exe()}" serve' in lines
    assert os.path.isabs(durability_exe())
    for name in ("DURABILITY_HOME", "DURABILITY_SOCKET", "DURABILITY_SPOOL_DIR"):
        assert f'Environment="{name}={os.environ[name]}"' in lines
    assert "WantedBy=default.target" in lines and "Restart=on-failure" in lines
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    gone = cli("service", "uninstall", "--json", env=env)
    assert json.loads(gone.stdout) == {"unit": str(path), "removed": True}
    assert not path.exists()


def test_service_install_leaves_a_foreign_unit_alone(tmp_path: Path) -> None:
    unit = tmp_path / "cfg" / "systemd" / "user" / "durability.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/usr/bin/true\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    done = cli("service", "install", "--no-start", env=env)
    assert done.returncode == 2 and "not written by durability" in done.stderr
    assert unit.read_text() == "[Service]\nExecStart=/usr/bin/true\n"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not on this machine")
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    path, _ = _unit_text(tmp_path)
    done = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
