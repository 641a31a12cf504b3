"""Helpers for ``demo/demo.py``: a private sandbox, the installed CLI, Claude
Code-shaped hook payloads, and checks that make the demo fail loudly.

Standard library only (plus nothing from the package itself: the demo drives
the installed ``durability`` command exactly as Claude Code would).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["DemoFailure", "Sandbox", "check", "find_tool", "say", "step", "tree_of"]

# Generous ceilings: the demo runs on small CI machines next to other work.
CLI_TIMEOUT_S = 60.0
SERVICE_GONE_TIMEOUT_S = 10.0


class DemoFailure(Exception):
    """Something the demo set out to show did not happen."""


def step(number: int, title: str) -> None:
    print(f"\n=== Step {number}: {title}", flush=True)


def say(text: str = "") -> None:
    for line in text.splitlines() or [""]:
        print(f"    {line}", flush=True)


def check(condition: object, what: str) -> None:
    """Print ``[ok] what``, or stop the demo with ``DemoFailure``."""
    if not condition:
        raise DemoFailure(what)
    print(f"    [ok] {what}", flush=True)


def find_tool(name: str) -> str:
    """``name`` on PATH, else beside the running Python (the project venv)."""
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not os.access(found, os.X_OK):
        raise DemoFailure(f"{name} not found: run `make demo` (it installs it into .venv/bin)")
    return found


def tree_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except jj's and git's own folders."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in (".jj", ".git") or not path.is_file():
            continue
        files[rel.as_posix()] = path.read_bytes()
    return files


class Sandbox:
    """A temporary folder holding a colocated jj repository and the toolkit's
    private state, socket and spool: the user's real state is never touched."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="durability-demo-")).resolve()
        self.repo = self.root / "project"
        self.jj = find_tool("jj")
        self.durability = find_tool("durability")
        self.session_id = "5f0c6a3e-demo-4b1e-9d2a-6c0ffee0cafe"
        self.service_pid: int | None = None
        self._calls = 0
        jj_config = self.root / "jj-config.toml"
        jj_config.write_text('[user]\nname = "Demo Agent"\nemail = "agent@example.invalid"\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DURABILITY_", "JJ_"))}
        self.env: dict[str, str] = {
            **env,
            "DURABILITY_HOME": str(self.root / "state"),
            "DURABILITY_SOCKET": str(self.root / "run" / "service.sock"),
            "DURABILITY_SPOOL_DIR": str(self.root / "spool"),
            # Keep jj away from the user's own jj configuration too.
            "JJ_CONFIG": str(jj_config),
        }

    # -- commands ------------------------------------------------------------

    def run(self, argv: list[str], *, input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(argv, input=input, capture_output=True, cwd=self.repo,
                              env=dict(env or self.env), timeout=CLI_TIMEOUT_S, check=False)
        return subprocess.CompletedProcess(done.args, done.returncode,
                                           done.stdout.decode("utf-8", "replace"),
                                           done.stderr.decode("utf-8", "replace"))

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``durability ARGS``; a non-zero exit stops the demo."""
        done = self.run([self.durability, *args])
        if done.returncode != 0:
            raise DemoFailure(f"`durability {' '.join(args)}` exited {done.returncode}: "
                              f"{done.stderr.strip()}")
        return done

    def cli_json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--json").stdout)

    def init_repo(self) -> None:
        self.repo.mkdir()
        done = self.run([self.jj, "git", "init", "--colocate", str(self.repo)])
        if done.returncode != 0:
            raise DemoFailure(f"jj git init failed: {done.stderr.strip()}")

    # -- the hook ------------------------------------------------------------

    def hook(
        self, tool_name: str, tool_input: dict[str, Any], tool_response: dict[str, Any],
        *, env: Mapping[str, str] | None = None,
    ) -> tuple[str, subprocess.CompletedProcess[str]]:
        """Send one PostToolUse payload through ``durability snapshot-hook``,
        as Claude Code does after a tool call; returns its tool_use_id."""
        self._calls += 1
        tool_use_id = f"toolu_01Demo{self._calls:04d}"
        payload = {
            "session_id": self.session_id,
            "transcript_path": str(self.root / "transcripts" / f"{self.session_id}.jsonl"),
            "cwd": str(self.repo),
            "permission_mode": "acceptEdits",
            "hook_event_name": "PostToolUse",
            "tool_name": tool_name,
            "tool_input": tool_input,
            "tool_response": tool_response,
            "tool_use_id": tool_use_id,
        }
        done = self.run([self.durability, "snapshot-hook"], input=json.dumps(payload).encode(),
                        env=env)
        if done.returncode != 0 or done.stdout:
            raise DemoFailure(f"the hook must exit 0 silently; it exited {done.returncode} "
                              f"with stdout {done.stdout!r}")
        return tool_use_id, done

    # -- the service ---------------------------------------------------------

    def start_service(self) -> int:
        answer = json.loads(self.cli("serve", "--detach").stdout)
        self.service_pid = int(answer["pid"])
        return self.service_pid

    def ping(self) -> dict[str, Any] | None:
        """The service's ping answer, straight over its Unix socket."""
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5)
        try:
            sock.connect(self.env["DURABILITY_SOCKET"])
            sock.sendall(b'{"v":1,"op":"ping"}\n')
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    return None
                data += chunk
        except OSError:
            return None
        finally:
            sock.close()
        answer = json.loads(data)
        return answer if isinstance(answer, dict) and answer.get("ok") else None

    def kill_service(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the service and wait until it is gone."""
        pid = self.service_pid
        if pid is None:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + SERVICE_GONE_TIMEOUT_S
        while _alive(pid):
            if time.monotonic() > deadline:
                raise DemoFailure(f"service pid {pid} still running after {sig.name}")
            time.sleep(0.02)
        self.service_pid = None

    def close(self, *, keep: bool) -> None:
        """Stop the service (gracefully, then firmly) and remove the sandbox."""
        if self.service_pid is not None:
            try:
                self.kill_service(signal.SIGTERM)
            except DemoFailure:
                try:
                    self.kill_service(signal.SIGKILL)
                except DemoFailure as exc:
                    print(f"demo: could not stop the service: {exc}", file=sys.stderr)
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie nobody has reaped counts as gone:
    the detached service is not our child)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")
