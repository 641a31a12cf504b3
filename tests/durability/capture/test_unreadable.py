"""Issue 8 item 4: one path that cannot be read no longer blocks captures and
restores.  The capture holds everything else, and each unreadable path is a
gap (``unreadable-path``) filed once per path per attempt; a restore proceeds
unless it would overwrite such a path.

The tests run as root, and root reads a mode-000 file.  So the CLI runs under
``setpriv --bounding-set -dac_override,-dac_read_search``: still uid 0 (it
owns every file of the test), but without the two capabilities that bypass
file modes, so ``open`` of a mode-000 file fails with EACCES exactly as it
does for an ordinary user.  ``assert_unreadable`` proves it for each test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    checkpoints,
    commit_manifest,
    durability_exe,
    git,
    make_jj_repo,
    run_cli_json,
)

DROP = ["--bounding-set", "-dac_override,-dac_read_search"]


def setpriv() -> str:
    found = shutil.which("setpriv")
    if found is None:
        pytest.fail("setpriv (util-linux) is needed to make a file unreadable to root")
    return found


def unprivileged(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([setpriv(), *DROP, *argv], capture_output=True, text=True,
                          timeout=180)


def assert_unreadable(path: Path) -> None:
    """The dropped-capability process really cannot read ``path``."""
    probe = "ls" if path.is_dir() else "cat"
    done = unprivileged(probe, str(path))
    assert done.returncode != 0 and "Permission denied" in done.stderr, done


def dur(*args: str) -> subprocess.CompletedProcess[str]:
    return unprivileged(durability_exe(), *args)


def snapshot(repo: Path) -> dict[str, Any]:
    done = dur("snapshot", str(repo), "--run", "r", "--node", "n", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def gaps() -> list[dict[str, Any]]:
    done = dur("gaps", "r", "--json")
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def spool_lines(tmp_path: Path) -> list[dict[str, Any]]:
    spool = tmp_path / "spool"
    return [json.loads(line) for f in spool.glob("*.ndjson")
            for line in f.read_text().splitlines() if line.strip()]


def lock(path: Path) -> None:
    os.chmod(path, 0)
    assert_unreadable(path)


def unlock_all(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                os.chmod(full, 0o755 if os.path.isdir(full) else 0o644)


def git_manifest(repo: Path, commit_id: str) -> dict[str, bytes]:
    import pygit2

    store = checkpoints(repo)
    found: dict[str, bytes] = {}

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for entry in tree:
            obj = store[entry.id]
            if entry.filemode == pygit2.enums.FileMode.TREE:
                walk(obj.peel(pygit2.Tree), f"{prefix}{entry.name}/")
            else:
                found[f"{prefix}{entry.name}"] = obj.peel(pygit2.Blob).data

    walk(store[commit_id].peel(pygit2.Commit).tree, "")
    return found


@pytest.fixture
def grepo(tmp_path: Path) -> Any:
    repo = tmp_path / "g"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "ok.txt").write_text("v1\n")
    (repo / "locked.txt").write_text("locked v1\n")
    (repo / "x").write_text("root x v1\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "x").write_text("sub x v1\n")
    (repo / "d4").mkdir()
    (repo / "d4" / "t").write_text("t v1\n")
    (repo / ".hidden").write_text("h v1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    yield repo
    unlock_all(repo)


def make_unreadable_mess(repo: Path) -> None:
    """Every kind of unreadable path, next to readable changes that must be captured."""
    (repo / "ok.txt").write_text("v2\n")
    (repo / "sub" / "x").write_text("sub x v2\n")  # same name as the unreadable root x
    (repo / ".hidden").write_text("h v2\n")
    (repo / "locked.txt").write_text("locked v2, never captured\n")
    lock(repo / "locked.txt")  # tracked, changed, then unreadable
    lock(repo / "x")  # tracked, unchanged, unreadable
    (repo / "new.txt").write_text("new, unreadable\n")
    lock(repo / "new.txt")  # untracked and unreadable
    (repo / "d2").mkdir()
    (repo / "d2" / "z").write_text("in an unreadable new folder\n")
    lock(repo / "d2")
    lock(repo / "d4")  # a tracked folder that cannot be listed


def test_git_capture_leaves_unreadable_paths_out_and_files_one_gap_each(
    grepo: Path, tmp_path: Path
) -> None:
    first = snapshot(grepo)
    make_unreadable_mess(grepo)
    second = snapshot(grepo)  # failed with git-failed before
    expected = ["d2", "d4", "locked.txt", "new.txt", "x"]
    assert [s["path"] for s in second.get("skipped", [])] == expected
    assert {s["reason"] for s in second.get("skipped", [])} == {"unreadable-path"}
    tree = git_manifest(grepo, second["commit_id"])
    assert tree["ok.txt"] == b"v2\n" and tree["sub/x"] == b"sub x v2\n"
    assert tree[".hidden"] == b"h v2\n"
    # What could not be read keeps its last captured content, or stays out.
    assert tree["locked.txt"] == b"locked v1\n" and tree["x"] == b"root x v1\n"
    assert tree["d4/t"] == b"t v1\n" and "new.txt" not in tree and "d2/z" not in tree
    assert second["seq"] == first["seq"] + 1

    (grepo / "ok.txt").write_text("v3\n")
    third = snapshot(grepo)
    assert not third["deduped"] and len(third.get("skipped", [])) == 5
    recorded = [g for g in gaps() if g["reason"] == "unreadable-path"]
    assert sorted(g["detail"].split(":")[0] for g in recorded) == expected
    assert len([r for r in spool_lines(tmp_path) if r["reason"] == "unreadable-path"]) == 5


def test_git_restore_proceeds_when_it_overwrites_only_captured_paths(grepo: Path) -> None:
    snapshot(grepo)
    make_unreadable_mess(grepo)
    snapshot(grepo)
    done = dur("restore", "r", "--node", "n", "--seq", "1", "--json")
    assert done.returncode == 0, done.stderr  # the pre-restore capture used to fail
    unlock_all(grepo)
    assert (grepo / "ok.txt").read_text() == "v1\n"
    assert (grepo / "sub" / "x").read_text() == "sub x v1\n"
    # Left alone: their current content is in no checkpoint.
    assert (grepo / "locked.txt").read_text() == "locked v2, never captured\n"
    assert (grepo / "new.txt").read_text() == "new, unreadable\n"
    assert (grepo / "d2" / "z").exists()


def test_git_restore_refuses_to_overwrite_an_unreadable_changed_file(grepo: Path) -> None:
    snapshot(grepo)
    (grepo / "ok.txt").write_text("v2\n")
    snapshot(grepo)
    (grepo / "ok.txt").write_text("v3, never captured\n")
    lock(grepo / "ok.txt")
    done = dur("restore", "r", "--node", "n", "--seq", "1")
    assert done.returncode == 7 and "restore-conflict" in done.stderr, done.stderr
    assert "ok.txt" in done.stderr
    os.chmod(grepo / "ok.txt", 0o644)
    assert (grepo / "ok.txt").read_text() == "v3, never captured\n"


@pytest.fixture
def jrepo(tmp_path: Path) -> Any:
    repo = make_jj_repo(tmp_path / "j")
    (repo / "ok.txt").write_text("v1\n")
    (repo / "kept.txt").write_text("kept v1\n")
    yield repo
    unlock_all(repo)


def test_jj_capture_leaves_a_new_unreadable_file_out_and_restore_proceeds(
    jrepo: Path, tmp_path: Path
) -> None:
    first = snapshot(jrepo)
    (jrepo / "ok.txt").write_text("v2\n")
    (jrepo / "new.txt").write_text("secret\n")
    lock(jrepo / "new.txt")
    lock(jrepo / "kept.txt")  # tracked and unchanged: jj does not reopen it
    second = snapshot(jrepo)  # jj failed: "Failed to open file ... Permission denied"
    assert [(s["path"], s["reason"]) for s in second.get("skipped", [])] == [
        ("kept.txt", "unreadable-path"), ("new.txt", "unreadable-path")]
    tree = commit_manifest(jrepo, second["commit_id"])
    assert tree["ok.txt"][2] == b"v2\n" and "new.txt" not in tree
    assert tree["kept.txt"][2] == b"kept v1\n"

    (jrepo / "ok.txt").write_text("v3\n")
    snapshot(jrepo)
    assert len([g for g in gaps() if g["reason"] == "unreadable-path"]) == 2
    assert len([r for r in spool_lines(tmp_path) if r["reason"] == "unreadable-path"]) == 2

    done = dur("restore", "r", "--node", "n", "--seq", str(first["seq"]), "--json")
    assert done.returncode == 0, done.stderr
    unlock_all(jrepo)
    assert (jrepo / "ok.txt").read_text() == "v1\n"
    assert (jrepo / "new.txt").read_text() == "secret\n"


def test_jj_changed_then_unreadable_tracked_file_is_an_unreadable_path_gap(
    jrepo: Path
) -> None:
    """What jj cannot do: leave out a tracked file whose content changed.
    The capture fails, but with a gap that names the path."""
    snapshot(jrepo)
    (jrepo / "kept.txt").write_text("kept v2, longer\n")
    lock(jrepo / "kept.txt")
    done = dur("snapshot", str(jrepo), "--run", "r", "--node", "n")
    assert done.returncode == 5 and "unreadable-path" in done.stderr, done.stderr
    recorded = [g for g in gaps() if g["reason"] == "unreadable-path"]
    assert len(recorded) == 1 and "kept.txt" in recorded[0]["detail"]


def test_git_unreadable_names_with_pattern_characters_exclude_only_themselves(
    grepo: Path
) -> None:
    """The unreadable paths are kept out of libgit2's diff by pathspec
    patterns: a name with ``*``, ``[`` or a leading ``!`` must match itself
    only, never a readable file its unescaped pattern would match."""
    for name in ("we*ird[1].txt", "!bang"):
        (grepo / name).write_text("unreadable\n")
    (grepo / "weXXird1.txt").write_text("readable v1\n")
    (grepo / "bang").write_text("readable bang v1\n")
    snapshot(grepo)
    (grepo / "weXXird1.txt").write_text("readable v2\n")
    (grepo / "bang").write_text("readable bang v2\n")
    for name in ("we*ird[1].txt", "!bang"):
        (grepo / name).write_text("changed, unreadable\n")
        lock(grepo / name)
    done = snapshot(grepo)
    assert [s["path"] for s in done.get("skipped", [])] == ["!bang", "we*ird[1].txt"]
    tree = git_manifest(grepo, done["commit_id"])
    assert tree["weXXird1.txt"] == b"readable v2\n" and tree["bang"] == b"readable bang v2\n"
    assert tree["we*ird[1].txt"] == b"unreadable\n" and tree["!bang"] == b"unreadable\n"


INFORMED = r"""
import json, sys
from pathlib import Path
from durability.backends.git import GitBackend
root, changed = Path(sys.argv[1]), json.loads(sys.argv[2])
backend = GitBackend()
first = backend.snapshot(root)                        # a full scan: the index is primed
(root / "ok.txt").write_text("informed v2\n")
(root / "locked.txt").write_text("locked v2\n")
import os; os.chmod(root / "locked.txt", 0)
second = backend.snapshot(root, changed_paths=changed)  # only the watcher's paths
from durability.backends.git import worktree_index
assert worktree_index(root).last_scan == "paths"
os.chmod(root / "locked.txt", 0o644)
third = backend.snapshot(root, changed_paths=[])      # readable again: restaged anyway
print(json.dumps([[s.path for s in snap.skipped] for snap in (first, second, third)]
                 + [backend.tree_id(root, s.commit_id) for s in (second, third)]))
"""


def test_git_informed_capture_skips_an_unreadable_changed_path(grepo: Path) -> None:
    """A watcher-informed capture (only the changed paths) leaves out an
    unreadable one too, and restages it once it is readable again."""
    import sys

    done = unprivileged(sys.executable, "-c", INFORMED, str(grepo),
                        json.dumps(["ok.txt", "locked.txt"]))
    assert done.returncode == 0, done.stderr
    skipped_first, skipped_second, skipped_third, tree_second, tree_third = json.loads(
        done.stdout)
    assert (skipped_first, skipped_second, skipped_third) == ([], ["locked.txt"], [])
    assert tree_second != tree_third
    import pygit2

    store = checkpoints(grepo)
    second = store[tree_second].peel(pygit2.Tree)
    third = store[tree_third].peel(pygit2.Tree)
    assert store[second["ok.txt"].id].peel(pygit2.Blob).data == b"informed v2\n"
    assert store[second["locked.txt"].id].peel(pygit2.Blob).data == b"locked v1\n"
    assert store[third["locked.txt"].id].peel(pygit2.Blob).data == b"locked v2\n"


def test_through_the_service_the_answer_names_the_paths_and_gaps_are_filed_once(
    grepo: Path, tmp_path: Path
) -> None:
    """The service (itself unable to read the file) answers with the skipped
    paths, and repeated captures file each path's gap once."""
    from tests.helpers import ping, wait_for

    sock = Path(os.environ["DURABILITY_SOCKET"])
    with open(tmp_path / "service.log", "ab") as log:
        service = subprocess.Popen([setpriv(), *DROP, durability_exe(), "serve"],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        wait_for(lambda: ping(sock, timeout=2), timeout=30)
        make_unreadable_mess(grepo)
        for round_ in range(3):
            (grepo / "ok.txt").write_text(f"round {round_}\n")
            done = cli_snapshot(grepo)
            assert [s["path"] for s in done["skipped"]] == [
                "d2", "d4", "locked.txt", "new.txt", "x"]
        answer = ping(sock)
        assert answer is not None and answer["captures"] >= 3  # the service took them
    finally:
        service.terminate()
        service.wait(30)
    assert len([g for g in gaps() if g["reason"] == "unreadable-path"]) == 5
    assert len([r for r in spool_lines(tmp_path) if r["reason"] == "unreadable-path"]) == 5


def cli_snapshot(repo: Path) -> dict[str, Any]:
    """``durability snapshot`` as root: the capture itself runs in the service."""

    return dict(run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n"))


JJ_REPEAT = r"""
import json, sys
from pathlib import Path
from durability.backends.jj import JjBackend, find_jj
root, jj = Path(sys.argv[1]), sys.argv[2]
backend = JjBackend(find_jj({"DURABILITY_JJ": jj}), timeout_s=120)
out = []
for i in range(3):
    (root / "ok.txt").write_text(f"v{i}\n")
    snap = backend.snapshot(root)
    out.append([s.path for s in snap.skipped])
print(json.dumps(out))
"""


def test_jj_a_long_lived_capturer_leaves_known_unreadable_paths_out_from_the_first_run(
    jrepo: Path, tmp_path: Path
) -> None:
    import sys

    from tests.helpers import jj_path

    calls = tmp_path / "jj-calls"
    wrapper = tmp_path / "jj-counting"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {jj_path()} "$@"\n')
    wrapper.chmod(0o755)
    (jrepo / "secret.txt").write_text("s\n")
    lock(jrepo / "secret.txt")
    done = unprivileged(sys.executable, "-c", JJ_REPEAT, str(jrepo), str(wrapper))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["secret.txt"]] * 3
    logs = [line for line in calls.read_text().splitlines() if " log " in f" {line} "]
    # First capture: the failing run, then the run without the path; then one each.
    assert len(logs) == 4, logs
    assert all("snapshot.auto-track" in line for line in logs[1:])
