"""A worktree moved (``mv proj proj2``) keeps its records: its repository
holds its identity, so `log` and `restore` from the new place find its
checkpoints, and the next capture continues its seqs; a copy (the original
still in place) is a new worktree; a checkpoint whose worktree cannot be
found says how to name it (``--worktree``).  The installed CLI, real git and
jj repositories."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from durability.capture.moved import follow
from durability.config import Settings
from durability.ground import ids
from durability.store import Store
from tests.helpers import make_git_repo, make_jj_repo, run_cli, run_cli_json

RUN = ["--run", "R", "--node", "n"]


def _repo(kind: str, path: Path) -> Path:
    repo = make_git_repo(path) if kind == "git" else make_jj_repo(path)
    return repo


def _snap(worktree: Path, text: str) -> int:
    (worktree / "f.txt").write_text(text)
    done = run_cli_json("snapshot", str(worktree), *RUN)
    return int(done["seq"])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_moved_worktree_keeps_its_log_restores_and_seqs(kind: str, tmp_path: Path) -> None:
    proj = _repo(kind, tmp_path / "proj")
    assert [_snap(proj, "v1\n"), _snap(proj, "v2\n")] == [1, 2]
    moved = tmp_path / "proj2"
    proj.rename(moved)
    entries = run_cli_json("log", str(moved))
    assert [(e["seq"], e["worktree"]) for e in entries] == [(2, str(moved)), (1, str(moved))]
    done = run_cli("restore", "R", "--node", "n", "--seq", "1", cwd=moved)
    assert done.returncode == 0, done.stderr
    assert (moved / "f.txt").read_text() == "v1\n"
    # The pre-restore capture was the tree of seq 2 (deduplicated): next is 3.
    assert _snap(moved, "v3\n") == 3
    assert [e["seq"] for e in run_cli_json("log", str(moved))] == [3, 2, 1]


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_copy_is_a_new_worktree_and_the_original_keeps_its_records(
        kind: str, tmp_path: Path) -> None:
    proj = _repo(kind, tmp_path / "proj")
    _snap(proj, "v1\n")
    copy = tmp_path / "copy"
    shutil.copytree(proj, copy, symlinks=True)
    done = run_cli("log", str(copy))
    assert done.returncode == 0, done.stderr
    assert "nothing recorded yet" in done.stderr + done.stdout
    assert "--worktree" in done.stderr + done.stdout
    assert _snap(copy, "copy\n") == 2  # the run's attempt goes on, in the copy's own history
    assert [e["seq"] for e in run_cli_json("log", str(copy))] == [2]
    assert [e["seq"] for e in run_cli_json("log", str(proj))] == [1]


def test_a_restore_whose_worktree_is_gone_names_worktree(tmp_path: Path) -> None:
    proj = _repo("git", tmp_path / "proj")
    _snap(proj, "v1\n")
    proj.rename(tmp_path / "elsewhere")
    done = run_cli("restore", "R", "--node", "n", "--seq", "1", cwd=tmp_path)
    assert done.returncode == 5, done.stderr
    assert done.stderr.count("\n") == 1
    assert "worktree-missing" in done.stderr and "--worktree" in done.stderr
    # Named, it restores.
    done = run_cli("restore", "R", "--node", "n", "--seq", "1", "--worktree",
                   str(tmp_path / "elsewhere"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_show_of_a_moved_worktree_s_checkpoint_reads_it_from_its_new_place(
        tmp_path: Path) -> None:
    proj = _repo("git", tmp_path / "proj")
    _snap(proj, "v1\n")
    _snap(proj, "v2\n")
    moved = tmp_path / "proj2"
    proj.rename(moved)
    away = run_cli("show", "R", "--node", "n", "--seq", "2", cwd=tmp_path)
    assert away.returncode == 5 and "--worktree" in away.stderr, away.stderr
    shown = run_cli_json("show", "R", "--node", "n", "--seq", "2", cwd=moved)
    assert shown["worktree"] == str(moved)
    assert [f["path"] for f in shown["files"]] == ["f.txt"]  # read from the moved repository


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_worktree_being_deleted_gets_no_identity(kind: str, tmp_path: Path,
                                                   settings: Settings) -> None:
    """An ``rm -rf`` under way has taken the identity (or there was none yet)
    and the repository's first entries: a capture beginning then writes none,
    so our folder is not made again in a repository being emptied."""
    proj = _repo(kind, tmp_path / "proj").resolve()
    where = ids.worktree_identity_file(proj)
    assert where is not None
    (proj / ".git" / "config").unlink()
    with Store(settings.database) as store:
        assert follow(store, proj) is None
    assert not Path(where).parent.exists()
    with pytest.raises(OSError, match=r"being deleted \(.*config is gone\)"):
        ids.write_worktree_identity(proj, "0" * 32, str(proj))
