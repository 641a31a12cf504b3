"""The hook command an agent's tool calls run (``default_hook_command``):
this environment's own ``durability`` script when it is there, else the
interpreter with ``-P -c``; either way a ``durability`` package the agent
wrote into its worktree (the hook's working folder) is never the one run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from durability.runs.agent import AgentConfig, default_hook_command


def _fake_env(tmp_path: Path, shebang: str) -> Path:
    """A folder with an executable ``python`` link and a ``durability`` script."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    python = bindir / "python"
    python.symlink_to(sys.executable)
    script = bindir / "durability"
    script.write_text(f"#!{shebang}\nimport sys\n")
    script.chmod(0o755)
    return python


def test_the_script_beside_the_interpreter_is_used_when_it_names_it(tmp_path: Path) -> None:
    python = _fake_env(tmp_path, str(tmp_path / "bin" / "python"))
    assert default_hook_command(str(python)) == (str(tmp_path / "bin" / "durability"),
                                                 "snapshot-hook")


def test_a_script_for_another_interpreter_is_not_used(tmp_path: Path) -> None:
    python = _fake_env(tmp_path, "/somewhere/else/python")
    command = default_hook_command(str(python))
    assert command == (str(python), "-P", "-c", "from durability.__main__ import main; main()",
                       "snapshot-hook")


def test_no_script_means_the_interpreter_runs_the_entry_point(tmp_path: Path) -> None:
    command = default_hook_command(str(tmp_path / "nothing-here" / "python"))
    assert command[1:3] == ("-P", "-c") and command[-1] == "snapshot-hook"
    assert "-m" not in command


def test_the_engine_default_is_this_environments_command() -> None:
    assert AgentConfig().hook_command == default_hook_command(sys.executable)


@pytest.mark.parametrize("use_script", [True, False], ids=["script", "interpreter"])
def test_a_durability_package_in_the_worktree_is_not_imported(
        tmp_path: Path, use_script: bool) -> None:
    worktree = tmp_path / "worktree"
    planted = worktree / "durability"
    planted.mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    for name in ("__init__.py", "__main__.py"):
        (planted / name).write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    command = default_hook_command(sys.executable)
    if not use_script:
        command = default_hook_command(str(tmp_path / "no-script" / "python"))
        command = (sys.executable, *command[1:])
    payload = {"session_id": "hook-cmd", "cwd": str(worktree), "hook_event_name": "PreToolUse",
               "tool_name": "Bash", "tool_input": {"command": "true"}, "tool_use_id": "t1"}
    env = {**os.environ, "DURABILITY_HOME": str(tmp_path / "state"),
           "DURABILITY_SOCKET": str(tmp_path / "no.sock"), "DURABILITY_AUTOSTART": "0"}
    done = subprocess.run(command, input=json.dumps(payload).encode(), cwd=worktree, env=env,
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert not marker.exists(), "the worktree's durability package was imported"
