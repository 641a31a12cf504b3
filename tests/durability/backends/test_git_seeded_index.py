"""A fresh private index seeded from the user's ``.git/index`` with its stat
data (decision 0050) gives the trees a cold one (every file hashed) gives,
and git's own racily-clean rule decides which entries are trusted.

Real repositories: this project's own history replayed commit by commit,
with same-size edits made right after each checkout (in the second of the
index write); ``git add -A`` on a copy of the user's index is the reference.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from pygit2.ffi import C, ffi

from durability.backends import Stamp, git_repo
from durability.backends.git import GitBackend, forget, worktree_index
from durability.backends.git_repo import private_index_path
from durability.ground import git_prescan
from durability.store import AttemptKey
from tests.helpers import checkpoints, git, git_add_all_tree, make_git_repo

KEY = AttemptKey("run-seed", "node", 0, 1)
PROJECT = Path(__file__).resolve().parents[3]


def _stamp() -> Stamp:
    return Stamp(key=KEY, source="manual", request_ids=(f"req-{uuid.uuid4()}",))


def _tree(worktree: Path, commit_id: str) -> str:
    return str(checkpoints(worktree)[commit_id].peel(pygit2.Commit).tree_id)


def _fresh_capture(worktree: Path, *, seeded: bool, monkeypatch: pytest.MonkeyPatch,
                   prescan: bool = False) -> str:
    """The tree of a first capture from a new private index, seeded with the
    user's stat data or (cold) with entries alone; ``prescan``: with the
    paths from the ``git status`` the hook starts (``git_prescan``), never
    from libgit2's diff."""
    forget(worktree)
    repo = pygit2.Repository(str(worktree))
    private_index_path(repo, worktree).unlink(missing_ok=True)
    with monkeypatch.context() as m:
        if not seeded:
            m.setattr(git_repo, "_seed_copy", lambda *_a: False)
        if prescan:
            path = git_prescan.start(str(worktree), os.environ)
            assert path is not None
            git_repo.read_ahead(path)
            m.setattr(pygit2.Index, "diff_to_workdir", _no_diff)
        snap = GitBackend().snapshot(worktree, [_stamp()])
    forget(worktree)
    return _tree(worktree, snap.commit_id)


def _no_diff(*_a: object, **_k: object) -> None:
    raise AssertionError("libgit2's diff ran: git's paths were not taken")


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the confined scan reads from now on (``Scan._read``)."""
    from durability.backends import git_scan

    reads: list[str] = []
    real = git_scan.Scan._read

    def counting(self: git_scan.Scan, path: str, *rest: object) -> object:
        reads.append(path)
        return real(self, path, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(git_scan.Scan, "_read", counting)
    return reads


def _reference(worktree: Path, tmp: Path) -> str:
    """``git add -A`` + ``git write-tree`` on a copy of the user's index
    (mtime kept, so git judges racy entries as it would on its own)."""
    copy = tmp / f"ref-{uuid.uuid4().hex}"
    shutil.copy2(worktree / ".git" / "index", copy)
    return git_add_all_tree(worktree, copy)


@pytest.fixture
def replay(tmp_path: Path) -> Iterator[Path]:
    if not (PROJECT / ".git").exists():
        pytest.fail(f"{PROJECT} is not a git checkout: this test replays its history")
    clone = tmp_path / "replay"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(PROJECT), str(clone)],
                   check=True, capture_output=True, timeout=300)
    yield clone.resolve()
    forget(clone.resolve())


def test_seeded_index_gives_the_cold_trees_over_replayed_history(
        replay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commits = git(replay, "rev-list", "--first-parent", "--max-count=60",
                  "HEAD").stdout.split()[::15]
    assert len(commits) == 4
    checked = 0
    for n, commit in enumerate(reversed(commits)):
        git(replay, "checkout", "-q", "--force", commit)
        # Same-size edits straight after the checkout: in the second of the
        # index write, where only content can tell (git's racy case).
        tracked = git(replay, "ls-files").stdout.split()
        edited = [p for p in tracked[n::97] if (replay / p).is_file()
                  and not (replay / p).is_symlink() and (replay / p).stat().st_size > 0][:5]
        index_mtime = (replay / ".git" / "index").stat().st_mtime_ns
        for path in edited:
            data = bytearray((replay / path).read_bytes())
            data[0] = ord("A") if data[0] != ord("A") else ord("B")
            (replay / path).write_bytes(bytes(data))
            os.utime(replay / path, ns=(index_mtime, index_mtime))
        (replay / f"untracked-{n}.txt").write_text("new\n")
        seeded = _fresh_capture(replay, seeded=True, monkeypatch=monkeypatch)
        cold = _fresh_capture(replay, seeded=False, monkeypatch=monkeypatch)
        prescanned = _fresh_capture(replay, seeded=True, monkeypatch=monkeypatch, prescan=True)
        assert seeded == cold == prescanned == _reference(replay, tmp_path), commit
        checked += len(edited)
    assert checked >= 12


def _lie_in_the_users_index(worktree: Path, name: str, stale: pygit2.Oid) -> None:
    """Make the user's index say ``name`` holds ``stale`` with the file's
    current stat data (as a git that hashed it a moment before a same-second,
    same-size edit would), then give the index file that same second."""
    path = worktree / ".git" / "index"
    index = pygit2.Index(str(path))
    st = os.lstat(worktree / name)
    entry = ffi.new("git_index_entry *")
    ffi.buffer(ffi.addressof(entry, "id"))[:] = stale.raw
    entry.ctime.seconds, entry.ctime.nanoseconds = divmod(st.st_ctime_ns, 1_000_000_000)
    entry.mtime.seconds, entry.mtime.nanoseconds = divmod(st.st_mtime_ns, 1_000_000_000)
    entry.dev, entry.ino = st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF
    entry.uid, entry.gid = st.st_uid & 0xFFFFFFFF, st.st_gid & 0xFFFFFFFF
    entry.file_size, entry.mode = st.st_size, 0o100644
    keep = ffi.new("char[]", name.encode())
    entry.path = keep
    assert C.git_index_add(index._index, entry) == 0
    index.write()
    os.utime(path, ns=(st.st_mtime_ns, st.st_mtime_ns))


def test_an_entry_as_new_as_the_users_index_is_rehashed(tmp_path: Path) -> None:
    worktree = make_git_repo(tmp_path / "racy").resolve()
    (worktree / "f.txt").write_text("aaaa\n")
    git(worktree, "add", "f.txt")
    stale = pygit2.Repository(str(worktree)).index["f.txt"].id
    (worktree / "f.txt").write_text("bbbb\n")  # same size
    _lie_in_the_users_index(worktree, "f.txt", stale)
    try:
        snap = GitBackend().snapshot(worktree, [_stamp()])
        tree = checkpoints(worktree)[snap.commit_id].peel(pygit2.Commit).tree
        assert checkpoints(worktree)[tree["f.txt"].id].data == b"bbbb\n"
        assert str(tree.id) == _reference(worktree, tmp_path)
    finally:
        forget(worktree)


def test_an_older_entry_is_trusted_without_reading_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What makes the first capture cheap: an entry older than the user's
    index file is taken from it, as ``git status`` takes it (no file read)."""
    worktree = make_git_repo(tmp_path / "old").resolve()
    for i in range(20):
        (worktree / f"t{i}.txt").write_text(f"tracked {i}\n")
    git(worktree, "add", ".")
    later = (worktree / ".git" / "index").stat().st_mtime_ns + 3_000_000_000
    os.utime(worktree / ".git" / "index", ns=(later, later))
    reads = _count_reads(monkeypatch)
    try:
        snap = GitBackend().snapshot(worktree, [_stamp()])
        assert _tree(worktree, snap.commit_id) == _reference(worktree, tmp_path)
        assert not [p for p in reads if p.startswith("t")], reads
    finally:
        forget(worktree)


def test_an_index_libgit2_cannot_trust_is_seeded_entry_by_entry(tmp_path: Path) -> None:
    """An intent-to-add entry (``git add -N``) is no content: such an index
    is seeded the slow way, and the file is captured as it is on disk."""
    worktree = make_git_repo(tmp_path / "ita").resolve()
    (worktree / "later.txt").write_text("written later\n")
    git(worktree, "add", "-N", "later.txt")
    try:
        snap = GitBackend().snapshot(worktree, [_stamp()])
        tree = checkpoints(worktree)[snap.commit_id].peel(pygit2.Commit).tree
        assert checkpoints(worktree)[tree["later.txt"].id].data == b"written later\n"
    finally:
        forget(worktree)


def test_a_gitlink_without_gitmodules_is_read_on_the_seeded_first_capture(
        tmp_path: Path) -> None:
    """The first scan of a copied index reads every gitlink (a nested
    repository's HEAD moves where no stat shows it), taken from libgit2's
    list of submodules: one only in the index, with no ``.gitmodules``, too."""
    worktree = make_git_repo(tmp_path / "outer").resolve()
    inner = make_git_repo(worktree / "inner")
    first = git(inner, "rev-parse", "HEAD").stdout.strip()
    git(worktree, "add", "inner")  # a gitlink, and no .gitmodules
    git(worktree, "commit", "-q", "-m", "gitlink")
    (inner / "more.txt").write_text("more\n")
    git(inner, "add", "more.txt")
    git(inner, "commit", "-q", "-m", "moved")
    second = git(inner, "rev-parse", "HEAD").stdout.strip()
    assert not (worktree / ".gitmodules").exists() and first != second
    try:
        snap = GitBackend().snapshot(worktree, [_stamp()])
        from durability.backends.git import worktree_index

        assert worktree_index(worktree).last_scan == "seeded"
        tree = checkpoints(worktree)[snap.commit_id].peel(pygit2.Commit).tree
        assert str(tree["inner"].id) == second
        assert str(tree.id) == _reference(worktree, tmp_path)
    finally:
        forget(worktree)


def test_a_copy_a_crash_left_unchecked_is_made_again(tmp_path: Path) -> None:
    """A copy of the user's index is put in place, then read and checked; a
    crash in between leaves its mark beside it, and the next open copies the
    user's index again rather than use an index nobody checked (here one
    whose entry would be trusted with content the file no longer has)."""
    worktree = make_git_repo(tmp_path / "crash").resolve()
    (worktree / "f.txt").write_text("aaaa\n")
    git(worktree, "add", "f.txt")
    stale = pygit2.Repository(str(worktree)).index["f.txt"].id
    (worktree / "f.txt").write_text("bbbb\n")  # same size
    git(worktree, "add", "f.txt")
    user_index = worktree / ".git" / "index"
    saved = user_index.read_bytes(), user_index.stat().st_mtime_ns
    # The left copy: the file's stat data with the old content, older than
    # the copy itself, so a scan of it would trust the entry.
    later = os.lstat(worktree / "f.txt").st_mtime_ns + 3_000_000_000
    _lie_in_the_users_index(worktree, "f.txt", stale)
    path = private_index_path(pygit2.Repository(str(worktree)), worktree)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    shutil.copyfile(user_index, path)
    os.utime(path, ns=(later, later))
    user_index.write_bytes(saved[0])
    os.utime(user_index, ns=(saved[1], saved[1]))
    mark = git_repo._unchecked_mark(path)
    mark.touch()
    try:
        snap = GitBackend().snapshot(worktree, [_stamp()])
        assert not mark.exists()
        tree = checkpoints(worktree)[snap.commit_id].peel(pygit2.Commit).tree
        assert checkpoints(worktree)[tree["f.txt"].id].data == b"bbbb\n"
        assert str(tree.id) == _reference(worktree, tmp_path)
    finally:
        forget(worktree)


def test_a_refused_copy_leaves_no_index_and_no_mark(tmp_path: Path) -> None:
    """A copy found untrustworthy (an intent-to-add entry) is removed with
    its mark, and the index is seeded entry by entry."""
    worktree = make_git_repo(tmp_path / "refused").resolve()
    (worktree / "later.txt").write_text("written later\n")
    git(worktree, "add", "-N", "later.txt")
    repo = pygit2.Repository(str(worktree))
    path = private_index_path(repo, worktree)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    assert git_repo._seed_copy(repo, path) is None
    assert not path.exists() and not git_repo._unchecked_mark(path).exists()


def _moved_gitlink_repo(root: Path) -> tuple[Path, str]:
    """A repository with a gitlink (no ``.gitmodules``) whose HEAD moved
    since, same-size edits, a deleted file, an untracked file and folder."""
    worktree = make_git_repo(root).resolve()
    inner = make_git_repo(worktree / "inner")
    for i in range(30):
        (worktree / f"t{i}.txt").write_text(f"tracked {i}\n")
    git(worktree, "add", "-A")
    git(worktree, "commit", "-q", "-m", "files")
    (inner / "more.txt").write_text("more\n")
    git(inner, "add", "more.txt")
    git(inner, "commit", "-q", "-m", "moved")
    index_mtime = (worktree / ".git" / "index").stat().st_mtime_ns
    for i in (3, 17):
        (worktree / f"t{i}.txt").write_text(f"TRACKED {i}\n")  # same size, same second
        os.utime(worktree / f"t{i}.txt", ns=(index_mtime, index_mtime))
    (worktree / "t5.txt").unlink()
    (worktree / "new.txt").write_text("new\n")
    (worktree / "newdir").mkdir()
    (worktree / "newdir" / "x.txt").write_text("x\n")
    return worktree, git(inner, "rev-parse", "HEAD").stdout.strip()


def test_a_prescanned_first_capture_takes_gits_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook's ``git status``, started before its imports, names the paths
    the first scan reads (a moved gitlink among them): the tree is ``git add
    -A``'s, libgit2's diff never runs, and git's copy is the private index."""
    worktree, moved = _moved_gitlink_repo(tmp_path / "pre")
    reads = _count_reads(monkeypatch)
    monkeypatch.setattr(pygit2.Index, "diff_to_workdir", _no_diff)
    started = git_prescan.start(str(worktree), os.environ)
    path = private_index_path(pygit2.Repository(str(worktree)), worktree)
    assert started == str(path)
    assert path.exists() and git_repo._unchecked_mark(path).exists()
    git_repo.read_ahead(started)
    prescan = git_prescan.peek(started)
    assert prescan is not None and prescan.reader is not None
    opened: list[str] = []
    real_init = pygit2.Index.__init__

    def counted_init(self: pygit2.Index, *a: object, **k: object) -> None:
        opened.append(str(a[0]) if a else "")
        real_init(self, *a, **k)  # type: ignore[arg-type]

    prescan.reader.join()
    monkeypatch.setattr(pygit2.Index, "__init__", counted_init)
    try:
        snap = GitBackend().snapshot(worktree, [_stamp()])
        from durability.backends.git import worktree_index

        assert worktree_index(worktree).last_scan == "seeded"
        tree = checkpoints(worktree)[snap.commit_id].peel(pygit2.Commit).tree
        assert str(tree["inner"].id) == moved
        assert checkpoints(worktree)[tree["t3.txt"].id].data == b"TRACKED 3\n"
        assert "t5.txt" not in tree and "newdir/x.txt" in tree
        assert str(tree.id) == _reference(worktree, tmp_path)
        assert not git_repo._unchecked_mark(path).exists()
        assert str(path) not in opened  # the copy read ahead was taken, not read again
        # Only what git named was read, not the 27 files it did not.
        assert not {f"t{i}.txt" for i in range(30)} - {"t3.txt", "t17.txt", "t5.txt"} & set(reads)
    finally:
        forget(worktree)


def test_a_prescan_whose_copy_was_replaced_is_not_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process copying the user's index again after the prescan put
    its copy in place: git compared a file that is not the private index any
    more, so its paths are dropped and libgit2's diff names them."""
    worktree, moved = _moved_gitlink_repo(tmp_path / "swap")
    git_prescan.start(str(worktree), os.environ)
    path = private_index_path(pygit2.Repository(str(worktree)), worktree)
    shutil.copyfile(path, tmp_path / "again")
    os.replace(tmp_path / "again", path)  # a new file at the same place
    diffs: list[int] = []
    real = pygit2.Index.diff_to_workdir

    def counted(self: pygit2.Index, *a: object, **k: object) -> object:
        diffs.append(1)
        return real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(pygit2.Index, "diff_to_workdir", counted)
    try:
        snap = GitBackend().snapshot(worktree, [_stamp()])
        assert diffs == [1]
        tree = checkpoints(worktree)[snap.commit_id].peel(pygit2.Commit).tree
        assert str(tree["inner"].id) == moved
        assert str(tree.id) == _reference(worktree, tmp_path)
    finally:
        forget(worktree)


def test_no_prescan_without_git_or_for_an_index_already_there(tmp_path: Path) -> None:
    """Nothing is started when git is not on PATH, while another process's
    prescan of the same index runs (its copy would be replaced under its
    git), or when the private index exists (not a first capture); the
    capture then does it all itself."""
    import fcntl

    worktree, _ = _moved_gitlink_repo(tmp_path / "none")
    path = private_index_path(pygit2.Repository(str(worktree)), worktree)
    git_prescan.start(str(worktree), {**os.environ, "PATH": str(tmp_path / "empty")})
    assert not path.exists() and git_prescan.take(str(path)) is None
    path.parent.mkdir(mode=0o700, exist_ok=True)
    other = path.with_name(path.name.replace("index-", "prescan-") + ".lock")
    with open(other, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        git_prescan.start(str(worktree), os.environ)
        assert not path.exists() and git_prescan.take(str(path)) is None
    try:
        GitBackend().snapshot(worktree, [_stamp()])
        assert path.exists()
        git_prescan.start(str(worktree), os.environ)
        assert git_prescan.take(str(path)) is None
    finally:
        forget(worktree)


def test_a_git_that_fails_leaves_the_paths_to_libgit2_and_every_gitlink_is_read(
        tmp_path: Path) -> None:
    """A prescan handed over whose git exits non-zero names nothing: the
    first scan asks libgit2's diff, which names no gitlink, so every gitlink
    is read (the moved one is captured)."""
    worktree, moved = _moved_gitlink_repo(tmp_path / "fails")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    started = git_prescan.start(str(worktree), {**os.environ, "PATH": str(bin_dir)})
    assert started is not None
    try:
        snap = GitBackend().snapshot(worktree, [_stamp()])
        tree = checkpoints(worktree)[snap.commit_id].peel(pygit2.Commit).tree
        assert str(tree["inner"].id) == moved
        assert str(tree.id) == _reference(worktree, tmp_path)
    finally:
        forget(worktree)


@pytest.mark.parametrize("at_most", [1000, 0])
def test_a_prescanned_capture_of_few_paths_leaves_the_copy_for_the_next_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at_most: int) -> None:
    """The hook exits after its first capture: when git named few paths, the
    copy stays the private index (not rewritten), and the next process's
    full scan gives the same tree; past ``UNWRITTEN_AT_MOST`` it is written."""
    from durability.backends import git_index

    monkeypatch.setattr(git_index, "UNWRITTEN_AT_MOST", at_most)
    worktree, _ = _moved_gitlink_repo(tmp_path / "few")
    user_mtime = (worktree / ".git" / "index").stat().st_mtime_ns
    started = git_prescan.start(str(worktree), os.environ)
    assert started is not None
    try:
        first = GitBackend().snapshot(worktree, [_stamp()])
        forget(worktree)  # a new process
        kept = Path(started).stat().st_mtime_ns == user_mtime - user_mtime % 1_000_000_000
        assert kept == (at_most > 0)
        second = GitBackend().snapshot(worktree, [_stamp()])
        assert _tree(worktree, second.commit_id) == _tree(worktree, first.commit_id) \
            == _reference(worktree, tmp_path)
    finally:
        forget(worktree)


def test_a_new_process_takes_its_first_scan_of_its_index_from_libgit2s_diff(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index an earlier process wrote (the hook's first capture, then an
    autostarted service; a restarted service): its first scan names the
    paths by libgit2's diff and reads only those (decision 0062), and its
    tree is what ``git add -A`` writes, with every kind of change made
    between the two processes."""
    worktree = make_git_repo(tmp_path / "again").resolve()
    for i in range(30):
        (worktree / f"t{i}.txt").write_text(f"tracked {i}\n")
    (worktree / "gone.txt").write_text("soon gone\n")
    git(worktree, "add", ".")
    GitBackend().snapshot(worktree, [_stamp()])  # the earlier process's full scan
    forget(worktree)  # a new process
    # Between the two: an edit, a same-size rewrite in the same second as the
    # index write (racily clean), a new file, a deletion, a mode change.
    index_file = private_index_path(pygit2.Repository(str(worktree)), worktree)
    (worktree / "t1.txt").write_text("changed one\n")
    (worktree / "t2.txt").write_text("tracked X\n")
    st = index_file.stat()
    os.utime(worktree / "t2.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    (worktree / "new.txt").write_text("new\n")
    (worktree / "gone.txt").unlink()
    (worktree / "t3.txt").chmod(0o755)
    reads = _count_reads(monkeypatch)
    try:
        state = worktree_index(worktree)
        snap = GitBackend().snapshot(worktree, [_stamp()])
        assert state.last_scan == "seeded"
        tree = checkpoints(worktree)[snap.commit_id].peel(pygit2.Commit).tree
        assert checkpoints(worktree)[tree["t2.txt"].id].data == b"tracked X\n"
        assert str(tree.id) == git_add_all_tree(worktree, tmp_path / "ref")
        # Only what changed, and the racy entry, were read: not the other 27.
        assert not {f"t{i}.txt" for i in range(4, 30)} & set(reads), reads
        # The next full scan in this process is the confined walk again.
        snap = GitBackend().snapshot(worktree, [_stamp()])
        assert state.last_scan == "full"
    finally:
        forget(worktree)
