"""Helpers for ``demo/demo.py``: a private sandbox, the installed CLI, Claude
Code-shaped hook payloads, and checks that make the demo fail loudly.

Standard library only (plus nothing from the package itself: the demo drives
the installed ``durability`` command, and runs the hook command that
``durability install-hook`` wrote, exactly as Claude Code would).
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

__all__ = ["HOOK_PATH", "DemoFailure", "Sandbox", "check", "find_tool", "say", "step",
           "tree_of"]

# Generous ceilings: the demo runs on small CI machines next to other work.
CLI_TIMEOUT_S = 60.0
SERVICE_GONE_TIMEOUT_S = 10.0
# A service the hook started binds its socket within a second or two; a
# loaded machine gets more.
SERVICE_UP_TIMEOUT_S = 20.0
# What a harness started from a desktop launcher may have: no venv, no ~/.local.
HOOK_PATH = "/usr/bin:/bin"
# Claude Code runs a command hook through this shell.
HOOK_SHELL = "/bin/sh"
# `durability status` exits 3 when no service listens (errors.py, NotFound).
STATUS_NOT_RUNNING = 3


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
        #: The PostToolUse command read back from the project's settings.json.
        self.hook_command: str | None = None
        self._calls = 0
        home = self.root / "home"
        home.mkdir()
        jj_config = self.root / "jj-config.toml"
        jj_config.write_text('[user]\nname = "Demo Agent"\nemail = "agent@example.invalid"\n')
        # A private HOME and XDG folders: install-hook copies its launcher into
        # the data folder, and doctor runs every hook it finds in the user's
        # Claude Code, Codex and Gemini settings; neither may touch the real ones.
        private = ("DURABILITY_", "JJ_", "XDG_", "CLAUDE_", "CODEX_", "GEMINI_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(private)}
        self.env: dict[str, str] = {
            **env,
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "XDG_CACHE_HOME": str(home / ".cache"),
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

    def cli(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        """Run ``durability ARGS``; an exit status not in ``ok`` stops the demo."""
        done = self.run([self.durability, *args])
        if done.returncode not in ok:
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

    def fake_old_jj(self) -> Path:
        """A "jj" that reports version 0.20.0, below the 0.30 the toolkit needs:
        a capture failure a user can meet (an old distribution package)."""
        path = self.root / "old-jj" / "jj"
        path.parent.mkdir(exist_ok=True)
        path.write_text('#!/bin/sh\necho "jj 0.20.0"\n', encoding="utf-8")
        path.chmod(0o755)
        return path

    # -- the hook ------------------------------------------------------------

    def install_hook(self) -> dict[str, Any]:
        """``durability install-hook`` for this project; remembers the command
        that Claude Code will run, as read back from the settings file."""
        result: dict[str, Any] = self.cli_json("install-hook", "--scope", "project",
                                               "--project-dir", str(self.repo))
        settings = json.loads(Path(result["settings"]).read_text(encoding="utf-8"))
        commands = [hook["command"] for group in settings["hooks"]["PostToolUse"]
                    for hook in group["hooks"]]
        if len(commands) != 1:
            raise DemoFailure(f"expected one PostToolUse hook in {result['settings']}, "
                              f"found {commands}")
        self.hook_command = commands[0]
        return result

    def hook(
        self, tool_name: str, tool_input: dict[str, Any], tool_response: dict[str, Any],
        *, extra_env: Mapping[str, str] | None = None,
    ) -> tuple[str, subprocess.CompletedProcess[str]]:
        """Send one PostToolUse payload through the installed hook command, as
        Claude Code does after a tool call: ``/bin/sh -c COMMAND`` in the
        project, with a PATH that holds neither the venv nor jj, the payload
        on stdin.  Returns the call's tool_use_id."""
        if self.hook_command is None:
            raise DemoFailure("no hook installed yet")
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
        env = {**self.env, **(extra_env or {}), "PATH": HOOK_PATH}
        done = self.run([HOOK_SHELL, "-c", self.hook_command],
                        input=json.dumps(payload).encode(), env=env)
        if done.returncode != 0 or done.stdout:
            raise DemoFailure(f"the hook must exit 0 silently; it exited {done.returncode} "
                              f"with stdout {done.stdout!r}")
        return tool_use_id, done

    # -- the service ---------------------------------------------------------

    def status(self) -> dict[str, Any] | None:
        """``durability status --json`` when a service answers, else None."""
        done = self.cli("status", "--json", ok=(0, STATUS_NOT_RUNNING))
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer if done.returncode == 0 and answer.get("answering") else None

    def wait_for_service(self, *, not_pid: int | None = None) -> dict[str, Any]:
        """The status of the service that answers (other than ``not_pid``),
        once one does; the hook starts it in the background."""
        deadline = time.monotonic() + SERVICE_UP_TIMEOUT_S
        while True:
            answer = self.status()
            if answer is not None and answer.get("pid") != not_pid:
                return answer
            if time.monotonic() > deadline:
                raise DemoFailure(f"no service answered within {SERVICE_UP_TIMEOUT_S:g}s")
            time.sleep(0.1)

    def kill(self, pid: int, sig: signal.Signals) -> None:
        """Send ``sig`` to ``pid`` and wait until it is gone."""
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + SERVICE_GONE_TIMEOUT_S
        while _alive(pid):
            if time.monotonic() > deadline:
                raise DemoFailure(f"service pid {pid} still running after {sig.name}")
            time.sleep(0.02)

    def close(self, *, keep: bool) -> None:
        """Stop whatever service runs on the sandbox's socket (the demo's or
        one a hook started), firmly if need be, and remove the sandbox."""
        try:
            done = self.run([self.durability, "stop", "--kill", "--timeout", "10"])
            if done.returncode != 0:
                print(f"demo: could not stop the service: {done.stderr.strip()}",
                      file=sys.stderr)
        except (OSError, subprocess.TimeoutExpired) as exc:
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
