"""Run one headless invocation of a real agent CLI through its adapter, as the
runner will: the adapter's argv, environment and stdin, its own process
group, each stdout line parsed as it arrives, then ``finish``.

Also the private homes a test gives the CLIs (``codex_home`` /
``gemini_home``) and where the pinned CLIs are installed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from durability.agents.protocol import AgentRequest, Event, Final, Harness

AGENT_CLIS = Path(sys.executable).parent.parent / "agent-clis" / "node_modules" / ".bin"
CODEX = AGENT_CLIS / "codex"
GEMINI = AGENT_CLIS / "gemini"
TIMEOUT_S = 120
# The CLIs' own PATH: without our venv (the hook must not rely on it).
BARE_PATH = "/usr/bin:/bin"


def cli_path(path: Path) -> str:
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path.name} is not installed at {path}: run `make .venv/agent-clis-ready` "
                    "(scripts/install-agent-clis.sh installs it)")
    return str(path)


@dataclass
class Invocation:
    argv: list[str]
    lines: list[str]
    events: list[Event]
    final: Final
    returncode: int
    stderr: str


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """What a CLI gets besides the adapter's additions: a private HOME, a
    bare PATH, nothing of the toolkit's own variables (the adapter must
    pass those through ``hook_env``)."""
    env = {k: os.environ[k] for k in ("LANG", "TMPDIR", "GIT_CONFIG_NOSYSTEM",
                                      "GIT_CONFIG_GLOBAL", "JJ_CONFIG") if k in os.environ}
    return {**env, "PATH": BARE_PATH, "HOME": str(home), "TERM": "dumb",
            "NO_PROXY": "127.0.0.1,localhost", **extra}


def toolkit_env() -> dict[str, str]:
    """The toolkit's variables the conftest set for this test: the hook's
    identity and state folders, handed to the adapter as ``hook_env``."""
    return {k: v for k, v in os.environ.items() if k.startswith("DURABILITY_")}


def run(adapter: Harness, request: AgentRequest, executable: str, base: dict[str, str],
        timeout: float = TIMEOUT_S) -> Invocation:
    argv = adapter.argv(request, executable)
    env = adapter.env(request, dict(base))
    adapter.prepare(request)
    data = adapter.stdin(request)
    proc = subprocess.Popen(argv, cwd=request.worktree, env=env,
                            stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(data, timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    lines = out.decode("utf-8", "replace").splitlines()
    events = [event for line in lines for event in adapter.parse(line)]
    stderr = err.decode("utf-8", "replace")
    final = adapter.finish(events, proc.returncode, stderr[:8192])
    return Invocation(argv, lines, events, final, proc.returncode, stderr)
