"""The one git runner (``backends/git_cli.py``) the isolation and the remote
transport share: the real git program, in a real repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.backends import git_cli
from durability.ground import proc
from durability.ground.errors import GitFailed
from durability.remote.transport import RemoteFailed


def test_it_answers_with_git_s_output_from_the_options_it_was_given(tmp_path: Path) -> None:
    proc.run(["git", "init", "-q", str(tmp_path)], timeout=30)
    out = git_cli.run(["rev-parse", "--show-toplevel"], env=os.environ, timeout=30,
                      needs="a test needs it", options=["-C", str(tmp_path)])
    assert Path(out.strip()).resolve() == tmp_path.resolve()


def test_a_failure_is_the_caller_s_error_with_git_s_last_words(tmp_path: Path) -> None:
    with pytest.raises(RemoteFailed) as caught:
        git_cli.run(["rev-parse", "--verify", "no-such-ref"], env=os.environ, timeout=30,
                    needs="a test needs it", options=["-C", str(tmp_path)], cwd=str(tmp_path),
                    error=RemoteFailed)
    message = caught.value.message
    assert message.startswith(f"git rev-parse in {tmp_path} failed: ")
    assert "\n" not in message and "not a git repository" in message
    # Unchecked, the caller reads the exit itself.
    assert git_cli.run(["rev-parse", "--verify", "no-such-ref"], env=os.environ, timeout=30,
                       needs="x", options=["-C", str(tmp_path)], check=False) == ""


def test_git_missing_from_the_caller_s_path_says_what_needed_it(tmp_path: Path) -> None:
    with pytest.raises(GitFailed, match="git not found on PATH: a worktree needs it"):
        git_cli.run(["status"], env={"PATH": str(tmp_path)}, timeout=30,
                    needs="a worktree needs it")


def test_last_words_keeps_the_last_non_blank_lines_on_one_line() -> None:
    stderr = "hint: one\n\n  hint:   two \nerror: three\nfatal: four\n"
    assert proc.last_words(stderr) == "hint: two | error: three | fatal: four"
    assert proc.last_words("") == ""
    assert len(proc.last_words("x" * 2000)) == 500
