"""End to end with the real Claude Code CLI: its own hook machinery runs our
hook on a real tool call, offline.

Claude Code (the pinned npm package that `make setup` installs under
.venv/claude-code, scripts/install-claude-code.sh) runs `claude -p` in a real
git repository against a loopback stand-in of the Messages API
(tests/e2e/fake_anthropic.py) that asks for one Bash call.  Claude Code runs
the command itself and then the PostToolUse hook through `/bin/sh -c` with
its own PATH, which here is `/usr/bin:/bin`: the hook must find the toolkit
without the venv on PATH, as on a user's machine.

A missing CLI fails the test (run `make setup`); it never skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_anthropic import BASH_INPUT, FINAL_TEXT, FakeAnthropic
from tests.helpers import cli, cli_json, make_git_repo, store_git

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# The venv this suite runs from holds the CLI: the Makefile installs it there.
CLAUDE = Path(sys.executable).parent.parent / "claude-code" / "node_modules" / ".bin" / "claude"
CLAUDE_TIMEOUT_S = 90
# What the hook must not rely on: Claude Code's PATH without our venv.
BARE_PATH = "/usr/bin:/bin"
LABEL = f"Bash {BASH_INPUT['command']}"
# The files that make the repository a Claude Code plugin.
PLUGIN_FILES = (".claude-plugin/plugin.json", "hooks/hooks.json", "durability/run-hook.sh",
                "bin/durability")


def claude_exe() -> str:
    if not os.access(CLAUDE, os.X_OK):
        pytest.fail(f"Claude Code is not installed at {CLAUDE}: run `make setup` "
                    "(scripts/install-claude-code.sh installs it)")
    return str(CLAUDE)


def claude_env(base_url: str) -> dict[str, str]:
    """A clean environment for Claude Code: the test's private folders (set by
    the conftest), the stand-in API, and nothing that reaches the network."""
    keep = ("HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "JJ_CONFIG",
            "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "LANG", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env |= {k: v for k, v in os.environ.items() if k.startswith("DURABILITY_")}
    env |= {
        "PATH": BARE_PATH,
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy",
        # bypassPermissions is refused to root outside a sandbox.
        "IS_SANDBOX": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    return env


def run_claude(repo: Path, fake: FakeAnthropic, *extra: str) -> dict[str, Any]:
    """`claude -p` in ``repo``; its JSON result, after checking it exited 0."""
    done = subprocess.run(
        [claude_exe(), "-p", "Write hello into made-by-claude.txt.", "--output-format", "json",
         "--permission-mode", "bypassPermissions", *extra],
        cwd=repo, env=claude_env(fake.base_url), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=CLAUDE_TIMEOUT_S)
    seen = [f"{r.method} {r.path}" for r in fake.requests]
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:], seen)
    result: dict[str, Any] = json.loads(done.stdout)
    assert result.get("result") == FINAL_TEXT, (result, seen)
    # Claude Code ran the Bash call the stand-in asked for, and sent its result back.
    assert (repo / "made-by-claude.txt").read_text() == "hello\n"
    # (A call's result is in every later request's history: count calls, not blocks.)
    results = {(r["tool_use_id"], r.get("is_error")) for r in fake.tool_results()}
    assert [error for _, error in results] == [False], results
    return result


def assert_one_checkpoint(repo: Path, session_id: str) -> None:
    """The hook recorded the Bash call of ``session_id``: one checkpoint from
    harness claude, labelled with the command, whose tree holds the file."""
    sessions = cli_json("sessions")
    found = [s for s in sessions if s["run_id"] == session_id]
    assert len(found) == 1, f"session {session_id} not recorded: {sessions}"
    session = found[0]
    assert (session["worktree"], session["gaps"]) == (str(repo), 0)
    assert session["checkpoints"] >= 1
    rows = cli_json("snapshots", session_id)
    assert {r["harness"] for r in rows} == {"claude"}
    labelled = [r for r in rows if r["label"] == LABEL]
    assert len(labelled) == 1, [r["label"] for r in rows]
    bash = labelled[0]
    assert bash["tool_use_id"].startswith("toolu_e2e_")
    tree = store_git(repo, "ls-tree", "-r", "--name-only", bash["commit_id"]).stdout.split()
    assert "made-by-claude.txt" in tree, tree
    assert store_git(repo, "show", f"{bash['commit_id']}:made-by-claude.txt").stdout == "hello\n"
    assert cli_json("gaps", session_id) == []


def test_project_hook_from_install_hook_checkpoints_a_real_claude_bash_call(
        tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    installed = cli_json("install-hook", "--scope", "project", "--project-dir", str(repo))
    assert installed["installed"] is True
    with FakeAnthropic() as fake:
        result = run_claude(repo, fake)
    assert_one_checkpoint(repo, result["session_id"])


def _plugin_copy(dest: Path) -> Path:
    """The plugin's own files, without the checkout's .venv (which its
    launcher would otherwise find)."""
    for rel in PLUGIN_FILES:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def test_plugin_hook_checkpoints_with_the_toolkit_in_local_bin(tmp_path: Path) -> None:
    # A pipx-style install: `durability` in ~/.local/bin, not on Claude Code's PATH.
    local_bin = Path(os.environ["HOME"]) / ".local" / "bin"
    local_bin.mkdir(parents=True)
    (local_bin / "durability").symlink_to(Path(sys.executable).parent / "durability")
    plugin = _plugin_copy(tmp_path / "plugin")
    repo = make_git_repo(tmp_path / "repo").resolve()
    with FakeAnthropic() as fake:
        result = run_claude(repo, fake, "--plugin-dir", str(plugin))
    assert_one_checkpoint(repo, result["session_id"])


def test_plugin_without_the_toolkit_files_a_gap_and_the_tool_call_goes_on(
        tmp_path: Path) -> None:
    plugin = _plugin_copy(tmp_path / "plugin")
    repo = make_git_repo(tmp_path / "repo").resolve()
    with FakeAnthropic() as fake:
        result = run_claude(repo, fake, "--plugin-dir", str(plugin))
    session_id = result["session_id"]
    gaps = cli_json("gaps", session_id)
    assert [(g["reason"], g["worktree"]) for g in gaps] == [("toolkit-missing", str(repo))]
    assert gaps[0]["tool_use_id"].startswith("toolu_e2e_")
    done = cli("snapshots", session_id, "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == [], done.stderr
