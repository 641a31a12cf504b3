"""``durability snapshot-hook`` fed the post-tool payloads of OpenAI Codex CLI
(``PostToolUse``, and ``Stop`` at a turn's end) and Gemini CLI (``AfterTool``),
told apart by their shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from durability.config import Settings
from durability.hook.entry import harness
from durability.store import Checkpoint, Store
from tests.helpers import hook_payload, jj, run_cli


def _rows(settings: Settings, run_id: str) -> list[Checkpoint]:
    with Store(settings.database) as store:
        return store.checkpoints(run_id)


def _run_hook(payload: dict[str, Any]) -> None:
    done = run_cli("snapshot-hook", input=json.dumps(payload))
    assert done.returncode == 0
    assert done.stdout == ""
    assert "not taken" not in done.stderr, done.stderr


def codex_payload(cwd: Path, command: str, call_id: str = "call_7Ab") -> dict[str, Any]:
    return {
        "session_id": "0199a7c1-codex-session", "turn_id": "turn-3", "transcript_path": None,
        "cwd": str(cwd), "hook_event_name": "PostToolUse", "model": "gpt-5-codex",
        "tool_name": "Bash", "tool_use_id": call_id, "tool_input": {"command": command},
        "tool_response": "exit code 0",
    }


def codex_stop_payload(cwd: Path, turn: str = "turn-3") -> dict[str, Any]:
    """Codex 0.169's ``Stop`` payload as its hook received it (seen against a
    loopback stand-in of the model API): no tool, no call id, the turn's id."""
    return {
        "session_id": "0199a7c1-codex-session", "turn_id": turn, "transcript_path": None,
        "cwd": str(cwd), "hook_event_name": "Stop", "model": "gpt-5-codex",
        "permission_mode": "bypassPermissions", "stop_hook_active": False,
        "last_assistant_message": "All done.",
    }


def gemini_payload(cwd: Path, tool: str, tool_input: dict[str, Any],
                   stamp: str = "2026-11-29T10:00:00.123Z") -> dict[str, Any]:
    return {
        "session_id": "gemini-session-1", "transcript_path": str(cwd / "chat.json"),
        "cwd": str(cwd), "hook_event_name": "AfterTool", "timestamp": stamp,
        "tool_name": tool, "tool_input": tool_input,
        "tool_response": {"llmContent": "ok", "returnDisplay": "ok"},
    }


def test_shapes_are_told_apart(repo: Path) -> None:
    assert harness(hook_payload(repo)) == "claude"
    assert harness(codex_payload(repo, "ls")) == "codex"
    assert harness(gemini_payload(repo, "write_file", {})) == "gemini"


def test_codex_post_tool_use_is_captured(settings: Settings, repo: Path) -> None:
    (repo / "made-by-codex.txt").write_text("x\n")
    _run_hook(codex_payload(repo, "touch made-by-codex.txt"))
    [row] = _rows(settings, "0199a7c1-codex-session")
    assert (row.source, row.tool_use_id, row.label) == (
        "hook", "call_7Ab", "Bash touch made-by-codex.txt")
    assert "made-by-codex.txt" in jj(repo, "file", "list", "-r", row.commit_id).stdout


def test_codex_stop_captures_the_edit_a_turn_ends_with_once(settings: Settings,
                                                             repo: Path) -> None:
    """An apply_patch Codex runs from a shell command fires no PostToolUse:
    its edit is first seen by the Stop hook at the turn's end."""
    _run_hook(codex_payload(repo, "echo two >> a.txt"))
    (repo / "patched.txt").write_text("hello\n")  # the shell-run apply_patch
    _run_hook(codex_stop_payload(repo))
    _run_hook(codex_stop_payload(repo))  # installed at user and project scope: a replay
    rows = _rows(settings, "0199a7c1-codex-session")
    assert [(r.seq, r.label, r.tool_use_id) for r in rows] == [
        (1, "Bash echo two >> a.txt", "call_7Ab"), (2, "turn end", None)]
    assert "patched.txt" in jj(repo, "file", "list", "-r", rows[1].commit_id).stdout
    assert harness(codex_stop_payload(repo)) == "codex"
    (repo / "next-turn.txt").write_text("x\n")
    _run_hook(codex_stop_payload(repo, turn="turn-4"))  # the next turn's end: its own
    assert [r.label for r in _rows(settings, "0199a7c1-codex-session")][-1] == "turn end"
    assert len(_rows(settings, "0199a7c1-codex-session")) == 3


def test_gemini_after_tool_is_captured_once_even_when_sent_twice(settings: Settings,
                                                                 repo: Path) -> None:
    target = repo / "notes.md"
    target.write_text("from gemini\n")
    payload = gemini_payload(repo, "write_file", {"file_path": str(target), "content": "x"})
    _run_hook(payload)
    _run_hook(payload)  # installed in user and project settings: a replay
    [row] = _rows(settings, "gemini-session-1")
    assert (row.tool_use_id, row.label) == (None, "write_file notes.md")
    target.write_text("changed\n")
    _run_hook(gemini_payload(repo, "read_file", {"absolute_path": str(target)},
                             stamp="2026-11-29T10:00:01.456Z"))
    rows = _rows(settings, "gemini-session-1")
    assert [r.label for r in rows] == ["write_file notes.md", "read_file notes.md"]


def test_gemini_failed_tool_is_still_captured(settings: Settings, repo: Path) -> None:
    (repo / "partial.txt").write_text("half\n")
    payload = gemini_payload(repo, "run_shell_command", {"command": "make"})
    payload["tool_response"] = {"llmContent": "", "returnDisplay": "", "error": "exit 2"}
    _run_hook(payload)
    [row] = _rows(settings, "gemini-session-1")
    assert row.label == "run_shell_command make"
