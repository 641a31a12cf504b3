"""``durability remote list`` prints a table a person can read.

Found in a new user's trial: its lines were ``NAME<TAB>URL<TAB>WORKTREE``
and the listing escapes control characters, so the terminal showed
``backup\\tfile:///...\\t/path`` with literal backslashes.  Now it is a table
with a header, like every other listing; ``--json`` is unchanged.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import cli, make_git_repo


def test_remote_list_is_a_table_without_escaped_tabs(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    for name, url in (("backup", "../backup.git"), ("far-away", "file:///srv/cp.git")):
        assert cli("remote", "add", name, url, cwd=repo).returncode == 0
    done = cli("remote", "list", cwd=repo)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "\\t" not in done.stdout and "\t" not in done.stdout, done.stdout
    assert lines[0].split() == ["NAME", "URL", "WORKTREE"]
    rows = sorted(line.split() for line in lines[1:])
    assert rows == [["backup", (tmp_path / "backup.git").as_uri(), str(repo)],
                    ["far-away", "file:///srv/cp.git", str(repo)]]
    # The columns line up: each URL starts where the header's URL does.
    assert {line.index("file://") for line in lines[1:]} == {lines[0].index("URL")}
