"""Restore on plain git worktrees, the user's repository left byte for byte,
and the hook and CLI end to end on a git repository."""

from __future__ import annotations

import json
import os
import random
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from durability.backends.git import forget
from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.ground.errors import RestoreError
from durability.restore.apply import restore
from durability.store import AttemptKey, Store
from tests.helpers import (
    checkpoints,
    git,
    hook_payload,
    make_git_repo,
    run_cli,
    run_cli_json,
    start_service,
    store_git,
)

KEY = AttemptKey("run-r", "node", 0, 1)


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo").resolve()
    yield path
    forget(path)


def snap(settings: Settings, repo: Path, key: AttemptKey = KEY) -> int:
    done = snapshot_now(settings, key=key, path=repo, request_id=str(uuid.uuid4()))
    return int(done.seq or 0)


def manifest(root: Path) -> dict[str, tuple[str, object]]:
    """Every path outside .git: kind and content (bytes, link target or mode)."""
    found: dict[str, tuple[str, object]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = Path(dirpath) / name
            rel = str(full.relative_to(root))
            if full.is_symlink():
                found[rel] = ("link", os.readlink(full))
            else:
                found[rel] = ("file", (full.read_bytes(), os.stat(full).st_mode & 0o111 != 0))
    return found


def build_tree(repo: Path) -> None:
    (repo / ".gitignore").write_text("*.o\ncache/\n")
    (repo / "same.txt").write_text("never touched\n")
    (repo / "text.txt").write_text("one\ntwo\n")
    (repo / "bin.dat").write_bytes(bytes(range(256)) * 4)
    (repo / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "empty").write_bytes(b"")
    (repo / "dir" / "deep").mkdir(parents=True)
    (repo / "dir" / "deep" / "ü.txt").write_text("unicode\n")
    (repo / "link").symlink_to("text.txt")


def mutate(repo: Path) -> None:
    (repo / "text.txt").write_text("changed\n")
    (repo / "bin.dat").unlink()
    (repo / "run.sh").chmod(0o644)
    (repo / "link").unlink()
    (repo / "link").symlink_to("same.txt")
    (repo / "added.txt").write_text("new\n")
    (repo / "newdir" / "x").mkdir(parents=True)
    (repo / "newdir" / "x" / "y.txt").write_text("y\n")
    (repo / "dir" / "deep" / "ü.txt").unlink()
    (repo / "dir" / "deep" / "keep.o").write_text("ignored, inside a folder that empties\n")
    (repo / "empty").write_text("no longer empty\n")


def test_restore_is_byte_exact_and_touches_only_what_differs(grepo: Path,
                                                            settings: Settings) -> None:
    build_tree(grepo)
    (grepo / "cache").mkdir()
    (grepo / "cache" / "blob.o").write_bytes(b"ignored build output")
    assert snap(settings, grepo) == 1
    want = manifest(grepo)
    same_before = os.stat(grepo / "same.txt")
    ignored_before = os.stat(grepo / "cache" / "blob.o")
    mutate(grepo)
    changed = manifest(grepo)
    done = restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=1)
    assert done.pre_restore_seq == 2
    got = manifest(grepo)
    ignored = {"cache/blob.o", "dir/deep/keep.o"}
    assert {k: v for k, v in got.items() if k not in ignored} == \
        {k: v for k, v in want.items() if k not in ignored}
    same_after = os.stat(grepo / "same.txt")
    assert (same_after.st_mtime_ns, same_after.st_ino) == (same_before.st_mtime_ns,
                                                            same_before.st_ino)
    assert os.stat(grepo / "cache" / "blob.o").st_mtime_ns == ignored_before.st_mtime_ns
    assert (grepo / "dir" / "deep" / "keep.o").exists()  # its folder stays for it
    assert not (grepo / "newdir").exists()  # emptied folders go
    assert stat.S_IMODE(os.stat(grepo / "run.sh").st_mode) & 0o100
    # Every restore can be undone: the pre-restore checkpoint brings it all back.
    restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=2)
    assert manifest(grepo) == changed


def test_a_mode_change_alone_is_a_chmod(grepo: Path, settings: Settings) -> None:
    build_tree(grepo)
    snap(settings, grepo)
    (grepo / "run.sh").chmod(0o644)
    before = os.stat(grepo / "run.sh")
    restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=1)
    after = os.stat(grepo / "run.sh")
    assert after.st_ino == before.st_ino and after.st_mode & 0o111 == 0o111


def test_an_ignored_file_in_the_way_refuses_and_changes_nothing(grepo: Path,
                                                                settings: Settings) -> None:
    (grepo / ".gitignore").write_text("*.o\n")
    (grepo / "out").write_text("a tracked file\n")
    snap(settings, grepo)
    (grepo / "out").unlink()
    (grepo / "out").mkdir()
    (grepo / "out" / "cache.o").write_text("ignored\n")
    (grepo / "README.md").write_text("edited\n")
    with pytest.raises(RestoreError) as info:
        restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=1)
    assert info.value.code == "restore-conflict" and "out/cache.o" in str(info.value)
    assert (grepo / "out" / "cache.o").read_text() == "ignored\n"
    assert (grepo / "README.md").read_text() == "edited\n"


def _user_state(repo: Path) -> dict[str, bytes]:
    """Every file of .git the user owns: index, HEAD, refs, reflogs, stash,
    config (everything but objects and the toolkit's own folder and refs)."""
    state: dict[str, bytes] = {}
    gitdir = repo / ".git"
    for dirpath, dirnames, filenames in os.walk(gitdir):
        rel = Path(dirpath).relative_to(gitdir)
        dirnames[:] = [d for d in dirnames
                       if str(rel / d) not in {"objects", "durability", "refs/durability",
                                               "logs/refs/durability"}]
        for name in filenames:
            state[str(rel / name)] = (Path(dirpath) / name).read_bytes()
    return state


def test_user_index_head_refs_and_stash_are_untouched(grepo: Path, settings: Settings) -> None:
    (grepo / "README.md").write_text("stashed change\n")
    git(grepo, "stash", "push", "-q", "-m", "user stash")
    (grepo / "staged.txt").write_text("staged\n")
    (grepo / "README.md").write_text("staged edit\n")
    git(grepo, "add", "staged.txt", "README.md")
    git(grepo, "branch", "feature")
    before = _user_state(grepo)
    assert {"index", "HEAD", "refs/stash", "logs/refs/stash", "refs/heads/feature"} <= set(before)
    rng = random.Random(4)
    seqs: list[int] = []
    for i in range(100):
        target = grepo / f"f{rng.randrange(12)}.txt"
        if target.exists() and rng.random() < 0.3:
            target.unlink()
        else:
            target.write_text(f"capture {i}\n")
        seqs.append(snap(settings, grepo))
        if i % 10 == 9:
            restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=rng.choice(seqs))
    assert max(seqs) > 50
    assert _user_state(grepo) == before
    listed = git(grepo, "diff", "--cached", "--name-only").stdout.split()
    assert sorted(listed) == ["README.md", "staged.txt"]
    assert git(grepo, "stash", "list").stdout.count("user stash") == 1


# -- end to end -----------------------------------------------------------------------


def test_cli_snapshot_snapshots_and_restore_on_plain_git(grepo: Path) -> None:
    index_before = (grepo / ".git" / "index").read_bytes()
    (grepo / "work.txt").write_text("first\n")
    first = run_cli_json("snapshot", str(grepo), "--run", "run-e", "--node", "n")
    (grepo / "work.txt").write_text("second\n")
    done = run_cli("snapshot-hook", input=json.dumps(hook_payload(
        grepo, session_id="run-e", tool_use_id="toolu_g", file_path=str(grepo / "work.txt"))))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    rows = run_cli_json("snapshots", "run-e")
    assert [(r["node_id"], r["seq"], r["source"]) for r in rows] == \
        [("n", 1, "manual"), ("session", 1, "hook")]
    assert rows[1]["tool_use_id"] == "toolu_g" and rows[1]["worktree"] == str(grepo)
    restored = run_cli_json("restore", "run-e", "--node", "n", "--seq", "1")
    assert restored["restored"]["commit_id"] == first["commit_id"]
    assert (grepo / "work.txt").read_text() == "first\n"
    assert (grepo / ".git" / "index").read_bytes() == index_before
    # The user's repository shows none of ours; the private store one ref per attempt.
    assert "refs/durability" not in git(grepo, "for-each-ref").stdout
    refs = [r for r in checkpoints(grepo).references if r.startswith("refs/durability/git/")]
    assert len(refs) == 2  # one per attempt: n and session


def test_hook_through_the_service_on_plain_git(grepo: Path, tmp_path: Path) -> None:
    service = start_service(tmp_path)
    try:
        (grepo / "a.txt").write_text("via service\n")
        done = run_cli("snapshot-hook", input=json.dumps(hook_payload(
            grepo, session_id="run-s", tool_use_id="toolu_s")))
        assert (done.returncode, done.stderr) == (0, "")
    finally:
        assert service.stop() == 0
    with Store(Settings.from_env().database) as store:
        [row] = store.checkpoints("run-s")
    assert (row.source, row.tool_use_id) == ("hook", "toolu_s")
    message = store_git(grepo, "log", "-1", "--format=%B", row.commit_id).stdout
    assert "Durability-Tool-Use-Id: toolu_s" in message and "Durability-Seq: 1" in message


def test_restore_conflict_is_one_line_and_exit_7(grepo: Path) -> None:
    # The ignore rule is in seq 1 already (it names folders only, so the file
    # ``out`` is tracked): the restore changes no ignore status, and what it
    # meets is the conflict alone, not a restore-would-unignore refusal.
    (grepo / ".gitignore").write_text("out/\n")
    (grepo / "out").write_text("tracked\n")
    run_cli_json("snapshot", str(grepo), "--run", "run-c", "--node", "n")
    (grepo / "out").unlink()
    (grepo / "out").mkdir()
    (grepo / "out" / "junk").write_text("ignored\n")
    done = run_cli("restore", "run-c", "--node", "n", "--seq", "1")
    assert done.returncode == 7
    assert done.stderr.startswith("durability: restore-conflict: ")
    assert done.stderr.count("\n") == 1


def test_plain_folder_is_not_a_repo_for_the_hook(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = run_cli("snapshot-hook", input=json.dumps(hook_payload(plain, session_id="run-p")))
    assert done.returncode == 0 and "not-a-repo" in done.stderr
    gaps = run_cli_json("gaps", "run-p")
    assert [g["reason"] for g in gaps] == ["not-a-repo"]


def test_a_tree_naming_dot_git_is_never_written(grepo: Path) -> None:
    """Checkpoints come from captures, which never hold .git; a crafted
    commit in a checkpoint's place still cannot write into .git (libgit2
    refuses to build such a tree, git mktree does not)."""
    from durability.backends.git import GitBackend

    def mktree(line: str) -> str:
        done = subprocess.run(["git", "-C", str(grepo), "mktree"], input=line + "\n",
                              capture_output=True, text=True, check=True)
        return done.stdout.strip()

    blob = subprocess.run(["git", "-C", str(grepo), "hash-object", "-w", "--stdin"],
                          input="#!/bin/sh\necho owned\n", capture_output=True, text=True,
                          check=True).stdout.strip()
    hooks = mktree(f"100755 blob {blob}\tpost-checkout")
    dotgit = mktree(f"040000 tree {hooks}\thooks")
    top = mktree(f"040000 tree {dotgit}\t.git")
    crafted = git(grepo, "commit-tree", top, "-m", "crafted").stdout.strip()
    with pytest.raises(RestoreError) as info:
        GitBackend().restore(grepo, crafted)
    assert info.value.code == "restore-conflict" and ".git" in str(info.value)
    assert not (grepo / ".git" / "hooks" / "post-checkout").exists()
    assert (grepo / "README.md").exists()
