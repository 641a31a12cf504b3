"""Reading a history of large files (issue 25, decision 0051): ``log`` and the
browser's timeline read tree entries and object headers only, never a
blob's content (counted by a libgit2 object-store backend of our own put in
front of the repository's, which sees every object read); ``show`` and
``diff`` still count the lines of a small file, and name a file over
``LARGE_FILE_BYTES`` with its two sizes without reading it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2
import pygit2.enums
import pytest

from durability.inspect import compare, timeline
from durability.inspect.diff import LARGE_FILE_BYTES
from durability.inspect.repository import open_checkpoints
from tests.helpers import make_git_repo, make_jj_repo, run_cli, run_cli_json, state_database

BIG = LARGE_FILE_BYTES + 4096


class _Reads:
    """The ids of the objects read whole, and of those whose header was read."""

    def __init__(self) -> None:
        self.read: list[str] = []
        self.headers: list[str] = []


class _Counting(pygit2.OdbBackend):
    """First in line for every object read (one repository's): notes the
    id, then says "not here", so libgit2 asks the repository's own backends
    next."""

    def __init__(self, reads: _Reads) -> None:
        super().__init__()
        self.reads = reads

    def read_cb(self, oid: pygit2.Oid) -> Any:
        self.reads.read.append(str(oid))
        raise KeyError(oid)

    def read_header_cb(self, oid: pygit2.Oid) -> Any:
        self.reads.headers.append(str(oid))
        raise KeyError(oid)

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        return False


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Reads]:
    """Every repository the read commands open gets the counting backend."""
    counter = _Reads()

    def counted(worktree: Any, env: Any = None) -> pygit2.Repository:
        repo = open_checkpoints(worktree) if env is None else open_checkpoints(worktree, env)
        repo.odb.add_backend(_Counting(counter), 1_000)
        return repo

    monkeypatch.setattr(timeline, "open_checkpoints", counted)
    monkeypatch.setattr(compare, "open_checkpoints", counted)
    yield counter


def _blobs(repo_path: Path, ids: list[str]) -> set[str]:
    repo = open_checkpoints(repo_path)
    blob = pygit2.enums.ObjectType.BLOB
    return {i for i in ids if repo.get(i) is not None and repo[i].type == blob}


def _history(repo: Path) -> dict[str, str]:
    """Three checkpoints: a large and a small file, then both changed plus
    an add, a delete and a rename.  Returns the large file's blob ids."""
    (repo / "big.txt").write_bytes(b"a line of a large file\n" * (BIG // 23 + 1))
    (repo / "small.txt").write_text("one\ntwo\n")
    (repo / "gone.txt").write_text("bye\n")
    (repo / "moved.txt").write_text("same\n")
    _snap(repo)
    _snap(repo)  # nothing changed: deduplicated
    with open(repo / "big.txt", "ab") as f:
        f.write(b"one more line\n")
    (repo / "small.txt").write_text("one\nTWO\nthree\n")
    (repo / "new.txt").write_text("new\n")
    (repo / "gone.txt").unlink()
    (repo / "moved.txt").rename(repo / "renamed.txt")
    _snap(repo)
    shown = run_cli_json("show", "r1")
    store = open_checkpoints(repo)
    old, new = (store[c].peel(pygit2.Commit).tree["big.txt"].id
                for c in (shown["base"]["commit_id"], shown["commit_id"]))
    return {"old": str(old), "new": str(new)}


def _snap(repo: Path) -> None:
    run_cli_json("snapshot", str(repo), "--run", "r1", "--node", "main")


def _repo(tmp_path: Path, kind: str) -> Path:
    if kind == "git":
        return make_git_repo(tmp_path / "repo").resolve()
    return make_jj_repo(tmp_path / "repo").resolve()


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_log_reads_no_blob_and_show_reads_only_the_small_ones(
        tmp_path: Path, kind: str, reads: _Reads) -> None:
    repo = _repo(tmp_path, kind)
    big = _history(repo)
    reads.read.clear()
    entries = run_cli_json("log", str(repo))
    assert [e["seq"] for e in entries] == [2, 1]
    size = (repo / "big.txt").stat().st_size
    # big and small modified, new added, gone deleted, moved renamed (the same object).
    assert entries[0]["totals"] == {"files": 5, "old_bytes": (size - 14) + 8 + 4 + 5,
                                    "new_bytes": size + 14 + 4 + 5}
    assert run_cli("log", cwd=repo).returncode == 0
    assert _blobs(repo, reads.read) == set()
    assert reads.headers, "the counter sees the store's reads (headers here)"

    shown = run_cli_json("show", "r1")
    files = {f["path"]: f for f in shown["files"]}
    assert (files["big.txt"]["large"], files["big.txt"]["additions"],
            files["big.txt"]["old_size"], files["big.txt"]["new_size"]) == (
        True, 0, size - 14, size)
    assert (files["small.txt"]["large"], files["small.txt"]["additions"],
            files["small.txt"]["deletions"], files["small.txt"]["new_size"]) == (False, 2, 1, 14)
    assert files["renamed.txt"]["old_path"] == "moved.txt"
    read_blobs = _blobs(repo, reads.read)
    assert big["old"] not in read_blobs and big["new"] not in read_blobs
    assert read_blobs, "the small files were read to count their lines"

    stat = {line.split()[-1]: line.split() for line in
            run_cli("diff", "r1", "--stat").stdout.splitlines()[1:-1]}
    assert stat["big.txt"] == ["modified", "large", "8.0", "MiB", "->", "8.0", "MiB", "big.txt"]
    assert stat["small.txt"] == ["modified", "+2", "-1", "small.txt"]
    patch = run_cli("diff", "r1").stdout
    assert (f"Large files a/big.txt and b/big.txt differ ({size - 14} bytes -> {size} bytes; "
            f"over {LARGE_FILE_BYTES} bytes: not compared)") in patch
    assert "+TWO" in patch and "a line of a large file" not in patch
    assert big["old"] not in _blobs(repo, reads.read)


def test_the_worktree_side_of_a_large_file_is_not_read_either(
        tmp_path: Path, reads: _Reads) -> None:
    repo = _repo(tmp_path, "git")
    _history(repo)
    with open(repo / "big.txt", "ab") as f:
        f.write(b"and another\n")
    reads.read.clear()
    got = run_cli_json("diff", "r1", "--worktree")
    [changed] = got["files"]
    assert (changed["path"], changed["large"], changed["new_size"]) == (
        "big.txt", True, (repo / "big.txt").stat().st_size)
    assert _blobs(repo, reads.read) == set()


def test_the_browser_s_timeline_reads_no_blob(tmp_path: Path, reads: _Reads) -> None:
    from durability.browse import model
    from durability.store import Store

    repo = _repo(tmp_path, "git")
    _history(repo)
    reads.read.clear()
    with Store(state_database()) as store:
        rows = model.timeline_rows(store, "r1")
        assert _blobs(repo, reads.read) == set()
        assert rows[0].cells[4] == "5 files +20 B"
        assert rows[0].checkpoint is not None
        text = model.diff_text(store, rows[0].checkpoint)
    assert "Large files a/big.txt and b/big.txt differ" in text and "+TWO" in text
