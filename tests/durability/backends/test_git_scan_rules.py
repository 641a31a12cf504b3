"""The git backend's own scan (git_scan) against ``git add -A``: folders that
hold a ``.git``, names that are not UTF-8, and ignored folders deep down.

Each case compares a checkpoint's tree with what ``git add -A && git
write-tree`` gives on a copy of the same index, on full and on
watcher-informed scans."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget, worktree_index
from durability.store import AttemptKey
from tests.helpers import checkpoints, git, git_add_all_tree, make_git_repo

KEY = AttemptKey("run-s", "node", 0, 1)


def stamp(seq: int) -> Stamp:
    return Stamp(key=KEY, source="manual", request_ids=(f"req-{seq}",), seq=seq)


def paths_of(worktree: Path, commit_id: str) -> set[bytes]:
    """Every blob and gitlink path of a checkpoint's tree, as bytes."""
    repo = checkpoints(worktree)
    found: set[bytes] = set()
    stack = [(b"", repo[commit_id].peel(pygit2.Commit).tree)]
    while stack:
        prefix, tree = stack.pop()
        for entry in tree:
            name = prefix + (entry.raw_name or b"")
            if entry.filemode == pygit2.enums.FileMode.TREE:
                stack.append((name + b"/", repo[entry.id].peel(pygit2.Tree)))
            else:
                found.add(name)
    return found


def tree_of(worktree: Path, commit_id: str) -> str:
    return str(checkpoints(worktree)[commit_id].peel(pygit2.Commit).tree_id)


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo").resolve()
    yield path
    forget(path)


# -- a tracked folder gains a .git ------------------------------------------------


def _gain_git(lib: Path, kind: str) -> None:
    if kind == "empty-repo":
        git(lib, "init", "-q")
    elif kind == "stale-gitfile":
        (lib / ".git").write_text("gitdir: /nonexistent/worktrees/gone\n")
    elif kind == "repo-with-commit":
        git(lib, "init", "-q", "-b", "main")
        git(lib, "add", "a")
        git(lib, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "l")
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("informed", [False, True], ids=["full", "informed"])
@pytest.mark.parametrize("kind", ["empty-repo", "stale-gitfile", "repo-with-commit"])
def test_tracked_files_stay_when_their_folder_gains_a_git(
        grepo: Path, tmp_path: Path, kind: str, informed: bool) -> None:
    """``git add -A`` keeps walking a folder it tracks files in, whatever
    ``.git`` appears there: its tracked files stay, a new one is added."""
    lib = grepo / "lib"
    lib.mkdir()
    (lib / "a").write_text("a\n")
    (lib / "b").write_text("b\n")
    (grepo / "r").write_text("r\n")
    git(grepo, "add", "-A")
    git(grepo, "commit", "-q", "-m", "lib")
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(1)])
    seeded = tmp_path / "seeded-index"
    shutil.copy(grepo / ".git" / "index", seeded)
    _gain_git(lib, kind)
    (lib / "c").write_text("c\n")
    (lib / "a").write_text("a2\n")
    changed = {"lib", "lib/c", "lib/a", "lib/.git"} if informed else None
    snap = backend.snapshot(grepo, [stamp(2)], changed_paths=changed)
    if informed:
        assert worktree_index(grepo).last_scan == "paths"
    held = paths_of(grepo, snap.commit_id)
    assert {b"lib/a", b"lib/b", b"lib/c", b"r"} <= held
    assert not any(b"/.git" in p for p in held)
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, seeded)
    # And the next full scan agrees.
    again = backend.snapshot(grepo, [stamp(3)])
    assert tree_of(grepo, again.commit_id) == tree_of(grepo, snap.commit_id)


def test_an_untracked_folder_with_a_stale_git_file_is_a_folder(
        grepo: Path, tmp_path: Path) -> None:
    """A ``.git`` that is no repository (a removed worktree's gitfile): git
    walks the folder as any other, leaving only that ``.git`` out."""
    stale = grepo / "s"
    (stale / "deep").mkdir(parents=True)
    (stale / ".git").write_text("gitdir: /nonexistent/worktrees/gone\n")
    (stale / "y").write_text("y\n")
    (stale / "deep" / "z").write_text("z\n")
    seeded = tmp_path / "seeded-index"
    shutil.copy(grepo / ".git" / "index", seeded)
    snap = GitBackend().snapshot(grepo, [stamp(1)])
    held = paths_of(grepo, snap.commit_id)
    assert {b"s/y", b"s/deep/z"} <= held and b"s/.git" not in held
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, seeded)


def test_an_untracked_repository_is_still_a_gitlink(grepo: Path, tmp_path: Path) -> None:
    nested = make_git_repo(grepo / "vendor" / "nested")
    (nested / "extra").write_text("not in the superproject\n")
    seeded = tmp_path / "seeded-index"
    shutil.copy(grepo / ".git" / "index", seeded)
    snap = GitBackend().snapshot(grepo, [stamp(1)])
    tree = checkpoints(grepo)[snap.commit_id].peel(pygit2.Commit).tree
    assert tree["vendor/nested"].filemode == pygit2.enums.FileMode.COMMIT
    assert str(tree["vendor/nested"].id) == git(nested, "rev-parse", "HEAD").stdout.strip()
    assert str(tree.id) == git_add_all_tree(grepo, seeded)


# -- names that are not UTF-8 -------------------------------------------------------


@pytest.mark.parametrize("informed", [False, True], ids=["full", "informed"])
def test_ignore_rules_hold_for_names_that_are_not_utf8(
        grepo: Path, tmp_path: Path, informed: bool) -> None:
    """libgit2's binding takes text only; a name it cannot take is still
    judged by git's rules, never taken as "not ignored"."""
    (grepo / ".gitignore").write_text("*.log\nbuild*/\n")
    git(grepo, "add", ".gitignore")
    git(grepo, "commit", "-q", "-m", "rules")
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(1)])
    seeded = tmp_path / "seeded-index"
    shutil.copy(grepo / ".git" / "index", seeded)
    root = os.fsencode(grepo)
    with open(root + b"/bad\xffname.log", "wb") as f:
        f.write(b"ignored\n")
    with open(root + b"/kept\xff.txt", "wb") as f:
        f.write(b"kept\n")
    os.makedirs(root + b"/build\xfe/sub")
    with open(root + b"/build\xfe/sub/out.o", "wb") as f:
        f.write(b"ignored too\n")
    changed = ({os.fsdecode(n) for n in (b"bad\xffname.log", b"kept\xff.txt", b"build\xfe")}
               if informed else None)
    snap = backend.snapshot(grepo, [stamp(2)], changed_paths=changed)
    held = paths_of(grepo, snap.commit_id)
    assert b"kept\xff.txt" in held
    assert b"bad\xffname.log" not in held
    assert not any(p.startswith(b"build\xfe") for p in held)
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, seeded)


# -- an ignored folder above a path a watcher names ---------------------------------


@pytest.mark.parametrize("named", ["file", "subfolder"])
@pytest.mark.parametrize("where", ["deep", "not-utf8"])
def test_a_watcher_named_path_below_an_ignored_folder_stays_out(
        grepo: Path, tmp_path: Path, named: str, where: str) -> None:
    """git ignores what is below an ignored folder: a path a watcher names
    there stays out, however deep, whatever its name's bytes."""
    (grepo / ".gitignore").write_text("build/\n")
    git(grepo, "add", ".gitignore")
    git(grepo, "commit", "-q", "-m", "rules")
    top = os.fsencode(grepo)
    base = b"/".join(b"d%d" % i for i in range(26)) if where == "deep" else b"n\xff"
    os.makedirs(top + b"/" + base)
    with open(top + b"/" + base + b"/kept.txt", "wb") as f:
        f.write(b"kept\n")
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(1)])
    seeded = tmp_path / "seeded-index"
    shutil.copy(grepo / ".git" / "index", seeded)
    build = base + b"/build"
    os.makedirs(build.join([top + b"/", b"/sub"]))
    with open(top + b"/" + build + b"/out.o", "wb") as f:
        f.write(b"ignored\n")
    with open(top + b"/" + build + b"/sub/deeper.o", "wb") as f:
        f.write(b"ignored\n")
    name = build + (b"/out.o" if named == "file" else b"/sub")
    snap = backend.snapshot(grepo, [stamp(2)], changed_paths={os.fsdecode(name)})
    assert worktree_index(grepo).last_scan == "paths"
    held = paths_of(grepo, snap.commit_id)
    assert base + b"/kept.txt" in held
    assert not any(p.startswith(build) for p in held), sorted(held)
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, seeded)


@pytest.mark.parametrize("informed", [False, True], ids=["full", "informed"])
@pytest.mark.parametrize("where", ["deep", "not-utf8"])
def test_an_untracked_file_in_an_ignored_folder_holding_tracked_files_stays_out(
        grepo: Path, tmp_path: Path, where: str, informed: bool) -> None:
    """A folder the rules ignore that still holds tracked files (tracked
    before the rule, or ``git add -f``): git keeps those and leaves out
    every other file below it, by a full scan as by a watcher-named path,
    whatever the depth or the bytes of the names."""
    top = os.fsencode(grepo)
    base = b"/".join(b"d%d" % i for i in range(26)) if where == "deep" else b"n\xff"
    os.makedirs(top + b"/" + base + b"/sub")
    with open(top + b"/" + base + b"/tracked.txt", "wb") as f:
        f.write(b"tracked\n")
    git(grepo, "add", ".")
    git(grepo, "commit", "-q", "-m", "tracked")
    (grepo / ".gitignore").write_bytes(base + b"/\n")
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(1)])
    seeded = tmp_path / "seeded-index"
    shutil.copy(grepo / ".git" / "index", seeded)
    for name in (b"/new\xfe.txt", b"/sub/new.txt"):
        with open(top + b"/" + base + name, "wb") as f:
            f.write(b"ignored\n")
    changed = {os.fsdecode(base + b"/new\xfe.txt"), os.fsdecode(base + b"/sub")}
    snap = backend.snapshot(grepo, [stamp(2)], changed_paths=changed if informed else None)
    assert worktree_index(grepo).last_scan == ("paths" if informed else "full")
    held = paths_of(grepo, snap.commit_id)
    assert base + b"/tracked.txt" in held
    assert held & {base + b"/new\xfe.txt", base + b"/sub/new.txt"} == set(), "ignored, taken"
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, seeded)


def test_an_uninitialised_submodule_keeps_its_gitlink(grepo: Path, tmp_path: Path) -> None:
    """An empty submodule folder holds no repository: its gitlink stays as
    recorded (libgit2, asked to open it, would search upward and find ours)."""
    upstream = make_git_repo(tmp_path / "upstream")
    git(grepo, "-c", "protocol.file.allow=always", "submodule", "add", "-q",
        str(upstream), "sub")
    git(grepo, "commit", "-q", "-m", "add sub")
    recorded = git(grepo, "rev-parse", "HEAD:sub").stdout.strip()
    git(grepo, "submodule", "deinit", "-q", "-f", "sub")
    assert (grepo / "sub").is_dir() and not any((grepo / "sub").iterdir())
    seeded = tmp_path / "seeded-index"
    shutil.copy(grepo / ".git" / "index", seeded)
    for changed in (None, {"sub"}):
        snap = GitBackend().snapshot(grepo, [stamp(1)], changed_paths=changed)
        tree = checkpoints(grepo)[snap.commit_id].peel(pygit2.Commit).tree
        assert tree["sub"].filemode == pygit2.enums.FileMode.COMMIT
        assert str(tree["sub"].id) == recorded
        assert str(tree.id) == git_add_all_tree(grepo, seeded)
