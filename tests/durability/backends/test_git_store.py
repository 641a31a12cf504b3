"""The private checkpoint store of the git backend (decision 0049): the
user's git tools see nothing of ours, the user's own gc, repack and fsck
neither break a checkpoint nor report one, a clone carries nothing of ours,
and checkpoints an earlier toolkit left in the user's repository move in.

Real repositories and the real git program; every checkpoint is read back
through ``GitBackend`` (restore) or the store, never assumed.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget
from durability.backends.git_commit import PIN_PREFIX, attempt_ref, commit_checkpoint
from durability.backends.git_store import STORE_NAME, migrate, open_store, store_path
from durability.store import AttemptKey
from tests.helpers import checkpoints, git, make_git_repo

KEY = AttemptKey("run-store", "node", 0, 1)


def _stamp(key: AttemptKey = KEY) -> Stamp:
    return Stamp(key=key, source="manual", request_ids=(f"req-{uuid.uuid4()}",))


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo").resolve()
    yield path
    forget(path)


def _files(worktree: Path, commit_id: str) -> dict[str, bytes]:
    """Every file of a checkpoint, read from the store."""
    repo = checkpoints(worktree)
    found: dict[str, bytes] = {}

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for e in tree:
            obj = repo[e.id]
            if isinstance(obj, pygit2.Tree):
                walk(obj, prefix + e.name + "/")
            else:
                found[prefix + str(e.name)] = obj.peel(pygit2.Blob).data

    walk(repo[commit_id].peel(pygit2.Commit).tree, "")
    return found


def _user_gc(worktree: Path) -> None:
    """Everything a user may run to clean up, at its most eager."""
    git(worktree, "reflog", "expire", "--expire=now", "--all")
    git(worktree, "gc", "-q", "--prune=now")
    git(worktree, "repack", "-adq")
    git(worktree, "prune", "--expire=now")


def _store_fsck(worktree: Path) -> str:
    done = subprocess.run(["git", "--git-dir", str(checkpoints(worktree).path), "fsck",
                           "--strict", "--no-dangling", "--no-progress"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                     if "HEAD points to an unborn branch" not in line)


def _session(worktree: Path) -> list[str]:
    """Captures across two attempts, a restore (with its pre-restore modes
    ref), and a scratch capture."""
    backend = GitBackend()
    commits = []
    for i in range(4):
        (worktree / f"f{i}.txt").write_text(f"v{i}\n")
        (worktree / "run.sh").write_text(f"#!/bin/sh\necho {i}\n")
        (worktree / "run.sh").chmod(0o755 if i % 2 else 0o644)
        key = KEY if i < 2 else AttemptKey("run-store", "node", 0, 2)
        commits.append(backend.snapshot(worktree, [_stamp(key)]).commit_id)
    backend.restore(worktree, commits[0], pre_restore=commits[-1])
    commits.append(backend.snapshot(worktree, [_stamp()]).commit_id)
    return commits


def test_the_users_git_tools_show_nothing_of_ours(grepo: Path) -> None:
    before = {cmd: git(grepo, *cmd.split()).stdout for cmd in
              ("log --all --oneline", "for-each-ref", "branch -a", "rev-parse --all",
               "show-ref", "stash list", "count-objects", "ls-files --stage")}
    commits = _session(grepo)
    for cmd, out in before.items():
        assert git(grepo, *cmd.split()).stdout == out, cmd  # gitk --all reads rev-parse --all
    fsck = git(grepo, "fsck", "--strict", "--no-progress")
    assert (fsck.stdout, fsck.stderr) == ("", "")  # no dangling checkpoint either
    for c in commits:
        assert git(grepo, "cat-file", "-e", c, check=False).returncode != 0
    store = checkpoints(grepo)
    assert {r for r in store.references if r.startswith(PIN_PREFIX)} == {
        attempt_ref(_stamp()), attempt_ref(_stamp(AttemptKey("run-store", "node", 0, 2)))}


def test_the_users_gc_keeps_a_blob_only_their_store_had(grepo: Path, tmp_path: Path) -> None:
    """A blob the user staged (so git wrote it to their store before our
    capture found it there), then unstaged and deleted: their gc drops it
    from their store; the checkpoint keeps its own copy.  Once taken by the
    first capture of a process (their store linked in), once by a later one
    (the changed paths' objects copied)."""
    backend = GitBackend()
    (grepo / "first.txt").write_text("staged before the first capture\n")
    git(grepo, "add", "first.txt")
    first = backend.snapshot(grepo, [_stamp()]).commit_id
    (grepo / "later.txt").write_text("staged before a later capture\n")
    git(grepo, "add", "later.txt")
    later = backend.snapshot(grepo, [_stamp()]).commit_id
    git(grepo, "rm", "-q", "--cached", "first.txt", "later.txt")
    (grepo / "first.txt").unlink()
    (grepo / "later.txt").unlink()
    _user_gc(grepo)
    blob = str(pygit2.hash(b"staged before a later capture\n"))
    assert git(grepo, "cat-file", "-e", blob, check=False).returncode != 0  # gone from theirs
    forget(grepo)  # a new process: nothing kept open
    assert _files(grepo, later)["later.txt"] == b"staged before a later capture\n"
    assert _files(grepo, first)["first.txt"] == b"staged before the first capture\n"
    assert _store_fsck(grepo) == ""
    GitBackend().restore(grepo, later, pre_restore=GitBackend().snapshot(grepo).commit_id)
    assert (grepo / "later.txt").read_text() == "staged before a later capture\n"


def test_the_users_rewritten_history_stays_in_the_checkpoints(grepo: Path) -> None:
    """A commit the user drops (reset --hard, reflogs expired, gc --prune=now,
    repack -ad) was a checkpoint's parent and held its files: the store
    keeps the commit and its tree."""
    (grepo / "doomed.txt").write_text("committed, then rewritten away\n")
    git(grepo, "add", "doomed.txt")
    git(grepo, "commit", "-q", "-m", "doomed")
    doomed = git(grepo, "rev-parse", "HEAD").stdout.strip()
    backend = GitBackend()
    backend.snapshot(grepo, [_stamp()])  # links their store in (first in this process)
    (grepo / "notes.txt").write_text("after\n")
    git(grepo, "add", "notes.txt")
    git(grepo, "commit", "-q", "-m", "more")  # a new HEAD, loose in their store
    on_new_head = backend.snapshot(grepo, [_stamp(AttemptKey("run-store", "node", 0, 7))])
    git(grepo, "reset", "-q", "--hard", "HEAD~2")
    _user_gc(grepo)
    assert git(grepo, "cat-file", "-e", doomed, check=False).returncode != 0
    forget(grepo)
    store = checkpoints(grepo)
    parent = store[on_new_head.commit_id].peel(pygit2.Commit).parents[0]
    assert parent.parents[0].id == pygit2.Oid(hex=doomed)
    assert _files(grepo, on_new_head.commit_id)["doomed.txt"] == (
        b"committed, then rewritten away\n")
    assert _store_fsck(grepo) == ""  # every commit's whole history is there


def test_a_clone_carries_nothing_of_ours_and_works(grepo: Path, tmp_path: Path) -> None:
    _session(grepo)
    for how, source in (("local", str(grepo)), ("no-local", grepo.as_uri()),
                        ("mirror", str(grepo))):
        target = tmp_path / f"clone-{how}"
        args = ["--mirror"] if how == "mirror" else (["--no-local"] if how == "no-local" else [])
        subprocess.run(["git", "clone", "-q", *args, source, str(target)], check=True,
                       capture_output=True, timeout=120)
        git_dir = target if how == "mirror" else target / ".git"
        assert not (git_dir / "durability").exists(), how
        refs = subprocess.run(["git", "--git-dir", str(git_dir), "for-each-ref"],
                              capture_output=True, text=True, check=True).stdout
        assert "durability" not in refs, how
        fsck = subprocess.run(["git", "--git-dir", str(git_dir), "fsck", "--strict",
                               "--no-progress"], capture_output=True, text=True, check=False)
        assert (fsck.returncode, fsck.stdout, fsck.stderr) == (0, "", ""), how


def test_a_copied_repository_borrows_from_its_own_copy(grepo: Path, tmp_path: Path) -> None:
    """The store's alternates path is relative: ``cp -r`` of a repository
    gives a store that reads the copy's objects, not the original's."""
    import shutil

    commits = _session(grepo)
    copy = tmp_path / "copy"
    shutil.copytree(grepo, copy, symlinks=True)
    shutil.rmtree(grepo)
    assert _files(copy, commits[-1])["f0.txt"] == b"v0\n"
    assert (store_path(copy / ".git") / "objects" / "info" / "alternates").read_text() == (
        "../../../objects\n")


# -- checkpoints an earlier toolkit kept in the user's repository ------------------------


def _old_layout(worktree: Path) -> tuple[list[str], pygit2.Oid]:
    """Checkpoints as the previous toolkit wrote them: commits in the user's
    store, pinned under the user's refs/durability/ (with a modes ref)."""
    repo = pygit2.Repository(str(worktree))
    commits = []
    for i in range(3):
        (worktree / "work.txt").write_text(f"old {i}\n")
        git(worktree, "add", "-A")
        tree = pygit2.Oid(hex=git(worktree, "write-tree").stdout.strip())
        commits.append(commit_checkpoint(repo, tree, _stamp()))
    git(worktree, "reset", "-q")
    modes = repo.create_blob(b'{"modes": {"work.txt": 420}, "v": 1}')
    repo.references.create(f"refs/durability/modes/{commits[0]}", modes)
    git(worktree, "pack-refs", "--all")  # some packed, as a user's gc leaves them
    repo.references.create("refs/durability/git/loose-one", pygit2.Oid(hex=commits[1]))
    return commits, modes


def test_earlier_checkpoints_move_into_the_store_on_first_use(grepo: Path) -> None:
    commits, modes = _old_layout(grepo)
    git(grepo, "update-ref", "refs/durability/jj/keep", commits[0])  # not ours to move
    assert "refs/durability/git/" in git(grepo, "for-each-ref").stdout
    backend = GitBackend()
    assert backend.tree_id(grepo, commits[2])  # first use: moved
    user_refs = git(grepo, "for-each-ref", "--format=%(refname)").stdout.split()
    assert [r for r in user_refs if r.startswith("refs/durability/")] == [
        "refs/durability/jj/keep"]
    store = checkpoints(grepo)
    assert str(store.references[attempt_ref(_stamp())].target) == commits[2]
    assert store.references[f"refs/durability/modes/{commits[0]}"].target == modes
    # The store holds them itself, not only through the alternates.
    local = pygit2.Odb()
    objects = str(store_path(grepo / ".git") / "objects")
    local.add_backend(pygit2.OdbBackendPack(objects), 2)
    local.add_backend(pygit2.OdbBackendLoose(objects, -1, False), 1)
    assert all(pygit2.Oid(hex=c) in local for c in commits)
    # The chain goes on from the moved tip, and a restore reads the old ones.
    (grepo / "work.txt").write_text("new\n")
    nxt = backend.snapshot(grepo, [_stamp()]).commit_id
    assert str(store[nxt].peel(pygit2.Commit).parent_ids[0]) == commits[2]
    backend.restore(grepo, commits[0], pre_restore=nxt)
    assert (grepo / "work.txt").read_text() == "old 0\n"
    _user_gc(grepo)  # their copies are theirs to drop now
    forget(grepo)
    assert _files(grepo, commits[1])["work.txt"] == b"old 1\n"
    assert _store_fsck(grepo) == ""


def test_a_move_interrupted_at_any_step_is_finished_by_the_next_open(grepo: Path) -> None:
    commits, _ = _old_layout(grepo)
    common = grepo / ".git"
    store = open_store(common)  # moves everything; put the user's refs back as if...
    user = pygit2.Repository(str(grepo))
    user.references.create(attempt_ref(_stamp()), pygit2.Oid(hex=commits[2]))
    # ...killed after the refs were created in the store, before the user's went:
    assert migrate(common, Path(store.path)) == 1
    assert attempt_ref(_stamp()) not in user.references
    # Killed before anything of the store existed but a scratch folder:
    (common / "durability" / f"{STORE_NAME}.new-1").mkdir()
    user.references.create("refs/durability/git/late", pygit2.Oid(hex=commits[0]))
    forget(grepo)
    again = open_store(common)
    assert str(again.references["refs/durability/git/late"].target) == commits[0]
    assert "refs/durability/git/late" not in pygit2.Repository(str(grepo)).references
    assert migrate(common, Path(again.path)) == 0  # idempotent
    # A ref the store already moved on keeps the store's (newer) target.
    user.references.create(attempt_ref(_stamp()), pygit2.Oid(hex=commits[0]))
    migrate(common, Path(again.path))
    assert str(again.references[attempt_ref(_stamp())].target) == commits[2]
