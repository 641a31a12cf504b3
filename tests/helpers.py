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
