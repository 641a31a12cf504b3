"""The worktree the restore --path and --dry-run tests share: both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durability.backends.git import forget
from tests.helpers import make_git_repo, make_jj_repo


@pytest.fixture(params=["jj", "git"])
def work(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A colocated jj repository or a plain git repository, with README.md."""
    if request.param == "jj":
        path = make_jj_repo(tmp_path / "repo").resolve()
        (path / "README.md").write_text("hello\n")
    else:
        path = make_git_repo(tmp_path / "repo").resolve()
    yield path
    forget(path)
