"""A full disk is said as such: ``disk-full`` naming the mount point, on
both backends, for a capture and a restore (docs/RELIABILITY.md).

The worktree lives on a 2 MiB tmpfs mounted for the test (root only; it is
unmounted afterwards), filled with one file of random bytes."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget
from durability.backends.jj import JjBackend, find_jj, git_dir
from durability.ground.errors import DurabilityError
from durability.store import AttemptKey
from tests.helpers import checkpoints, jj_path, make_git_repo, make_jj_repo

KEY = AttemptKey("run-full", "node", 0, 1)


def _stamp() -> Stamp:
    return Stamp(key=KEY, source="manual", request_ids=(f"req-{uuid.uuid4()}",))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30,
                       check=False)


def _fill(path: Path) -> None:
    with open(path, "wb") as f:
        try:
            while True:
                f.write(os.urandom(1 << 16))
                f.flush()
        except OSError as exc:
            assert exc.errno == 28


def _assert_disk_full(exc: DurabilityError, mount: Path) -> None:
    message = str(exc)
    assert exc.code == "disk-full", message
    assert str(mount.resolve()) in message and "no space left" in message
    assert "\n" not in message


def test_git_capture_and_restore_on_a_full_disk(small_disk: Path) -> None:
    """On the old code: ``git-failed`` with libgit2's words for what it
    could not find next ("the global/xdg file 'ignore' doesn't exist",
    "index does not contain fill.bin"), never the disk."""
    root = make_git_repo(small_disk / "w").resolve()
    backend = GitBackend()
    try:
        first = backend.snapshot(root, [_stamp()]).commit_id
        repo = checkpoints(root)
        builder = repo.TreeBuilder(repo[first].peel(pygit2.Commit).tree)
        builder.insert("big.bin", repo.create_blob(os.urandom(1 << 20)),
                       pygit2.enums.FileMode.BLOB)
        sig = pygit2.Signature("t", "t@example.invalid", 0, 0)
        big = str(repo.create_commit(None, sig, sig, "big\n", builder.write(), []))
        _fill(root / "fill.bin")
        with pytest.raises(DurabilityError) as caught:
            backend.snapshot(root, [_stamp()])
        _assert_disk_full(caught.value, small_disk)
        os.truncate(root / "fill.bin", 0)
        (root / "fill.bin").unlink()
        _fill(small_disk / "other.bin")
        os.truncate(small_disk / "other.bin", os.path.getsize(small_disk / "other.bin") - 300_000)
        with pytest.raises(DurabilityError) as caught:
            backend.restore(root, big, pre_restore=first)
        _assert_disk_full(caught.value, small_disk)
    finally:
        forget(root)


def test_jj_capture_on_a_full_disk(small_disk: Path) -> None:
    root = make_jj_repo(small_disk / "w").resolve()
    backend = JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)
    backend.snapshot(root)
    assert git_dir(root).is_dir()
    _fill(root / "fill.bin")
    with pytest.raises(DurabilityError) as caught:
        backend.snapshot(root)
    _assert_disk_full(caught.value, small_disk)
