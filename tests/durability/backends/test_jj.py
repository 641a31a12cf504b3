"""The jj backend: finding jj, its version, and snapshots of colocated,
non-colocated and secondary workspaces (contract 1, the pin of contract 4: docs/DESIGN.md)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from durability.backends import resolve_worktree
from durability.backends.jj import PIN_PREFIX, JjBackend, find_jj, git_dir, repo_dir
from durability.ground.errors import (
    CaptureError,
    JjFailed,
    JjMissing,
    JjTooOld,
    NotAJjRepo,
    WorktreeMissing,
)
from tests.helpers import GatedJj, git, jj, jj_at, jj_path, make_jj_repo, write_script


def _fake_jj(folder: Path, version_line: str, *, code: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_script(folder / "jj", f"#!/bin/sh\necho '{version_line}'\nexit {code}\n")


def _backend() -> JjBackend:
    return JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)


# -- finding jj ---------------------------------------------------------------


def test_durability_jj_wins_over_path(tmp_path: Path) -> None:
    explicit = _fake_jj(tmp_path / "explicit", "jj 0.31.0")
    on_path = _fake_jj(tmp_path / "onpath", "jj 0.40.1")
    found = find_jj({"DURABILITY_JJ": str(explicit), "PATH": str(on_path.parent)})
    assert (found.path, found.version) == (str(explicit), (0, 31, 0))


def test_path_wins_over_the_venv(tmp_path: Path) -> None:
    on_path = _fake_jj(tmp_path / "onpath", "jj 0.40.1")
    found = find_jj({"PATH": f"{tmp_path / 'empty'}:{on_path.parent}"})
    assert found.path == str(on_path)
    assert found.version == (0, 40, 1)
    assert found.version_text == "0.40.1"


def test_jj_beside_python_when_nothing_else(tmp_path: Path) -> None:
    beside = Path(sys.executable).parent / "jj"
    assert beside.exists(), "make installs jj into the venv"
    found = find_jj({"PATH": str(tmp_path)})
    assert found.path == str(beside)
    assert found.version[:2] >= (0, 30)


@pytest.mark.parametrize(("line", "expected"), [
    ("jj 0.46.0", (0, 46, 0)),
    ("jj 0.30.0-a1b2c3d4e5f6", (0, 30, 0)),
    ("jj 1.2.3+git", (1, 2, 3)),
])
def test_version_parsing(tmp_path: Path, line: str, expected: tuple[int, int, int]) -> None:
    fake = _fake_jj(tmp_path / "v", line)
    assert find_jj({"DURABILITY_JJ": str(fake)}).version == expected


def test_too_old_jj_is_refused(tmp_path: Path) -> None:
    fake = _fake_jj(tmp_path / "old", "jj 0.29.9")
    with pytest.raises(JjTooOld, match=r"0\.29\.9.*>= 0\.30") as info:
        find_jj({"DURABILITY_JJ": str(fake)})
    assert info.value.code == "jj-too-old"


@pytest.mark.parametrize(("line", "code"), [("no version here", 0), ("jj 0.46.0", 3)])
def test_unusable_version_output_is_jj_missing(tmp_path: Path, line: str, code: int) -> None:
    fake = _fake_jj(tmp_path / "odd", line, code=code)
    with pytest.raises(JjMissing):
        find_jj({"DURABILITY_JJ": str(fake)})


def test_missing_jj(tmp_path: Path) -> None:
    with pytest.raises(JjMissing, match="DURABILITY_JJ") as info:
        find_jj({"DURABILITY_JJ": str(tmp_path / "nope")})
    assert info.value.code == "jj-missing"
    not_executable = tmp_path / "jj"
    not_executable.write_text("#!/bin/sh\necho jj 0.46.0\n")
    with pytest.raises(JjMissing):
        find_jj({"DURABILITY_JJ": str(not_executable)})


def test_a_replaced_binary_is_looked_at_again(tmp_path: Path) -> None:
    fake = _fake_jj(tmp_path / "r", "jj 0.31.0")
    assert find_jj({"DURABILITY_JJ": str(fake)}).version == (0, 31, 0)
    fake.write_text("#!/bin/sh\necho 'jj 0.20.0'\n")
    os.utime(fake, (1, 1))  # a new mtime: the cache must not answer for it
    with pytest.raises(JjTooOld):
        find_jj({"DURABILITY_JJ": str(fake)})


# -- snapshots ------------------------------------------------------------------


def _check_snapshot(worktree: Path, store_git: Path) -> None:
    (worktree / "new.txt").write_text("fresh\n")
    snap = _backend().snapshot(worktree)
    assert snap.commit_id == jj_at(worktree)
    change = jj(worktree, "log", "-r", "@", "--no-graph", "-T", "change_id",
                "--ignore-working-copy").stdout.strip()
    assert snap.change_id == change
    op = jj(worktree, "op", "log", "-n1", "--no-graph", "-T", "id",
            "--ignore-working-copy").stdout.strip()
    assert snap.operation_id == op
    ref = git(store_git, "rev-parse", PIN_PREFIX + snap.commit_id).stdout.strip()
    assert ref == snap.commit_id
    files = git(store_git, "ls-tree", "-r", "--name-only", snap.commit_id).stdout.split()
    assert "new.txt" in files
    # Unchanged tree: the same commit again.
    assert _backend().snapshot(worktree).commit_id == snap.commit_id


def test_snapshot_of_a_colocated_repo(repo: Path) -> None:
    assert git_dir(repo) == repo / ".git"
    _check_snapshot(repo, repo / ".git")
    # Colocated: HEAD, the index and branches are untouched by the pin.
    assert "refs/durability/" not in git(repo, "branch", "-a").stdout


def test_snapshot_of_a_non_colocated_repo(tmp_path: Path) -> None:
    path = make_jj_repo(tmp_path / "plain", colocate=False)
    assert not (path / ".git").exists()
    store = git_dir(path)
    assert store.is_relative_to(path / ".jj")
    _check_snapshot(path, store)


def test_snapshot_of_a_secondary_workspace(tmp_path: Path) -> None:
    main = make_jj_repo(tmp_path / "main", colocate=False)
    (main / "shared.txt").write_text("in main\n")
    jj(main, "workspace", "add", "--no-colocate", "--name", "second", str(tmp_path / "second"))
    second = tmp_path / "second"
    assert repo_dir(second) == repo_dir(main).resolve()
    assert git_dir(second) == git_dir(main)
    _check_snapshot(second, git_dir(main))
    # Each workspace has its own @.
    assert _backend().snapshot(main).commit_id != _backend().snapshot(second).commit_id


def test_snapshot_from_a_subfolder_resolves_the_workspace_root(repo: Path) -> None:
    sub = repo / "a" / "b"
    sub.mkdir(parents=True)
    assert resolve_worktree(sub) == repo.resolve()
    link = repo.parent / "via-link"
    link.symlink_to(sub)
    assert resolve_worktree(link) == repo.resolve()


def test_not_a_jj_repo_and_missing_worktree(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(CaptureError) as info:
        resolve_worktree(plain)
    # not-a-repo once plain git worktrees have their own backend
    assert info.value.code in {"not-a-jj-repo", "not-a-repo"}
    with pytest.raises(WorktreeMissing):
        resolve_worktree(tmp_path / "absent")
    with pytest.raises(WorktreeMissing):
        _backend().snapshot(tmp_path / "absent")
    with pytest.raises(NotAJjRepo):
        _backend().snapshot(plain)


def test_broken_working_copy_state_is_jj_failed(repo: Path) -> None:
    state = repo / ".jj" / "working_copy" / "checkout"
    state.write_bytes(b"\xff\x00garbage")
    with pytest.raises(JjFailed, match="jj log failed") as info:
        _backend().snapshot(repo)
    assert info.value.code == "jj-failed"


@pytest.mark.parametrize("colocate", [True, False])
def test_jj_log_shows_none_of_our_pinned_snapshots(tmp_path: Path, colocate: bool) -> None:
    """The pins under refs/durability/jj/ are not refs jj imports (it reads
    refs/heads, refs/remotes and refs/tags): every pinned snapshot but the
    working-copy commit, which is jj's own, stays hidden in ``jj log``, after
    an import and jj's own gc too (decision 0049)."""
    worktree = make_jj_repo(tmp_path / "w", colocate=colocate).resolve()
    snaps = []
    for i in range(4):
        (worktree / "a.txt").write_text(f"v{i}\n")
        snaps.append(_backend().snapshot(worktree).commit_id)
    assert len(set(snaps)) == 4
    if colocate:
        jj(worktree, "git", "import")
    jj(worktree, "util", "gc", "--expire=now")
    shown = set(jj(worktree, "log", "-r", "all()", "--no-graph", "-T",
                   'commit_id ++ "\\n"').stdout.split())
    assert shown == {jj_at(worktree), "0" * 40}
    assert not shown & set(snaps[:-1])
    assert snaps[-1] == jj_at(worktree)  # @ itself: jj's commit, not a side branch of ours
    pinned = [r for r in git(git_dir(worktree), "for-each-ref", "--format=%(refname)").stdout
              .split() if r.startswith(PIN_PREFIX)]
    assert len(pinned) == 4  # still pinned for contract 4, just not shown


def test_a_worktree_deleted_while_jj_runs_gets_no_pin_and_no_mark(tmp_path: Path) -> None:
    """An ``rm -rf`` that reaches the repository while jj snapshots: the
    capture writes nothing more of ours there (the pin's ref folders and the
    swap check's mark would land in folders the delete is emptying, its
    "Directory not empty") and records nothing."""
    worktree = make_jj_repo(tmp_path / "w").resolve()
    (worktree / "a.txt").write_text("one\n")
    _backend().snapshot(worktree)  # the pin and mark folders exist from here on
    pins = worktree / ".git" / "refs" / "durability" / "jj"
    mark = worktree / ".jj" / "durability" / "swap-checked"
    before = (sorted(os.listdir(pins)), mark.read_bytes())
    gated = GatedJj(tmp_path / "gated", when="after")  # jj has snapshotted: the gate holds it
    gated.close()
    backend = JjBackend(find_jj({"DURABILITY_JJ": str(gated.path)}), timeout_s=120)
    (worktree / "a.txt").unlink()  # the delete's first file, then its repository's
    raised: list[BaseException] = []

    def capture() -> None:
        try:
            backend.snapshot(worktree)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=capture)
    thread.start()
    try:
        gated.wait_held()
        (worktree / ".git" / "config").unlink()
    finally:
        gated.open()
        thread.join(120)
    assert len(raised) == 1 and isinstance(raised[0], WorktreeMissing), raised
    assert ".git/config is gone" in str(raised[0])
    assert (sorted(os.listdir(pins)), mark.read_bytes()) == before
