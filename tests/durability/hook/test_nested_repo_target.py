"""A file tool's call inside a repository nested in the session's worktree
(an agent's `git clone` into the project, a vendored repository, a
submodule) is captured in that repository.

The outer worktree records a nested repository as a gitlink to its HEAD (jj
leaves it out altogether), so such an edit was in no checkpoint and no gap
said so (found in a new user's trial: a Write of vendor/lib/new.txt left the
outer worktree's checkpoint unchanged).  The call names its file, so the hook
captures the repository that holds it, as it would with its cwd inside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.durability.hook.test_entry import run_hook
from tests.helpers import (
    commit_manifest,
    git,
    hook_payload,
    make_git_repo,
    make_jj_repo,
    run_cli_json,
)


def _outer(kind: str, path: Path) -> Path:
    outer = (make_jj_repo(path) if kind == "jj" else make_git_repo(path)).resolve()
    (outer / "top.txt").write_text("top\n")
    nested = make_git_repo(outer / "vendor" / "lib")
    (nested / "v.txt").write_text("v\n")
    git(nested, "add", "-A")
    git(nested, "commit", "-q", "-m", "vendored")
    return outer


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_write_inside_a_nested_repository_is_captured_there(tmp_path: Path,
                                                               kind: str) -> None:
    outer = _outer(kind, tmp_path / "outer")
    nested = outer / "vendor" / "lib"
    (nested / "new.txt").write_text("written by the agent\n")

    run_hook(hook_payload(outer, session_id="nested", file_path=str(nested / "new.txt")))

    rows = run_cli_json("snapshots", "nested")
    assert [(r["worktree"], r["label"]) for r in rows] == [(str(nested), "Write new.txt")]
    held = commit_manifest(nested, rows[0]["commit_id"])
    assert held["new.txt"] == ("file", False, b"written by the agent\n")


def test_a_write_in_the_worktree_itself_still_captures_the_worktree(tmp_path: Path) -> None:
    outer = _outer("git", tmp_path / "outer")
    (outer / "src").mkdir()
    (outer / "src" / "a.py").write_text("a\n")

    run_hook(hook_payload(outer / "src", session_id="outer", file_path=str(outer / "src/a.py")))

    rows = run_cli_json("snapshots", "outer")
    assert [(r["worktree"], r["label"]) for r in rows] == [(str(outer), "Write src/a.py")]


def test_a_file_outside_the_worktree_does_not_move_the_capture(tmp_path: Path) -> None:
    """Only a repository inside the worktree is taken: a file elsewhere (a
    home folder that is a repository, another project) is not captured."""
    outer = _outer("git", tmp_path / "outer")
    elsewhere = make_git_repo(tmp_path / "elsewhere").resolve()
    (elsewhere / "x.txt").write_text("x\n")

    run_hook(hook_payload(outer, session_id="away", file_path=str(elsewhere / "x.txt")))

    rows = run_cli_json("snapshots", "away")
    assert [r["worktree"] for r in rows] == [str(outer)]


def test_the_agent_sdks_hook_captures_the_nested_repository_too(tmp_path: Path) -> None:
    import asyncio

    from claude_agent_sdk import HookContext, PostToolUseHookInput

    from durability.integrations.sdk import post_tool_use

    outer = _outer("git", tmp_path / "outer")
    nested = outer / "vendor" / "lib"
    (nested / "new.txt").write_text("from the sdk\n")
    payload = PostToolUseHookInput(
        session_id="sdk-nested", transcript_path=str(outer / "t.jsonl"), cwd=str(outer),
        hook_event_name="PostToolUse", tool_name="Write",
        tool_input={"file_path": str(nested / "new.txt"), "content": "from the sdk\n"},
        tool_response={"success": True}, tool_use_id="toolu_sdk")

    assert asyncio.run(post_tool_use(payload, "toolu_sdk", HookContext(signal=None))) == {}

    rows = run_cli_json("snapshots", "sdk-nested")
    assert [(r["worktree"], r["label"]) for r in rows] == [(str(nested), "Write new.txt")]
    assert commit_manifest(nested, rows[0]["commit_id"])["new.txt"][2] == b"from the sdk\n"
