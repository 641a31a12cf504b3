"""Restore never destroys data (issue 8 items 1, 2, 9): writes stay inside
the worktree, a file no checkpoint holds is never overwritten, and an undo
puts back the modes a restore replaced.  Both backends, through the CLI."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from durability.backends.confined import MAX_OPEN_DIRS, ConfinedTree
from durability.backends.git import forget
from durability.ground.errors import RestoreError
from tests.helpers import git, jj, make_git_repo, make_jj_repo, run_cli, run_cli_json

RUN = "run-safe"


@pytest.fixture(params=["git", "jj", "jj-noncolocated"])
def wt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A worktree of each backend (and jj with its git store under .jj)."""
    if request.param == "git":
        path = make_git_repo(tmp_path / "wt").resolve()
    else:
        path = make_jj_repo(tmp_path / "wt", colocate=request.param == "jj").resolve()
        (path / "README.md").write_text("hello\n")
    yield path
    forget(path)


def _snap(wt: Path) -> int:
    return int(run_cli_json("snapshot", str(wt), "--run", RUN, "--node", "n")["seq"])


def _restore(seq: int) -> tuple[int, str, str]:
    done = run_cli("restore", RUN, "--node", "n", "--seq", str(seq))
    return done.returncode, done.stdout, done.stderr


def _exclude(wt: Path, name: str) -> None:
    """Ignore ``name`` without changing the tree (git's own exclude file)."""
    exclude = wt / ".git" / "info" / "exclude"
    if not exclude.parent.exists():  # non-colocated jj: its ignore rules are .gitignore only
        exclude = wt / ".gitignore"
    with exclude.open("a") as f:
        f.write(f"\n{name}\n")


# -- item 2: nothing unrecorded is overwritten ---------------------------------


def test_an_ignored_file_no_checkpoint_holds_is_never_overwritten(wt: Path) -> None:
    """The issue's repro: notes.txt (v1 at seq 1, deleted at seq 2) comes
    back as an ignored file holding PRECIOUS; restoring seq 1 must refuse."""
    (wt / "notes.txt").write_text("v1\n")
    assert _snap(wt) == 1
    (wt / "notes.txt").unlink()
    assert _snap(wt) == 2
    _exclude(wt, "notes.txt")
    (wt / "notes.txt").write_text("PRECIOUS\n")
    rc, out, err = _restore(1)
    assert rc == 7 and out == ""
    assert "restore-conflict" in err and "notes.txt" in err and len(err.splitlines()) == 1
    assert (wt / "notes.txt").read_text() == "PRECIOUS\n"


def test_every_unrecorded_path_is_named_and_nothing_is_written(wt: Path) -> None:
    for name in ("a.txt", "b.txt"):
        (wt / name).write_text("old\n")
    (wt / "README.md").write_text("one\n")
    _snap(wt)
    for name in ("a.txt", "b.txt"):
        (wt / name).unlink()
    (wt / "README.md").write_text("two\n")
    _snap(wt)
    for name in ("a.txt", "b.txt"):
        _exclude(wt, name)
        (wt / name).write_text("mine\n")
    rc, _, err = _restore(1)
    assert rc == 7 and "a.txt, b.txt" in err
    assert (wt / "README.md").read_text() == "two\n"  # refused before any write


def test_an_unrecorded_file_equal_to_the_checkpoint_is_no_conflict(wt: Path) -> None:
    (wt / "notes.txt").write_text("v1\n")
    _snap(wt)
    (wt / "notes.txt").unlink()
    _snap(wt)
    _exclude(wt, "notes.txt")
    (wt / "notes.txt").write_text("v1\n")  # nothing would be lost
    rc, _, err = _restore(1)
    assert rc == 0, err
    assert (wt / "notes.txt").read_text() == "v1\n"


# -- item 9: undo keeps modes --------------------------------------------------


MODES = {"secret.txt": 0o600, "group.txt": 0o640, "tool.sh": 0o700, "ro.txt": 0o400}


def test_restore_then_undo_keeps_the_modes_it_replaced(wt: Path) -> None:
    modes = dict(MODES)
    if os.geteuid() == 0:
        modes["locked.txt"] = 0o000  # readable only by root (see issue 8 item 4)
    for name in modes:
        (wt / name).write_text("one\n")
    assert _snap(wt) == 1
    for name, mode in modes.items():
        (wt / name).chmod(0o600)
        (wt / name).write_text("two\n")
        (wt / name).chmod(mode)
    assert _snap(wt) == 2
    rc, _, err = _restore(1)
    assert rc == 0, err
    assert (wt / "secret.txt").read_text() == "one\n"
    rc, _, err = _restore(2)  # the undo
    assert rc == 0, err
    got = {name: stat.S_IMODE(os.lstat(wt / name).st_mode) for name in modes}
    assert got == modes
    (wt / "secret.txt").chmod(0o600)
    assert (wt / "secret.txt").read_text() == "two\n"


def test_an_undo_of_deleted_files_keeps_their_modes(wt: Path) -> None:
    (wt / "README.md").write_text("one\n")
    _snap(wt)
    (wt / "private").mkdir()
    (wt / "private" / "key").write_text("k\n")
    (wt / "private" / "key").chmod(0o600)
    _snap(wt)
    assert _restore(1)[0] == 0  # deletes private/key
    assert not (wt / "private").exists()
    assert _restore(2)[0] == 0
    assert stat.S_IMODE(os.lstat(wt / "private" / "key").st_mode) == 0o600


def test_a_refusal_names_the_pre_restore_seq(wt: Path) -> None:
    (wt / "notes.txt").write_text("v1\n")
    _snap(wt)
    (wt / "notes.txt").unlink()
    (wt / "README.md").write_text("changed\n")
    _snap(wt)
    _exclude(wt, "notes.txt")
    (wt / "notes.txt").write_text("PRECIOUS\n")
    rc, _, err = _restore(1)
    rows = run_cli_json("snapshots", RUN)
    assert rc == 7 and "restore-conflict" in err
    assert f"the state before is seq {rows[-1]['seq']}" in err  # the pre-restore row


# -- item 1: the confined writer -----------------------------------------------


@pytest.fixture
def decoy(tmp_path: Path) -> Path:
    path = tmp_path / "decoy"
    path.mkdir()
    (path / "f.txt").write_text("outside\n")
    return path


def test_a_symlinked_folder_is_refused_for_every_operation(tmp_path: Path, decoy: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").symlink_to(decoy)
    with ConfinedTree(root) as tree:
        for act in (lambda: tree.write_file("a/f.txt", b"x", 0o644),
                    lambda: tree.write_file("a/new.txt", b"x", 0o644),
                    lambda: tree.write_link("a/l", b"target"),
                    lambda: tree.chmod("a/f.txt", 0o777),
                    lambda: tree.unlink("a/f.txt"),
                    lambda: tree.write_file("a/deeper/g.txt", b"x", 0o644)):
            with pytest.raises(RestoreError) as info:
                act()
            assert info.value.code == "restore-conflict" and "a" in str(info.value)
        assert tree.lstat("a/f.txt") is None
        assert not tree.rmdir("a")
        assert list(tree.files_under("a")) == []
    assert sorted(os.listdir(decoy)) == ["f.txt"]
    assert (decoy / "f.txt").read_text() == "outside\n"
    assert stat.S_IMODE(os.stat(decoy / "f.txt").st_mode) != 0o777


def test_a_link_at_the_final_name_is_replaced_not_followed(tmp_path: Path, decoy: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "f.txt").symlink_to(decoy / "f.txt")
    (root / "l").symlink_to(decoy / "f.txt")
    (root / "c").symlink_to(decoy / "f.txt")
    with ConfinedTree(root) as tree:
        tree.write_file("f.txt", b"inside\n", 0o644)
        tree.write_link("l", b"elsewhere")
        with pytest.raises(RestoreError):
            tree.chmod("c", 0o777)
        tree.unlink("c")
    assert (root / "f.txt").read_bytes() == b"inside\n" and not (root / "f.txt").is_symlink()
    assert os.readlink(root / "l") == "elsewhere"
    assert not os.path.lexists(root / "c")
    assert (decoy / "f.txt").read_text() == "outside\n"
    assert stat.S_IMODE(os.stat(decoy / "f.txt").st_mode) != 0o777


def test_more_folders_than_the_cache_holds(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    names = [f"d{i % 7}/e{i}/f.txt" for i in range(MAX_OPEN_DIRS * 3)]
    with ConfinedTree(root) as tree:
        for name in names:
            tree.write_file(name, name.encode(), 0o644)
        for name in names[::2]:
            tree.unlink(name)
            tree.prune(name.rpartition("/")[0])
    left = sorted(str(p.relative_to(root)) for p in root.rglob("f.txt"))
    assert left == sorted(names[1::2])
    assert len(list(root.glob("d*/e*"))) == len(names) // 2


def test_git_user_index_unchanged_by_a_refused_restore(tmp_path: Path) -> None:
    """A refusal changes nothing of the user's git state either."""
    wt = make_git_repo(tmp_path / "g").resolve()
    (wt / "notes.txt").write_text("v1\n")
    _snap(wt)
    (wt / "notes.txt").unlink()
    _snap(wt)
    _exclude(wt, "notes.txt")
    (wt / "notes.txt").write_text("PRECIOUS\n")
    before = git(wt, "status", "--porcelain", "--ignored").stdout
    assert _restore(1)[0] == 7
    assert git(wt, "status", "--porcelain", "--ignored").stdout == before
    forget(wt)


def test_a_jj_checkpoint_with_conflicts_is_refused_not_guessed(tmp_path: Path) -> None:
    """jj stores a conflicted commit in git as .jjconflict-* folders, which the
    confined writer must not write as files: refused, nothing changed."""
    wt = make_jj_repo(tmp_path / "c").resolve()
    (wt / "f").write_text("base\n")
    jj(wt, "commit", "-m", "base")
    base = jj(wt, "log", "-r", "@-", "--no-graph", "-T", "commit_id").stdout
    (wt / "f").write_text("a\n")
    side = jj(wt, "log", "-r", "@", "--no-graph", "-T", "change_id").stdout
    jj(wt, "new", base)
    (wt / "f").write_text("b\n")
    other = jj(wt, "log", "-r", "@", "--no-graph", "-T", "change_id").stdout
    jj(wt, "new", side, other)  # a merge with f in conflict
    assert _snap(wt) == 1
    (wt / "f").write_text("resolved\n")
    assert _snap(wt) == 2
    rc, _, err = _restore(1)
    assert rc == 7 and "restore-conflict" in err and "jj conflicts" in err
    assert (wt / "f").read_text() == "resolved\n"
