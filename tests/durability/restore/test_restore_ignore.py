"""A restore never changes what is ignored behind the user's back: a
checkpoint whose .gitignore lacks a rule of today's would make ignored files
(a secret, a node_modules) visible to the next capture.  The restore and its
dry run refuse naming them (``restore-would-unignore``), nothing is written,
no capture or remote ever holds them.  Both backends."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from durability.backends import backend_for
from durability.backends.git import forget
from durability.config import Settings
from durability.ground.errors import RestoreError
from durability.restore import apply as restore_mod
from durability.store import Store
from tests.durability.remote.remotekit import add_remote, bare_remote, quick_states
from tests.helpers import (
    commit_manifest,
    git,
    make_git_repo,
    make_jj_repo,
    run_cli,
    run_cli_json,
    start_service,
    tree_manifest,
    wait_for,
)

RUN = "run-ign"
CODE = "restore-would-unignore"
ENV = "SECRET=x\n"


def _snap(wt: Path) -> int:
    return int(run_cli_json("snapshot", str(wt), "--run", RUN, "--node", "n")["seq"])


def _restore(seq: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("restore", RUN, "--node", "n", "--seq", str(seq), *extra)


def _recorded_paths(wt: Path) -> set[str]:
    """Every path any checkpoint of the run holds."""
    with Store(Settings.from_env().database) as store:
        rows = store.checkpoints(RUN)
    return {p for row in rows for p in commit_manifest(wt, row.commit_id)}


def _refused(done: subprocess.CompletedProcess[str], *named: str) -> None:
    assert done.returncode == 7, done.stderr
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert f"durability: {CODE}:" in done.stderr
    for name in named:
        assert name in done.stderr


def _ignore_later(wt: Path, rule: str) -> None:
    with (wt / ".gitignore").open("a") as f:
        f.write(f"{rule}\n")


def _env_ignored_after_seq_1(wt: Path) -> None:
    """The issue's repro: seq 1 with no rule for .env; then .env ignored
    and written, and seq 2 (which rightly leaves it out)."""
    assert _snap(wt) == 1
    _ignore_later(wt, ".env")
    (wt / ".env").write_text(ENV)
    assert _snap(wt) == 2


def _new_repo(kind: str, path: Path) -> Path:
    """A plain git repository, or a colocated jj one, with README.md."""
    if kind == "git":
        return make_git_repo(path).resolve()
    wt = make_jj_repo(path).resolve()
    (wt / "README.md").write_text("hello\n")
    return wt


def test_a_secret_ignored_after_the_checkpoint_is_never_unignored(work: Path) -> None:
    """The issue's repro: seq 1 has no .gitignore rule, seq 2 ignores .env."""
    _env_ignored_after_seq_1(work)
    before = tree_manifest(work)
    _refused(_restore(1, "--dry-run"), ".env")
    _refused(_restore(1), ".env")
    # A --path restore of the .gitignore alone is the same change.
    _refused(_restore(1, "--path", ".gitignore"), ".env")
    assert tree_manifest(work) == before  # nothing written, the secret still on disk
    (work / "README.md").write_text("more work\n")
    _snap(work)
    assert ".env" not in _recorded_paths(work)
    # A restore that leaves the .gitignore alone is not refused.
    done = _restore(1, "--path", "README.md")
    assert done.returncode == 0, done.stderr
    assert ".env" not in _recorded_paths(work)
    assert (work / ".env").read_text() == ENV


def test_with_the_files_moved_away_the_restore_and_its_undo_are_exact(work: Path) -> None:
    """The way on the refusal names: move the files away, restore, undo."""
    _env_ignored_after_seq_1(work)
    before = tree_manifest(work)
    (work / ".env").rename(work.parent / "env.saved")
    done = run_cli_json("restore", RUN, "--node", "n", "--seq", "1", "--json")
    assert not (work / ".gitignore").exists()
    undo = _restore(int(done["pre_restore"]["seq"]))
    assert undo.returncode == 0, undo.stderr
    (work.parent / "env.saved").rename(work / ".env")
    assert tree_manifest(work) == before
    _snap(work)
    assert ".env" not in _recorded_paths(work)


def _node_modules(wt: Path, count: int = 20_000) -> None:
    """``count`` small files in 200 folders, written without a subprocess."""
    per = count // 200
    data = b"module.exports = 1;\n"
    for d in range(200):
        folder = wt / "node_modules" / f"pkg{d:03}"
        os.makedirs(folder)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for i in range(per):
                f = os.open(f"f{i}.js", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                os.write(f, data)
                os.close(f)
        finally:
            os.close(fd)


@pytest.mark.slow
def test_twenty_thousand_ignored_files_are_never_swept_in(work: Path) -> None:
    assert _snap(work) == 1
    _ignore_later(work, "node_modules/")
    _node_modules(work)
    assert _snap(work) == 2
    started = time.monotonic()
    done = _restore(1)
    took = time.monotonic() - started
    _refused(done, "node_modules/pkg000/f0.js", "and 19995 more")
    assert (work / ".gitignore").read_text() == "node_modules/\n"
    assert sum(len(files) for _, _, files in os.walk(work / "node_modules")) == 20_000
    _snap(work)
    assert not any(p.startswith("node_modules/") for p in _recorded_paths(work))
    assert took < 60, took


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["git", "jj"])
def test_the_secret_never_reaches_a_remote(kind: str, tmp_path: Path) -> None:
    """With a remote: the refused restore, then captures, then replication;
    no commit the remote holds has .env."""
    wt = _new_repo(kind, tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(wt, "backup", remote.as_uri())
    try:
        _env_ignored_after_seq_1(wt)
        _refused(_restore(1), ".env")
        (wt / "README.md").write_text("later\n")
        _snap(wt)
        svc = start_service(tmp_path)
        try:
            wait_for(lambda: all(s.get("backup") == "pushed" for s in quick_states(RUN)),
                     timeout=60)
        finally:
            assert svc.stop() == 0
        commits = git(remote, "rev-list", "--all").stdout.split()
        assert len(commits) >= 3
        for commit in commits:
            names = git(remote, "ls-tree", "-r", "--name-only", commit).stdout.split()
            assert ".env" not in names, commit
            assert not any("SECRET" in git(remote, "show", f"{commit}:{n}").stdout
                           for n in names if n.endswith("README.md"))
    finally:
        forget(wt)


@pytest.mark.parametrize("backend", ["git", "jj"])
def test_a_verify_failure_names_the_paths(backend: str, tmp_path: Path) -> None:
    """The check after a restore names where the tree differs (it named
    only two tree ids)."""
    wt = _new_repo(backend, tmp_path / "wt")
    try:
        assert _snap(wt) == 1
        settings = Settings.from_env()
        with Store(settings.database) as store:
            target = restore_mod.find_checkpoint(store, run_id=RUN, node_id="n", seq=1)
        (wt / "README.md").write_text("changed behind the restore's back\n")
        (wt / "extra.txt").write_text("new\n")
        backend_ = backend_for(wt, timeout_s=60)
        want = backend_.tree_id(wt, target.commit_id)
        with pytest.raises(RestoreError) as raised:
            restore_mod._verify(backend_, wt, target, want)
        assert raised.value.code == "restore-verify-failed"
        assert "README.md" in raised.value.message and "extra.txt" in raised.value.message
    finally:
        forget(wt)



def _linked(kind: str, tmp_path: Path, *, shared: str = "", own: str = "") -> Path:
    """A linked git worktree (``git worktree add``; for jj, a colocated jj
    repo made inside one) with ``shared`` in the repository's shared
    ``info/exclude`` (the one git reads) and ``own`` in the linked
    worktree's own git dir's (the one jj 0.46 reads there)."""
    main = make_git_repo(tmp_path / "main").resolve()
    wt = (tmp_path / "linked").resolve()
    git(main, "worktree", "add", "-q", str(wt), "-b", "linked")
    for git_dir, rules in ((main / ".git", shared), (main / ".git" / "worktrees" / "linked", own)):
        (git_dir / "info").mkdir(exist_ok=True)
        (git_dir / "info" / "exclude").write_text(f"{rules}\n")
    if kind == "jj":
        make_jj_repo(wt)
    return wt


def _excluded(kind: str, name: str) -> dict[str, str]:
    """The exclude file ``kind``'s captures read in a linked worktree."""
    return {"shared": name} if kind == "git" else {"own": name}


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_file_the_exclude_keeps_ignored_is_not_a_refusal(kind: str, tmp_path: Path) -> None:
    """In a linked worktree, .env is ignored by info/exclude before and after:
    a restore to a checkpoint whose .gitignore lacks the rule leaves it so."""
    wt = _linked(kind, tmp_path, **_excluded(kind, ".env"))
    try:
        _env_ignored_after_seq_1(wt)
        done = _restore(1, "--dry-run")
        assert done.returncode == 0, done.stderr
        done = _restore(1)
        assert done.returncode == 0, done.stderr
        assert not (wt / ".gitignore").exists()
        assert (wt / ".env").read_text() == ENV
        _snap(wt)
        assert ".env" not in _recorded_paths(wt)
    finally:
        forget(wt)


def test_jj_in_a_linked_worktree_follows_its_own_exclude(tmp_path: Path) -> None:
    """jj does not read the shared info/exclude there: a file only it names
    is captured, so a restore that drops the .gitignore rule for .env would
    let jj take .env in, and is refused."""
    wt = _linked("jj", tmp_path, shared=".env\nshared-only.txt")
    try:
        (wt / "shared-only.txt").write_text("x\n")
        _env_ignored_after_seq_1(wt)
        assert "shared-only.txt" in _recorded_paths(wt)
        _refused(_restore(1, "--dry-run"), ".env")
        _refused(_restore(1), ".env")
        assert ".env" not in _recorded_paths(wt)
    finally:
        forget(wt)
