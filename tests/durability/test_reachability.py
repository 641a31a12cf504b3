"""Reachability (contract 4, docs/DESIGN.md): whatever the user does to jj's history and
however hard git collects garbage, every recorded checkpoint stays restorable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from durability.backends.jj import git_dir
from durability.config import Settings
from durability.store import Store
from tests.helpers import cli, cli_json, commit_manifest, git, jj, make_jj_repo, tree_manifest

RUN = "run-gc"


def _capture_states(repo: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Four checkpoints, each with the tree it recorded."""
    states = []
    for n in range(4):
        (repo / f"file-{n}.txt").write_text(f"state {n}\n")
        (repo / "shared.txt").write_text("x" * n + "\n")
        if n == 2:
            (repo / "file-0.txt").unlink()
        answer = cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
        states.append((answer, tree_manifest(repo)))
    return states


def _unpinned_commit(repo: Path) -> str:
    """A snapshot jj takes on its own (no checkpoint, no pin): the control that
    shows the collection below really drops what nothing holds."""
    (repo / "scratch.txt").write_text("nobody pins this\n")
    commit = jj(repo, "log", "-r", "@", "--no-graph", "-T", "commit_id").stdout.strip()
    (repo / "scratch.txt").unlink()
    jj(repo, "log", "-r", "@", "--no-graph", "-T", "commit_id")
    return commit


def _rewrite_history(repo: Path) -> None:
    jj(repo, "new")
    jj(repo, "abandon", "-r", "mutable() & ~@ & ~root()", "--ignore-immutable")
    jj(repo, "op", "abandon", "..@-")
    jj(repo, "util", "gc", "--expire=now")
    store = git_dir(repo)
    git(store, "reflog", "expire", "--expire=now", "--all")
    git(store, "gc", "--prune=now", "--aggressive", "--quiet")


def _exists(repo: Path, commit: str) -> bool:
    return git(git_dir(repo), "cat-file", "-e", f"{commit}^{{commit}}",
               check=False).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("colocate", [True, False], ids=["colocated", "plain"])
def test_checkpoints_survive_abandon_op_abandon_and_gc(
    tmp_path: Path, settings: Settings, colocate: bool
) -> None:
    repo = make_jj_repo(tmp_path / "repo", colocate=colocate)
    states = _capture_states(repo)
    control = _unpinned_commit(repo)
    assert _exists(repo, control)
    _rewrite_history(repo)
    assert not _exists(repo, control), "gc kept an unpinned commit: the test proves nothing"
    for answer, manifest in states:
        assert _exists(repo, answer["commit_id"])
        assert commit_manifest(repo, answer["commit_id"]) == manifest
    for answer, manifest in reversed(states):
        done = cli("restore", RUN, "--node", "n", "--seq", str(answer["seq"]), "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["restored"]["commit_id"] == answer["commit_id"]
        assert tree_manifest(repo) == manifest
    with Store(settings.database) as store:
        rows = store.checkpoints(RUN)
    # Each pre-restore checkpoint is pinned too, and restorable after another gc.
    _rewrite_history(repo)
    for row in rows:
        assert _exists(repo, row.commit_id), row.seq


def test_pins_are_refs_not_bookmarks(repo: Path) -> None:
    answer = cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    refs = git(repo, "for-each-ref", "--format=%(refname)").stdout.split()
    assert f"refs/durability/jj/{answer['commit_id']}" in refs
    assert jj(repo, "bookmark", "list", "--all").stdout.strip() == ""


def _rich_tree(repo: Path, variant: int) -> None:
    """Binary, executable, symlink, nested, non-ASCII; each variant moves things
    around (a folder becomes a file, a file a symlink, bits flip)."""
    for name in ("bin", "x.sh", "nested", "link", "ünï.txt", "empty"):
        path = repo / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
    (repo / "bin").write_bytes(bytes(range(256)) * (variant + 1) + b"\x00")
    (repo / "x.sh").write_text(f"#!/bin/sh\necho {variant}\n")
    (repo / "x.sh").chmod(0o755 if variant % 2 == 0 else 0o644)
    if variant == 1:
        (repo / "nested").write_text("a file where a folder was\n")
        (repo / "link").symlink_to("bin")
    else:
        (repo / "nested" / "deeper").mkdir(parents=True)
        (repo / "nested" / "deeper" / "f").write_text(f"{variant}\n")
        (repo / "link").write_text("a file where a symlink was\n")
        (repo / "ünï.txt").write_text("ünïcødé\n")
        (repo / "empty").write_bytes(b"")


def test_a_forgotten_commit_is_restored_byte_exact_from_git(
    tmp_path: Path, settings: Settings
) -> None:
    repo = make_jj_repo(tmp_path / "repo")
    trees = []
    for variant in range(3):
        _rich_tree(repo, variant)
        cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
        trees.append(tree_manifest(repo))
    _rewrite_history(repo)
    with Store(settings.database) as store:
        commits = [c.commit_id for c in store.checkpoints(RUN)]
    # jj itself no longer knows them: the restore must go to the git store.
    assert jj(repo, "log", "-r", commits[0], check=False).returncode != 0
    for seq in (2, 1, 3, 1):
        done = cli("restore", RUN, "--node", "n", "--seq", str(seq))
        assert done.returncode == 0, done.stderr
        assert tree_manifest(repo) == trees[seq - 1]
