"""``durability remote add|list|remove`` through the installed command, and
the validation of remote names and URLs (durability/ground/ids.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.ground import ids
from tests.helpers import cli, make_git_repo


def test_add_list_remove(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    done = cli("remote", "add", "backup", "../backup.git", cwd=repo)
    assert done.returncode == 0, done.stderr
    listed = json.loads(cli("remote", "list", "--json", cwd=repo / ".").stdout)
    assert [(r["name"], r["url"], r["worktree"]) for r in listed] == [
        ("backup", (tmp_path / "backup.git").as_uri(), str(repo))]
    again = cli("remote", "add", "backup", "file:///x.git", cwd=repo)
    assert again.returncode == 2 and again.stderr.startswith("durability: invalid-value: ")
    assert cli("remote", "remove", "backup", cwd=repo).returncode == 0
    gone = cli("remote", "remove", "backup", cwd=repo)
    assert gone.returncode == 3 and gone.stderr.startswith("durability: not-found: ")
    assert json.loads(cli("remote", "list", "--json", cwd=repo).stdout) == []


def test_a_folder_that_is_neither_a_worktree_nor_empty_is_refused(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    done = cli("remote", "add", "backup", "file:///b.git", "--worktree", str(tmp_path / "full"))
    assert done.returncode == 5 and "not-a-repo" in done.stderr


@pytest.mark.parametrize("url", [
    "-uhack", "ext::sh -c touch% /tmp/pwned", "http://example.com/x.git",
    "git://example.com/x.git", "https://me:secret@example.com/x.git", "file:///a b", "",
    # A user in an https URL may be a token (https://ghp_...@host): refused.
    "https://me@example.com/b.git",
    "fd::3",
])
def test_urls_that_run_programs_leak_or_confuse_git_are_refused(url: str,
                                                                tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ids.remote_url(url, str(tmp_path))


def test_the_command_refuses_a_bad_url_in_one_line(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    done = cli("remote", "add", "backup", "ext::sh -c touch% /tmp/pwned", cwd=repo)
    assert done.returncode == 2 and done.stderr.startswith("durability: invalid-value: ")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(("url", "stored"), [
    ("file:///srv/b.git", "file:///srv/b.git"),
    ("ssh://git@example.com/me/b.git", "ssh://git@example.com/me/b.git"),
    ("https://example.com/b.git", "https://example.com/b.git"),
    ("git@example.com:me/b.git", "git@example.com:me/b.git"),
    ("/srv/b.git", "file:///srv/b.git"),
])
def test_urls_git_pushes_to_are_taken(url: str, stored: str) -> None:
    assert ids.remote_url(url, "/home") == stored


@pytest.mark.parametrize("name", ["", "-x", ".x", "a/b", "a b", "x" * 65, "é"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        ids.remote_name(name)


def test_doctor_reports_the_remotes_of_the_worktree(tmp_path: Path) -> None:
    from durability.config import Settings
    from durability.doctor.checks import run_checks
    from durability.store.remote_rows import FAILED, Remotes
    from tests.durability.remote.remotekit import capture

    repo = make_git_repo(tmp_path / "repo")
    settings = Settings.from_env()
    assert "remotes" not in {c.name for c in run_checks(settings, {}, repo)}
    cli("remote", "add", "backup", "file:///nowhere.git", cwd=repo)
    capture(repo, "one")
    [found] = [c for c in run_checks(settings, {"PATH": "/usr/bin:/bin"}, repo)
               if c.name == "remotes"]
    assert found.status == "ok" and "1 checkpoint(s) waiting" in found.detail
    remotes = Remotes(settings.database)
    remotes.mark(remotes.pending(), FAILED, "unreachable")
    [found] = [c for c in run_checks(settings, {"PATH": "/usr/bin:/bin"}, repo)
               if c.name == "remotes"]
    assert found.status == "warn" and "replication-failed" in found.detail
    [found] = [c for c in run_checks(settings, {"PATH": str(tmp_path / "empty")}, repo)
               if c.name == "remotes"]
    assert found.status == "fail" and "git is not on PATH" in found.detail


def test_from_remote_needs_the_run_id(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    done = cli("restore", "--latest", "--from-remote", "backup", cwd=repo)
    assert done.returncode == 2 and "needs the RUN id" in done.stderr
    listed = cli("remote", "list", "--all", cwd=repo)
    assert listed.returncode == 0 and listed.stderr == "no remotes\n"
