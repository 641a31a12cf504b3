"""``restore --from-remote`` on another machine: a fresh clone of the project
or an empty folder, with a store that has never heard of the run
(docs/how-to/remote.md).  Machine A captures and pushes (the service's replicator,
run once in this process); machine B is the installed CLI with its own state
folder, socket and spool."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from durability.config import Settings
from durability.remote.replicator import Replicator
from durability.store import Store
from tests.durability.remote.remotekit import (
    KEY,
    add_remote,
    bare_remote,
    capture,
    own_store,
    remote_refs,
)
from tests.helpers import cli, git, make_git_repo, make_jj_repo, tree_manifest


def _push_all() -> None:
    settings = Settings.from_env()
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() > 0


def _machine_b(tmp_path: Path) -> dict[str, str]:
    other = tmp_path / "machine-b"
    other.mkdir()
    return own_store({**os.environ, "DURABILITY_HOME": str(other / "state"),
                      "DURABILITY_SPOOL_DIR": str(other / "spool"),
                      "DURABILITY_SOCKET": str(other / "s.sock")})


def _history(repo: Path) -> list[tuple[str, dict[str, tuple[str, bool, bytes]]]]:
    """Two checkpoints that differ in a file added, one changed, one deleted."""
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("print('one')\n")
    (repo / "gone.txt").write_text("deleted later\n")
    first = capture(repo, "first")
    seen = [(first, tree_manifest(repo))]
    (repo / "src" / "app.py").write_text("print('two')\n")
    (repo / "gone.txt").unlink()
    (repo / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (repo / "run.sh").chmod(0o755)
    seen.append((capture(repo, "second"), tree_manifest(repo)))
    return seen


@pytest.mark.parametrize(("backend", "target"), [
    ("git", "fresh-clone"), ("git", "empty-folder"), ("jj", "fresh-clone"),
    ("jj", "empty-folder"),
    # A jj repository of its own on B (not colocated: the pins land in the
    # git store behind jj).
    ("jj", "jj-repo"),
])
def test_restore_from_remote_on_another_machine(tmp_path: Path, backend: str,
                                                target: str) -> None:
    repo = (make_git_repo(tmp_path / "a") if backend == "git"
            else make_jj_repo(tmp_path / "a"))
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    history = _history(repo)
    _push_all()

    b_env = _machine_b(tmp_path)
    there = tmp_path / "b"
    if target == "fresh-clone":
        git(tmp_path, "clone", "-q", str(repo), str(there))
    elif target == "jj-repo":
        make_jj_repo(there, colocate=False)
    else:
        there.mkdir()
    add_remote(there, "backup", remote.as_uri(), env=b_env)
    for seq, (commit, files) in enumerate(history, start=1):
        done = cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
                   "--seq", str(seq), "--json", env=b_env)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["restored"] == {"seq": seq, "commit_id": commit}
        assert tree_manifest(there) == files
    # B's record now holds the run as A captured it, and nothing of it is due
    # to go back to the remote; B's pre-restore checkpoints are runs of their
    # own (issue 15: never the next seq of A's attempt).
    rows = json.loads(cli("snapshots", KEY.run_id, "--json", env=b_env).stdout)
    assert [r["commit_id"] for r in rows] == [c for c, _ in history]
    assert all(r["worktree"] == str(there) for r in rows)
    assert [r["replicated"] for r in rows] == [{"backup": "pushed"}] * 2
    runs = json.loads(cli("sessions", "--worktree", str(there), "--json", env=b_env).stdout)
    own = sorted(r["run_id"] for r in runs if r["run_id"] != KEY.run_id)
    assert len(own) == 2 and all(r.startswith(f"{KEY.run_id}.pre-restore.") for r in own)
    assert [r["sources"] for r in runs if r["run_id"] in own] == ["pre-restore"] * 2


def test_restore_from_remote_on_a_machine_sharing_the_store(tmp_path: Path) -> None:
    """A fleet's machine B shares machine A's store (PostgreSQL, what it is
    for; here also a SQLite state folder two machine ids share): B's record
    holds none of A's worktree, so it fetches the run from the remote as any
    other machine does.  The remote's entries carry request ids already on
    record (A's rows): B records copies of its own, restores, and A's record
    stays as it was."""
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    history = _history(repo)
    _push_all()
    a_rows = json.loads(cli("snapshots", KEY.run_id, "--json").stdout)
    b_env = {**os.environ, "DURABILITY_HOST_ID": "machine-b"}
    there = tmp_path / "b"
    there.mkdir()
    add_remote(there, "backup", remote.as_uri(), env=b_env)
    for seq, (commit, files) in enumerate(history, start=1):
        done = cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
                   "--seq", str(seq), "--json", env=b_env)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["restored"] == {"seq": seq, "commit_id": commit}
        assert tree_manifest(there) == files
    rows = json.loads(cli("snapshots", KEY.run_id, "--json", env=b_env).stdout)
    assert [(r["seq"], r["commit_id"], r["worktree"], r["replicated"]) for r in rows] == [
        (seq, commit, str(there), {"backup": "pushed"})
        for seq, (commit, _) in enumerate(history, start=1)]
    assert json.loads(cli("snapshots", KEY.run_id, "--json").stdout) == a_rows


def test_a_run_the_remote_does_not_hold_is_not_found(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "one")
    _push_all()
    there = tmp_path / "b"
    there.mkdir()
    b_env = _machine_b(tmp_path)
    add_remote(there, "backup", remote.as_uri(), env=b_env)
    done = cli("restore", "other-run", "--from-remote", "backup", "--worktree", str(there),
               env=b_env)
    assert done.returncode == 3 and done.stderr.startswith("durability: not-found: ")
    assert list(there.iterdir()) == [there / ".git"]  # nothing written


def test_an_unreachable_remote_is_remote_failed_exit_8(tmp_path: Path) -> None:
    there = tmp_path / "b"
    there.mkdir()
    add_remote(there, "backup", (tmp_path / "missing.git").as_uri())
    done = cli("restore", "run-r", "--from-remote", "backup", "--worktree", str(there))
    assert done.returncode == 9, done.stderr
    assert done.stderr.startswith("durability: remote-failed: ")
    assert done.stderr.count("\n") == 1


def test_a_remote_not_named_for_the_folder_is_not_found(tmp_path: Path) -> None:
    there = make_git_repo(tmp_path / "b")
    done = cli("restore", "run-r", "--from-remote", "backup", "--worktree", str(there))
    assert done.returncode == 3 and "no remote 'backup'" in done.stderr


def test_a_manifest_entry_naming_a_foreign_ref_is_ignored(tmp_path: Path) -> None:
    """The remote is data from outside: an entry whose pin is not one of our
    refs (here refs/heads/main) is never fetched nor recorded."""
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "one")
    _push_all()
    # Rewrite the remote's manifest: the one entry now names refs/heads/main.
    [ref] = [r for r in remote_refs(remote) if r.startswith("refs/durability/manifests/")]
    name = git(remote, "ls-tree", "--name-only", ref).stdout.split()[0]
    entry = json.loads(git(remote, "cat-file", "blob", f"{ref}:{name}").stdout)
    entry["ref"] = "refs/heads/main"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(entry))
    blob = git(remote, "hash-object", "-w", str(forged)).stdout.strip()
    tree_id = subprocess.run(["git", "-C", str(remote), "mktree"], input=f"100644 blob {blob}\t"
                             f"{name}\n", capture_output=True, text=True, check=True).stdout.strip()
    commit = git(remote, "commit-tree", tree_id, "-m", "forged").stdout.strip()
    git(remote, "update-ref", ref, commit)
    there = tmp_path / "b"
    there.mkdir()
    b_env = _machine_b(tmp_path)
    add_remote(there, "backup", remote.as_uri(), env=b_env)
    done = cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
               env=b_env)
    assert done.returncode == 3 and "lists no checkpoints" in done.stderr


def test_two_worktrees_share_a_remote_without_overwriting_each_other(tmp_path: Path) -> None:
    """Each worktree pushes its own manifest: the second push is not refused
    as a non-fast-forward of the first's, and both runs can be restored."""
    from durability.store import AttemptKey

    remote = bare_remote(tmp_path / "backup.git")
    made = {}
    for run, name in (("run-one", "one"), ("run-two", "two")):
        repo = make_git_repo(tmp_path / name)
        add_remote(repo, "backup", remote.as_uri())
        (repo / "which.txt").write_text(f"{name}\n")
        made[run] = capture(repo, name, key=AttemptKey(run, "agent", 0, 1))
        _push_all()
    b_env = _machine_b(tmp_path)
    for run in made:
        there = tmp_path / f"b-{run}"
        there.mkdir()
        add_remote(there, "backup", remote.as_uri(), env=b_env)
        out = json.loads(cli("restore", run, "--from-remote", "backup", "--worktree",
                             str(there), "--json", env=b_env).stdout)
        assert out["restored"]["commit_id"] == made[run]
        assert (there / "which.txt").read_text() == f"{run.split('-')[1]}\n"
