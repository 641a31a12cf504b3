"""Acceptance cases that cross modules: what a new user hits from the outside,
through the installed CLI, on jj and plain git worktrees."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durability.backends.git import forget
from durability.config import Settings
from engine import Store
from tests.helpers import cli, cli_json, make_git_repo, make_jj_repo, tree_manifest

RUN = "run-acc"


@pytest.fixture
def two_repos(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A colocated jj repository and an unrelated plain git repository."""
    jrepo = make_jj_repo(tmp_path / "jrepo").resolve()
    (jrepo / "j.txt").write_text("jj side\n")
    grepo = make_git_repo(tmp_path / "grepo").resolve()
    (grepo / "g.txt").write_text("git side\n")
    yield jrepo, grepo
    forget(grepo)


def _rows(settings: Settings) -> list[tuple[int, str, str]]:
    return [(c.seq, c.commit_id, c.worktree) for c in Store(settings.db_path).checkpoints(RUN)]


@pytest.mark.parametrize("source_kind", ["jj", "git"])
def test_restore_into_a_repository_without_the_commit_records_nothing(
    two_repos: tuple[Path, Path], settings: Settings, source_kind: str
) -> None:
    """A restore that cannot succeed (the checkpoint's commit is not in the
    target worktree's repository) must refuse before its pre-restore capture:
    otherwise the attempt gains a row for a foreign worktree, its jj_pointer
    moves there, and the next default restore goes to the wrong repository."""
    jrepo, grepo = two_repos
    source, other = (jrepo, grepo) if source_kind == "jj" else (grepo, jrepo)
    cli_json("snapshot", str(source), "--run", RUN, "--node", "n")
    rows_before = _rows(settings)
    pointer_before = [a.jj_pointer for a in Store(settings.db_path).attempts(RUN)]
    files_before = tree_manifest(other)
    done = cli("restore", RUN, "--node", "n", "--worktree", str(other))
    assert done.returncode == 5 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(("durability: git-failed: ", "durability: jj-failed: "))
    assert _rows(settings) == rows_before
    assert [a.jj_pointer for a in Store(settings.db_path).attempts(RUN)] == pointer_before
    assert tree_manifest(other) == files_before


def test_restore_of_an_attempt_without_checkpoints_says_so_plainly(repo: Path) -> None:
    cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    done = cli("restore", RUN, "--node", "n", "--attempt", "2")
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr == (f"durability: not-found: run {RUN!r} node 'n' iteration 0 "
                           "attempt 2 has no checkpoints\n")


def test_tables_never_print_control_characters_from_labels_or_details(repo: Path) -> None:
    # Labels and gap details come from hook payloads (file names an agent
    # chose): printed raw, a newline forges a row and ESC drives the terminal.
    label = "two\nlines\x1b[31mred\r"
    cli_json("snapshot", str(repo), "--run", RUN, "--node", "n", "--label", label)
    cli("snapshot", str(repo / "gone\x1b[2J"), "--run", RUN, "--node", "n")
    listed = cli("snapshots", RUN)
    gaps = cli("gaps", RUN)
    for done in (listed, gaps):
        assert done.returncode == 0, done.stderr
        assert not any(c in done.stdout for c in "\x1b\r"), done.stdout
        assert len(done.stdout.strip().splitlines()) == 2 if done is listed else 1
    assert "two\\nlines\\x1b[31mred\\r" in listed.stdout
    assert cli_json("snapshots", RUN)[0]["label"] == label  # JSON keeps the truth
