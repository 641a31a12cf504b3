"""Issue 8 item 3: a path that changes kind (file, folder, symlink) must not
block git captures or restores, whatever its siblings are called.

Driven through the installed CLI (``durability snapshot`` / ``restore``) on
real git repositories.  Sibling names are chosen around git's sort order of
``a/``: ``a-b`` and ``a.txt`` sort before it, ``a0`` and ``b`` after.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import checkpoints, git, run_cli, run_cli_json, tree_manifest

KINDS = ("folder", "file", "link")
SIBLINGS = ("a-b", "a.txt", "a0")


def make_kind(root: Path, kind: str, tag: str) -> None:
    """Put a ``kind`` at ``root/a``, its content marked with ``tag``."""
    path = root / "a"
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    if kind == "folder":
        (path / "e").mkdir(parents=True)
        (path / "e" / "f").write_text(f"deep {tag}\n")
        (path / "g").write_text(f"shallow {tag}\n")
    elif kind == "file":
        path.write_text(f"file {tag}\n")
    else:
        os.symlink(f"nowhere-{tag}", path)


def snapshot(repo: Path) -> dict[str, object]:
    return dict(run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n"))


def restore(repo: Path, seq: int) -> None:
    done = run_cli("restore", "r", "--node", "n", "--seq", str(seq))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("sibling", SIBLINGS)
@pytest.mark.parametrize("before,after", [(b, a) for b in KINDS for a in KINDS if b != a])
def test_type_change_is_captured_and_restored_both_ways(
    tmp_path: Path, sibling: str, before: str, after: str
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / sibling).write_text("sibling\n")
    make_kind(repo, before, "one")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")

    first = snapshot(repo)
    want_first = tree_manifest(repo)
    make_kind(repo, after, "two")
    second = snapshot(repo)  # the reported defect: git-failed, index does not contain
    want_second = tree_manifest(repo)
    assert second["seq"] == 2 and not second["deduped"]
    assert commit_manifest_git(repo, str(second["commit_id"])) == want_second

    restore(repo, 1)  # back across the type change...
    assert tree_manifest(repo) == want_first
    assert commit_manifest_git(repo, str(first["commit_id"])) == want_first
    restore(repo, 2)  # ...and forward again
    assert tree_manifest(repo) == want_second
    third = snapshot(repo)  # and the index the restores left behind still captures
    assert third["commit_id"] == second["commit_id"] or not third["deduped"]


def commit_manifest_git(repo: Path, commit_id: str) -> dict[str, tuple[str, bool, bytes]]:
    """``tree_manifest``'s shape, read from a commit of a plain git repository."""
    import pygit2

    store = checkpoints(repo)
    found: dict[str, tuple[str, bool, bytes]] = {}

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for entry in tree:
            rel = prefix + str(entry.name)
            obj = store[entry.id]
            if entry.filemode == pygit2.enums.FileMode.TREE:
                walk(obj.peel(pygit2.Tree), rel + "/")
            elif entry.filemode == pygit2.enums.FileMode.LINK:
                found[rel] = ("link", False, obj.peel(pygit2.Blob).data)
            else:
                executable = entry.filemode == pygit2.enums.FileMode.BLOB_EXECUTABLE
                found[rel] = ("file", executable, obj.peel(pygit2.Blob).data)

    walk(store[commit_id].peel(pygit2.Commit).tree, "")
    return found
