"""What the informed-capture tests share."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import make_git_repo, make_jj_repo


def make_worktree(kind: str, path: Path) -> Path:
    """A git or colocated jj worktree with an ignore rule and one tracked file:
    what the informed-capture tests start from."""
    if kind == "git":
        make_git_repo(path)
    else:
        make_jj_repo(path)
        (path / "README.md").write_text("hello\n")
    (path / ".gitignore").write_text("build/\n")
    (path / "src").mkdir()
    (path / "src" / "a.txt").write_text("a\n")
    return path
