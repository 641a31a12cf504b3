"""A Bash call killed mid-call, end to end with the real Claude Code CLI.

The project hook that ``install-hook`` writes runs on ``PreToolUse`` too: it
announces each call.  The stand-in (tests/e2e/fake_anthropic.py) asks for a
Bash call that writes a file and then sleeps; the test kills Claude Code's
process group mid-call, so no post-call hook ever comes for it.  The session
is then resumed (``--resume``, a new Claude Code process) and makes one Write:
its hooks find the killed call's harness gone, file one ``call-unfinished``
gap naming the Bash call, and label the Write's checkpoint, which holds the
killed call's file, with it too.

A missing CLI fails the test (run `make setup`); it never skips.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from durability.gaps.calls import calls_file
from tests.e2e.fake_anthropic import FakeAnthropic, Script
from tests.e2e.test_claude_code import CLAUDE_TIMEOUT_S, claude_env, claude_exe
from tests.helpers import cli, cli_json, make_git_repo, store_git, wait_for

pytestmark = pytest.mark.slow

KILLED = "echo started > half.txt; sleep 47; echo late > late.txt"


def _claude(repo: Path, fake: FakeAnthropic, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [claude_exe(), "-p", "Do the task.", "--output-format", "json",
         "--permission-mode", "bypassPermissions", *extra],
        cwd=repo, env=claude_env(fake.base_url), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _kill_everything_in(repo: Path, group: int) -> None:
    """Kill Claude Code's process group, and any process of it that left the
    group but still runs in ``repo`` (the Bash tool's shell): each by its id."""
    os.killpg(group, signal.SIGKILL)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            where = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if where == str(repo):
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_killed_bash_call_is_one_call_unfinished_gap(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    cli_json("install-hook", "--scope", "project", "--project-dir", str(repo))
    session = str(uuid.uuid4())
    next_file = str(repo / "next.txt")

    def first(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        return ("Bash", {"command": KILLED, "description": "slow step"}) if not results else None

    def resumed(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        if any("next.txt" in json.dumps(r.get("content")) for r in results):
            return None
        return "Write", {"file_path": next_file, "content": "next\n"}

    with FakeAnthropic(Script(plan=first)) as fake:
        proc = _claude(repo, fake, "--session-id", session)
        try:
            wait_for(lambda: (repo / "half.txt").exists() or proc.poll() is not None,
                     timeout=CLAUDE_TIMEOUT_S)
            assert proc.poll() is None, proc.communicate()
            # While the call runs it is no gap: the process that announced it
            # is Claude Code itself, alive (nothing on record for the session).
            assert cli("gaps", session).returncode == 3
        finally:
            _kill_everything_in(repo, proc.pid)
            proc.communicate(timeout=30)
        assert not (repo / "late.txt").exists()
        # Announced, and nothing decided yet: no later hook of the session came.
        [announced] = Path(calls_file(os.environ["DURABILITY_SPOOL_DIR"], session)) \
            .read_text().splitlines()
        assert json.loads(announced)["summary"] == KILLED
        fake.script.plan = resumed
        again = _claude(repo, fake, "--resume", session)
        out, err = again.communicate(timeout=CLAUDE_TIMEOUT_S)
        assert again.returncode == 0, (out[-2000:], err[-2000:])
    [gap] = cli_json("gaps", session)
    assert gap["reason"] == "call-unfinished"
    assert gap["tool_use_id"].startswith("toolu_e2e_")
    assert f"Bash {KILLED}" in gap["detail"]
    rows = cli_json("snapshots", session)
    [write] = [r for r in rows if r["label"].startswith("Write next.txt")]
    assert write["label"] == f"Write next.txt [after unfinished: Bash {KILLED}]"
    tree = store_git(repo, "ls-tree", "-r", "--name-only", write["commit_id"]).stdout.split()
    assert {"half.txt", "next.txt"} <= set(tree), tree
