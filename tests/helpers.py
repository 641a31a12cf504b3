"""Shared builders for the tests: real jj repositories, the installed CLI,
hook payloads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

VENV_BIN = Path(sys.executable).parent


def jj_path() -> str:
    """The jj the toolkit will use; a test that needs jj fails (never skips)
    when there is none."""
    found = os.environ.get("DURABILITY_JJ") or shutil.which("jj") or str(VENV_BIN / "jj")
    if not os.access(found, os.X_OK):
        pytest.fail("jj is not installed: run `make test` (it installs jj into .venv/bin)")
    return found


def durability_exe() -> str:
    exe = VENV_BIN / "durability"
    if not exe.exists():
        pytest.fail("the durability console script is not installed in this venv")
    return str(exe)


def jj(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([jj_path(), "--no-pager", "--color=never", "-R", str(repo), *args],
                          cwd=repo, capture_output=True, text=True, check=check, timeout=120)


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=check, timeout=120)


def make_jj_repo(path: Path, *, colocate: bool = True) -> Path:
    """A fresh jj repository at ``path`` (colocated with git by default)."""
    path.mkdir(parents=True, exist_ok=True)
    args = ["git", "init", "--colocate"] if colocate else ["git", "init"]
    subprocess.run([jj_path(), *args, str(path)], capture_output=True, text=True, check=True,
                   timeout=120)
    return path


def cli(*args: str, input: str | bytes | None = None, env: Mapping[str, str] | None = None,
        cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the installed ``durability`` command."""
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run([durability_exe(), *args], input=data, capture_output=True,
                          env=dict(env) if env is not None else None, cwd=cwd, timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def cli_json(*args: str, **kw: Any) -> Any:
    done = cli(*args, "--json", **kw)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def hook_payload(cwd: Path, *, session_id: str = "sess-1", tool_use_id: str = "toolu_1",
                 tool_name: str = "Write", file_path: str | None = None,
                 event: str = "PostToolUse", **extra: Any) -> dict[str, Any]:
    """A payload shaped like Claude Code's PostToolUse hook input."""
    tool_input: dict[str, Any] = {}
    if file_path is not None:
        tool_input = {"file_path": file_path, "content": "x"}
    elif tool_name == "Bash":
        tool_input = {"command": "true", "description": "run"}
    return {
        "session_id": session_id,
        "transcript_path": str(cwd / ".claude-transcript.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_response": {"success": True},
        "tool_use_id": tool_use_id,
        **extra,
    }


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll until ``predicate`` returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"condition not met within {timeout}s")


def ping(socket_path: Path, timeout: float = 5.0) -> dict[str, Any] | None:
    """The service's answer to a ping on ``socket_path``, or None when nothing answers."""
    from durability import client

    try:
        answer = client.call(socket_path, {"v": 1, "op": "ping"}, timeout_s=timeout)
    except (client.Unreachable, client.ConnectionLost, client.WaitTimeout):
        return None
    return answer if answer.get("ok") else None


class ServiceProcess:
    """A ``durability serve`` subprocess (foreground), stopped with SIGTERM."""

    def __init__(self, socket_path: Path, log_path: Path, *args: str,
                 env: Mapping[str, str] | None = None) -> None:
        self.socket_path = socket_path
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([durability_exe(), "serve", *args],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         env=dict(env) if env is not None else None)

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                pytest.fail(f"service exited {self.proc.returncode}: {self.log()}")
            return ping(self.socket_path, timeout=2)

        answer: dict[str, Any] = wait_for(ready, timeout=timeout, interval=0.05)
        return answer

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait; SIGKILL only if it does not stop in time."""
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
            pytest.fail(f"service did not stop on SIGTERM within {timeout}s")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def start_service(tmp_path: Path, *args: str, socket_path: Path | None = None,
                  env: Mapping[str, str] | None = None) -> ServiceProcess:
    """Start ``durability serve`` on ``$DURABILITY_SOCKET`` (or ``socket_path``) and
    wait until it answers a ping."""
    sock = socket_path or Path((env or os.environ)["DURABILITY_SOCKET"])
    extra = ("--socket", str(sock)) if socket_path is not None else ()
    service = ServiceProcess(sock, tmp_path / f"service-{time.monotonic_ns()}.log", *extra, *args,
                             env=env)
    try:
        service.wait_ready()
    except BaseException:
        service.kill()
        raise
    return service
