"""`durability doctor` warns of what makes every tool call slower without
failing it (issue 25): a hook installed with no service to answer it (each
call captures in-process), and a hook with no bytecode caches to load
(PYTHONDONTWRITEBYTECODE, or caches never written: each call compiles the
hook's modules).  Each costs 50-250 ms per tool call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import durability
from tests.helpers import cli, cli_json, make_git_repo, start_service


def _speed(repo: Path, env: dict[str, str]) -> dict[str, Any]:
    done = cli("doctor", "--json", "--project-dir", str(repo), env=env)
    [check] = [c for c in json.loads(done.stdout) if c["name"] == "hook speed"]
    return dict(check)


def _compiled(prefix: Path) -> dict[str, str]:
    """An environment whose bytecode caches live in ``prefix``, written there
    for the whole package (as an install does)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    package = Path(durability.__file__).parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], env=env,
                   check=True, capture_output=True, timeout=300)
    return env


def test_no_bytecode_caches_and_pythondontwritebytecode_are_warned_of(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPYCACHEPREFIX=str(tmp_path / "no-caches"))
    check = _speed(repo, env)
    assert check["status"] == "warn"
    assert "PYTHONDONTWRITEBYTECODE is set" in check["detail"]
    assert "no up-to-date bytecode cache for 13 of the hook's 13 modules" in check["detail"]
    assert "compileall" in check["next_step"]


def test_fresh_caches_and_a_running_service_are_ok(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    env = _compiled(tmp_path / "caches")
    cli_json("install-hook", "--scope", "project", "--project-dir", str(repo), env=env)
    service = start_service(tmp_path, env=env)
    try:
        check = _speed(repo, env)
    finally:
        service.stop()
    assert check["status"] == "ok", check


def test_an_installed_hook_with_no_service_is_warned_of(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    env = _compiled(tmp_path / "caches")
    assert _speed(repo, env)["status"] == "ok"  # no hook: nothing pays for it
    cli_json("install-hook", "--scope", "project", "--project-dir", str(repo), env=env)
    check = _speed(repo, env)
    assert check["status"] == "warn"
    assert check["detail"].startswith("no service answers the hook")
    assert "(DURABILITY_AUTOSTART is off)" in check["detail"]  # the tests' environment
    assert "durability serve --detach" in check["next_step"]


def test_a_service_whose_socket_is_gone_answers_no_hook_and_is_warned_of(
        tmp_path: Path) -> None:
    """A service process that runs but whose socket is gone (taken by a
    file) answers no hook: each tool call captures in-process, as with no
    service at all, and the hook speed check must not call that ok."""
    from tests.helpers import ping, wait_for

    repo = make_git_repo(tmp_path / "repo")
    env = _compiled(tmp_path / "caches")
    cli_json("install-hook", "--scope", "project", "--project-dir", str(repo), env=env)
    service = start_service(tmp_path, env=env)
    try:
        service.socket_path.unlink()
        service.socket_path.write_text("not a socket")
        wait_for(lambda: "cannot be bound again" in service.log(), timeout=30)
        assert ping(service.socket_path, timeout=1) is None
        check = _speed(repo, env)
    finally:
        service.stop()
    assert check["status"] == "warn", check
    assert check["detail"].startswith("no service answers the hook"), check
