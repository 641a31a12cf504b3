"""``durability log FILE`` says what log takes instead of "does not exist".

Found in a new user's trial: ``durability log src/app.py`` (as one types
``git log FILE``) answered ``worktree-missing: worktree .../src/app.py does
not exist or is not a folder`` (exit 5) about a file that exists.  log shows
a whole worktree's timeline, so a file is an ``invalid-value`` (exit 2) that
names the folder form and the command that shows one file's changes.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import make_git_repo, run_cli, run_cli_json


def test_log_of_a_file_is_invalid_value_naming_what_to_run(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("x = 1\n")
    run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n")
    done = run_cli("log", "src/app.py", cwd=repo)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("durability: invalid-value: ")
    assert "does not exist" not in done.stderr
    assert "diff" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    # A folder of the worktree still gives the worktree's timeline.
    listed = run_cli_json("log", "src", cwd=repo)
    assert [e["seq"] for e in listed] == [1]
    gone = run_cli("log", "nowhere", cwd=repo)
    assert gone.returncode == 5 and "worktree-missing" in gone.stderr
