"""Forged checkpoints a restore must survive in one clear line: a blob too
large to hold in memory twice, and modes git never writes
(docs/RELIABILITY.md, "What a restore promises")."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget
from durability.backends.jj import JjBackend, find_jj, git_dir
from durability.ground.errors import RestoreError
from durability.store import AttemptKey
from tests.helpers import checkpoints, jj_path, make_git_repo, make_jj_repo

KEY = AttemptKey("run-limits", "node", 0, 1)
BIG = 200 << 20


def _stamp() -> Stamp:
    return Stamp(key=KEY, source="manual", request_ids=(f"req-{uuid.uuid4()}",))


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo").resolve()
    yield path
    forget(path)


def _commit(repo: pygit2.Repository, tree: pygit2.Oid) -> str:
    sig = pygit2.Signature("forger", "forger@example.invalid", 0, 0)
    return str(repo.create_commit(None, sig, sig, "forged\n", tree, []))


# The peak is VmHWM, this process image's own high-water mark: getrusage's
# ru_maxrss also counts the parent's resident set, which a vforked child
# inherits until it execs (on Linux), so it says pytest's size.
_RESTORE = """
import sys
from pathlib import Path
from durability.backends.git import GitBackend
GitBackend().restore(Path(sys.argv[1]), sys.argv[2], pre_restore=sys.argv[3])
with open("/proc/self/status") as f:
    print(next(line.split()[1] for line in f if line.startswith("VmHWM:")))
"""


def test_a_large_blob_is_restored_in_bounded_memory(grepo: Path, tmp_path: Path) -> None:
    """A forged 200 MiB blob: the restoring process's peak RSS stays far
    below the blob's size (streamed from git in chunks).  On the old code it
    was read whole twice (libgit2's buffer and Python's copy): about 450 MB."""
    before = GitBackend().snapshot(grepo, [_stamp()])
    sparse = tmp_path / "zeros.bin"
    with open(sparse, "wb") as f:
        f.truncate(BIG)
    oid = subprocess.run(["git", "-C", str(grepo), "hash-object", "-w", str(sparse)],
                         capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    sparse.unlink()
    repo = checkpoints(grepo)
    builder = repo.TreeBuilder(repo[before.commit_id].peel(pygit2.Commit).tree)
    builder.insert("big.bin", pygit2.Oid(hex=oid), pygit2.enums.FileMode.BLOB)
    target = _commit(repo, builder.write())
    done = subprocess.run([sys.executable, "-c", _RESTORE, str(grepo), target, before.commit_id],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    peak_mib = int(done.stdout.split()[-1]) / 1024  # VmHWM is in kB
    assert os.path.getsize(grepo / "big.bin") == BIG
    with open(grepo / "big.bin", "rb") as f:
        f.seek(BIG - 4096)
        assert f.read() == b"\0" * 4096
    assert peak_mib < 100, f"peak RSS {peak_mib:.0f} MiB for a {BIG >> 20} MiB blob"


def _odd_tree(repo: pygit2.Repository, mode: str) -> pygit2.Oid:
    """A tree whose middle entry has ``mode``, written as raw object bytes
    (libgit2's tree builder refuses such modes)."""
    blob = repo.create_blob(b"x\n")
    raw = (b"100644 a.txt\0" + blob.raw + mode.encode() + b" odd\0" + blob.raw
           + b"100644 z.txt\0" + blob.raw)
    return repo.odb.write(pygit2.enums.ObjectType.TREE, raw)


@pytest.mark.parametrize("mode", ["100664", "100600", "120755", "100000"])
@pytest.mark.parametrize("kind", ["git", "jj"])
def test_odd_modes_are_refused_before_writing(tmp_path: Path, kind: str, mode: str) -> None:
    """One clear line naming the path and the mode, and nothing written.
    On the old code a.txt (and more) were written first, then the restore
    failed with "invalid entry mode" naming no path."""
    if kind == "git":
        root = make_git_repo(tmp_path / "w").resolve()
        backend: GitBackend | JjBackend = GitBackend()
        before = backend.snapshot(root, [_stamp()]).commit_id
        repo = checkpoints(root)
    else:
        root = make_jj_repo(tmp_path / "w").resolve()
        backend = JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)
        before = backend.snapshot(root).commit_id
        repo = pygit2.Repository(str(git_dir(root)))
    target = _commit(repo, _odd_tree(repo, mode))
    try:
        with pytest.raises(RestoreError) as caught:
            backend.restore(root, target, pre_restore=before)
    finally:
        forget(root)
    message = str(caught.value)
    assert caught.value.code == "restore-conflict"
    assert "'odd'" in message and mode in message and "\n" not in message
    assert not (root / "a.txt").exists() and not (root / "odd").exists()
