"""The git backend: selection, capture into a private index, per-attempt
commit chains, watcher-informed captures, linked worktrees and submodules.

Real git repositories in tmp_path, real pygit2; ``git`` itself is the
reference for what ``git add -A`` stages.
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

from durability.backends import Stamp, backend_for, backend_name, resolve_worktree
from durability.backends.git import GitBackend, forget, worktree_index
from durability.backends.git_commit import PIN_PREFIX, attempt_ref, parse_trailers
from durability.capture.capturer import Capturer, CaptureRequest
from durability.capture.inprocess import lazy_store
from durability.config import Settings
from durability.ground.errors import (
    GitFailed,
    InvalidBackend,
    NotAJjRepo,
    NotARepo,
    WorktreeMissing,
)
from durability.store import AttemptKey
from tests.helpers import (
    checkpoints,
    git,
    git_add_all_tree,
    make_git_repo,
    make_jj_repo,
    run_cli,
    run_cli_json,
)

KEY = AttemptKey("run-g", "node", 0, 1)


def stamp(key: AttemptKey = KEY, seq: int | None = None, **kw: object) -> Stamp:
    return Stamp(key=key, source=str(kw.get("source", "manual")),
                 request_ids=(f"req-{uuid.uuid4()}",),
                 tool_use_id=kw.get("tool_use_id"),  # type: ignore[arg-type]
                 seq=seq)


def tree_of(worktree: Path, commit_id: str) -> str:
    return str(checkpoints(worktree)[commit_id].peel(pygit2.Commit).tree_id)


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo")
    yield path.resolve()
    forget(path.resolve())


# -- which backend -------------------------------------------------------------


def test_backend_is_chosen_per_worktree(tmp_path: Path, grepo: Path) -> None:
    jj_repo = make_jj_repo(tmp_path / "jj").resolve()
    plain = tmp_path / "plain"
    plain.mkdir()
    (grepo / "sub" / "deeper").mkdir(parents=True)
    assert resolve_worktree(grepo / "sub" / "deeper") == grepo
    assert backend_name(grepo) == "git"
    assert backend_name(jj_repo) == "jj"  # colocated: jj wins
    assert backend_for(grepo, timeout_s=10).name == "git"
    with pytest.raises(NotARepo) as info:
        resolve_worktree(plain)
    assert info.value.code == "not-a-repo"
    with pytest.raises(WorktreeMissing):
        resolve_worktree(tmp_path / "absent")


def test_durability_backend_forces_one(tmp_path: Path, grepo: Path) -> None:
    jj_repo = make_jj_repo(tmp_path / "jj").resolve()
    assert backend_name(jj_repo, {"DURABILITY_BACKEND": "git"}) == "git"
    assert resolve_worktree(grepo, {"DURABILITY_BACKEND": "git"}) == grepo
    with pytest.raises(NotAJjRepo):
        resolve_worktree(grepo, {"DURABILITY_BACKEND": "jj"})
    with pytest.raises(InvalidBackend) as info:
        resolve_worktree(grepo, {"DURABILITY_BACKEND": "svn"})
    assert info.value.code == "invalid-backend"


# -- capture -------------------------------------------------------------------


def test_first_checkpoint_sits_on_head_and_later_ones_chain(grepo: Path) -> None:
    head = git(grepo, "rev-parse", "HEAD").stdout.strip()
    backend = GitBackend()
    first = backend.snapshot(grepo, [stamp(seq=1, source="hook", tool_use_id="toolu_1")])
    (grepo / "new.txt").write_text("new\n")
    second = backend.snapshot(grepo, [stamp(seq=2)])
    repo = checkpoints(grepo)
    assert [str(p) for p in repo[first.commit_id].parent_ids] == [head]
    assert [str(p) for p in repo[second.commit_id].parent_ids] == [first.commit_id]
    assert str(repo.references[attempt_ref(stamp())].target) == second.commit_id
    trailers = parse_trailers(repo[first.commit_id].message)
    assert trailers["Run"] == ["run-g"] and trailers["Node"] == ["node"]
    assert (trailers["Iteration"], trailers["Attempt"], trailers["Seq"]) == (["0"], ["1"], ["1"])
    assert (trailers["Source"], trailers["Tool-Use-Id"]) == (["hook"], ["toolu_1"])
    assert tree_of(grepo, second.commit_id) == git_add_all_tree(grepo, grepo.parent / "ref-index")


def test_unchanged_tree_returns_the_previous_checkpoint(grepo: Path) -> None:
    backend = GitBackend()
    first = backend.snapshot(grepo, [stamp(seq=1)])
    again = backend.snapshot(grepo, [stamp(seq=2)])
    assert again.commit_id == first.commit_id
    (grepo / "README.md").write_text("changed\n")
    assert backend.snapshot(grepo, [stamp(seq=2)]).commit_id != first.commit_id


def test_unborn_branch_gives_a_root_commit(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "unborn", commit=False).resolve()
    (repo / "a.txt").write_text("a\n")
    snap = GitBackend().snapshot(repo, [stamp(seq=1)])
    assert checkpoints(repo)[snap.commit_id].parent_ids == []
    assert git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).returncode != 0
    forget(repo)


def test_each_attempt_in_a_batch_gets_its_own_chain(grepo: Path, settings: Settings) -> None:
    capturer = Capturer(settings=settings, store=lazy_store(settings))
    other = AttemptKey("run-g", "other", 0, 1)
    requests = [CaptureRequest(key=k, worktree=grepo, source="hook", request_id=f"r-{i}",
                               tool_use_id=f"toolu_{i}")
                for i, k in enumerate([KEY, other, KEY])]
    outcomes = capturer.capture(requests, lock_timeout_s=30)
    assert [o.ok for o in outcomes] == [True, True, True]
    assert outcomes[0].commit_id == outcomes[2].commit_id != outcomes[1].commit_id
    assert [o.seq for o in outcomes] == [1, 1, 1] and outcomes[2].deduped
    repo = checkpoints(grepo)
    ours, theirs = repo[outcomes[0].commit_id], repo[outcomes[1].commit_id]
    assert ours.tree_id == theirs.tree_id
    assert parse_trailers(ours.message)["Request"] == ["r-0", "r-2"]
    assert parse_trailers(theirs.message)["Node"] == ["other"]
    (grepo / "README.md").write_text("two\n")
    later = capturer.capture([CaptureRequest(key=KEY, worktree=grepo, source="manual",
                                             request_id="r-9")], lock_timeout_s=30)[0]
    assert later.seq == 2
    assert parse_trailers(repo[later.commit_id].message)["Seq"] == ["2"]


def test_checkpoints_survive_git_gc(grepo: Path) -> None:
    backend = GitBackend()
    commits = []
    for i in range(3):
        (grepo / f"f{i}.txt").write_text(f"{i}\n")
        commits.append(backend.snapshot(grepo, [stamp(seq=i + 1)]).commit_id)
    forget(grepo)
    git(grepo, "-c", "gc.reflogExpire=now", "gc", "-q", "--prune=now")
    repo = checkpoints(grepo)
    assert all(repo.get(c) is not None for c in commits)
    assert [r for r in repo.references if r.startswith(PIN_PREFIX)] == [attempt_ref(stamp())]


# -- git add -A semantics --------------------------------------------------------


def test_tree_matches_git_add_all(grepo: Path, tmp_path: Path) -> None:
    (grepo / ".gitignore").write_text("*.log\nbuild/\n!keep.log\n")
    (grepo / ".git" / "info" / "exclude").write_text("secret.txt\n")
    excludes = tmp_path / "global-ignore"
    excludes.write_text("*.swp\n")
    git(grepo, "config", "core.excludesFile", str(excludes))
    for name in ("x.log", "keep.log", "secret.txt", "a.swp", "build/out.o", "src/ü ñ.txt"):
        (grepo / name).parent.mkdir(parents=True, exist_ok=True)
        (grepo / name).write_text(name)
    (grepo / "run.sh").write_text("#!/bin/sh\n")
    (grepo / "run.sh").chmod(0o755)
    (grepo / "link").symlink_to("src")
    (grepo / "dangling").symlink_to("nowhere")
    (grepo / "empty").write_bytes(b"")
    (grepo / "bin").write_bytes(bytes(range(256)))
    nested = make_git_repo(grepo / "vendor" / "nested")
    snap = GitBackend().snapshot(grepo, [stamp(seq=1)])
    tree = checkpoints(grepo)[snap.commit_id].peel(pygit2.Commit).tree
    assert str(tree.id) == git_add_all_tree(grepo, tmp_path / "ref-index")
    assert "x.log" not in tree and "keep.log" in tree and "secret.txt" not in tree
    assert "a.swp" not in tree and "build" not in tree
    assert tree["run.sh"].filemode == pygit2.enums.FileMode.BLOB_EXECUTABLE
    assert tree["link"].filemode == pygit2.enums.FileMode.LINK
    head = git(nested, "rev-parse", "HEAD").stdout.strip()
    assert str(tree["vendor/nested"].id) == head


def test_tracked_files_stay_tracked_when_ignored(grepo: Path, tmp_path: Path) -> None:
    """As git add -A: a file the user tracks is staged even if .gitignore matches it."""
    (grepo / "tracked.log").write_text("v1\n")
    git(grepo, "add", "tracked.log")
    (grepo / ".gitignore").write_text("*.log\n")
    (grepo / "tracked.log").write_text("v2\n")
    (grepo / "untracked.log").write_text("no\n")
    seeded = tmp_path / "seeded-index"
    shutil.copy(grepo / ".git" / "index", seeded)
    snap = GitBackend().snapshot(grepo, [stamp(seq=1)])
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, seeded)


# -- watcher-informed captures ---------------------------------------------------


def test_changed_paths_are_used_only_after_a_full_scan(grepo: Path, tmp_path: Path) -> None:
    backend = GitBackend()
    state = worktree_index(grepo)
    backend.snapshot(grepo, [stamp(seq=1)], changed_paths={"README.md"})
    assert state.last_scan == "seeded"  # the whole tree, through libgit2's diff (0050)
    (grepo / "README.md").write_text("edited\n")
    snap = backend.snapshot(grepo, [stamp(seq=2)], changed_paths={"README.md"})
    assert state.last_scan == "paths"
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, tmp_path / "ref")


def test_changed_paths_miss_what_they_do_not_name(grepo: Path) -> None:
    """The contract is the watcher's: paths it does not name are not looked at
    (this is what makes an informed capture cheap)."""
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(seq=1)])
    (grepo / "unnamed.txt").write_text("x\n")
    informed = backend.snapshot(grepo, [stamp(seq=2)], changed_paths=set())
    full = backend.snapshot(grepo, [stamp(seq=2)])
    assert informed.commit_id != full.commit_id
    assert "unnamed.txt" in checkpoints(grepo)[full.commit_id].peel(
        pygit2.Commit).tree


@pytest.mark.parametrize("change", ["new-folder", "deleted-folder", "file-to-folder",
                                    "folder-to-file", "renamed-folder", "outside-and-dotgit"])
def test_changed_folders_restage_what_is_under_them(grepo: Path, tmp_path: Path,
                                                    change: str) -> None:
    (grepo / "d" / "e").mkdir(parents=True)
    (grepo / "d" / "e" / "f.txt").write_text("f\n")
    (grepo / "d" / "g.txt").write_text("g\n")
    (grepo / "plain.txt").write_text("p\n")
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(seq=1)])
    named = _make_change(grepo, change)
    snap = backend.snapshot(grepo, [stamp(seq=2)], changed_paths=named)
    state = worktree_index(grepo)
    assert state.last_scan == "paths"
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, tmp_path / "ref")
    # The tree is written from the restaged paths alone, except where a file
    # and a folder swapped places: libgit2's write_tree then (the index's tree).
    swapped = change in ("file-to-folder", "folder-to-file")
    assert state.trees_of_paths == (0 if swapped else 1)


def test_an_informed_capture_after_a_restore_writes_the_restored_tree(
        grepo: Path, tmp_path: Path) -> None:
    """A restore rewrites index entries behind the stage's back: the next
    informed capture must not build its tree from the one before the restore."""
    (grepo / "a.txt").write_text("one\n")
    (grepo / "b.txt").write_text("one\n")
    backend = GitBackend()
    first = backend.snapshot(grepo, [stamp(seq=1)]).commit_id
    (grepo / "a.txt").write_text("two\n")
    (grepo / "b.txt").write_text("two\n")
    second = backend.snapshot(grepo, [stamp(seq=2)], changed_paths={"a.txt", "b.txt"})
    backend.restore(grepo, first, pre_restore=second.commit_id)
    (grepo / "c.txt").write_text("new\n")
    snap = backend.snapshot(grepo, [stamp(seq=3)], changed_paths={"c.txt"})
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, tmp_path / "ref")
    assert checkpoints(grepo)[snap.commit_id].peel(pygit2.Commit).tree["a.txt"].data == b"one\n"


def _make_change(repo: Path, change: str) -> set[str]:
    if change == "new-folder":
        (repo / "n" / "m").mkdir(parents=True)
        (repo / "n" / "m" / "x.txt").write_text("x\n")
        return {"n"}
    if change == "deleted-folder":
        shutil.rmtree(repo / "d")
        return {"d"}
    if change == "file-to-folder":
        (repo / "plain.txt").unlink()
        (repo / "plain.txt").mkdir()
        (repo / "plain.txt" / "inner").write_text("i\n")
        return {"plain.txt", "plain.txt/inner"}
    if change == "folder-to-file":
        shutil.rmtree(repo / "d")
        (repo / "d").write_text("now a file\n")
        return {"d"}
    if change == "renamed-folder":
        (repo / "d").rename(repo / "moved")
        return {"d", "moved"}
    (repo / "plain.txt").write_text("changed\n")
    return {"plain.txt", "../escape", "/abs", ".git/index", "./plain.txt"}


def test_rule_changes_force_a_full_scan(grepo: Path, tmp_path: Path) -> None:
    exclude = grepo / ".git" / "info" / "exclude"
    exclude.write_text("hidden.txt\n")
    (grepo / "hidden.txt").write_text("h\n")
    backend = GitBackend()
    state = worktree_index(grepo)
    backend.snapshot(grepo, [stamp(seq=1)])
    (grepo / "a.tmp").write_text("a\n")
    (grepo / ".gitignore").write_text("*.tmp\n")
    backend.snapshot(grepo, [stamp(seq=2)], changed_paths={".gitignore"})
    assert state.last_scan == "full"
    backend.snapshot(grepo, [stamp(seq=2)], changed_paths=set())
    assert state.last_scan == "paths"
    exclude.write_text("")  # a watcher of the worktree never sees this file change
    snap = backend.snapshot(grepo, [stamp(seq=3)], changed_paths=set())
    assert state.last_scan == "full"
    assert "hidden.txt" in checkpoints(grepo)[snap.commit_id].peel(
        pygit2.Commit).tree
    assert tree_of(grepo, snap.commit_id) == git_add_all_tree(grepo, tmp_path / "ref")


def test_a_shared_exclude_change_forces_a_full_scan_in_a_linked_worktree(
        grepo: Path, tmp_path: Path) -> None:
    """A linked worktree's ignore rules come from the shared info/exclude
    (its own git dir has none git reads): a change there is a rule change."""
    wt = (tmp_path / "linked").resolve()
    git(grepo, "worktree", "add", "-q", str(wt), "-b", "linked")
    exclude = grepo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("hidden.txt\n")
    (wt / "hidden.txt").write_text("h\n")
    backend = GitBackend()
    try:
        state = worktree_index(wt)
        backend.snapshot(wt, [stamp(seq=1)])
        backend.snapshot(wt, [stamp(seq=2)], changed_paths=set())
        assert state.last_scan == "paths"
        exclude.write_text("")
        snap = backend.snapshot(wt, [stamp(seq=3)], changed_paths=set())
        assert state.last_scan == "full"
        assert "hidden.txt" in checkpoints(wt)[snap.commit_id].peel(
            pygit2.Commit).tree
    finally:
        forget(wt)


def test_a_deep_file_the_shared_exclude_ignores_stays_out_in_a_linked_worktree(
        grepo: Path, tmp_path: Path) -> None:
    """Past ``git_ignore.DEEP`` folders the scan applies git's rules itself:
    in a linked worktree its ``info/exclude`` is the shared one too."""
    from durability.backends.git_ignore import DEEP

    wt = (tmp_path / "linked").resolve()
    git(grepo, "worktree", "add", "-q", str(wt), "-b", "linked")
    exclude = grepo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("secret.txt\n")
    folder = "/".join(["d"] * (DEEP + 2))
    (wt / folder).mkdir(parents=True)
    (wt / folder / "secret.txt").write_text("SECRET=x\n")
    (wt / folder / "kept.txt").write_text("k\n")
    (wt / "secret.txt").write_text("shallow\n")
    try:
        snap = GitBackend().snapshot(wt, [stamp(seq=1)])
        tree = checkpoints(wt)[snap.commit_id].peel(pygit2.Commit).tree
        assert f"{folder}/kept.txt" in tree
        assert "secret.txt" not in tree and f"{folder}/secret.txt" not in tree
    finally:
        forget(wt)


def _linked_with_attributes(grepo: Path, tmp_path: Path) -> Path:
    """A linked worktree whose only attributes are the shared
    ``info/attributes`` (the one git reads): ``*.txt`` is text, CRLF on disk."""
    wt = (tmp_path / "linked").resolve()
    git(grepo, "worktree", "add", "-q", str(wt), "-b", "linked")
    (grepo / ".git" / "info").mkdir(exist_ok=True)
    (grepo / ".git" / "info" / "attributes").write_text("*.txt text eol=crlf\n")
    return wt


def test_a_capture_applies_the_shared_info_attributes_in_a_linked_worktree(
        grepo: Path, tmp_path: Path) -> None:
    wt = _linked_with_attributes(grepo, tmp_path)
    (wt / "f.txt").write_bytes(b"a\r\nb\r\n")
    try:
        snap = GitBackend().snapshot(wt, [stamp(seq=1)])
        repo = checkpoints(wt)
        tree = repo[snap.commit_id].peel(pygit2.Commit).tree
        assert bytes(repo[tree["f.txt"].id].read_raw()) == b"a\nb\n"  # as git add stores it
        assert tree_of(wt, snap.commit_id) == git_add_all_tree(wt, tmp_path / "ref")
    finally:
        forget(wt)


def test_a_restore_writes_through_the_shared_info_attributes_in_a_linked_worktree(
        grepo: Path, tmp_path: Path) -> None:
    wt = _linked_with_attributes(grepo, tmp_path)
    (wt / "f.txt").write_bytes(b"a\r\nb\r\n")
    try:
        first = run_cli_json("snapshot", str(wt), "--run", "r-attr", "--node", "n")
        (wt / "f.txt").write_bytes(b"changed\r\n")
        run_cli_json("snapshot", str(wt), "--run", "r-attr", "--node", "n")
        done = run_cli("restore", "r-attr", "--node", "n", "--seq", str(first["seq"]))
        assert done.returncode == 0, done.stderr
        assert (wt / "f.txt").read_bytes() == b"a\r\nb\r\n"  # as git checkout writes it
    finally:
        forget(wt)


# -- the user's repository is left alone -----------------------------------------------


def test_private_index_lives_in_the_git_folder(grepo: Path) -> None:
    before = (grepo / ".git" / "index").read_bytes()
    GitBackend().snapshot(grepo, [stamp(seq=1)])
    private = sorted(p.name for p in (grepo / ".git" / "durability").iterdir())
    # the checkpoint store and its lock, the index, and the file whose flock
    # its writers hold (``index_lock``)
    assert len(private) == 4 and private[:2] == ["checkpoints.git", "index-" + private[1][6:]]
    assert private[2:] == ["store.lock", "writer-" + private[1].removeprefix("index-") + ".lock"]
    assert (grepo / ".git" / "index").read_bytes() == before
    assert git(grepo, "status", "--porcelain").stdout == ""
    assert not (grepo / ".git" / "logs" / "refs" / "durability").exists()


def test_linked_worktree(grepo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(grepo, "worktree", "add", "-q", "-b", "side", str(linked))
    linked = linked.resolve()
    assert resolve_worktree(linked) == linked and backend_name(linked) == "git"
    main_index = (grepo / ".git" / "index").read_bytes()
    linked_gitdir = grepo / ".git" / "worktrees" / "linked"
    linked_index = (linked_gitdir / "index").read_bytes()
    (linked / "only-here.txt").write_text("linked\n")
    snap = GitBackend().snapshot(linked, [stamp(seq=1)])
    repo = checkpoints(linked)
    commit = repo[snap.commit_id]
    assert "only-here.txt" in commit.peel(pygit2.Commit).tree
    assert str(commit.parent_ids[0]) == git(linked, "rev-parse", "side").stdout.strip()
    assert (linked_gitdir / "durability").is_dir()
    assert (grepo / ".git" / "index").read_bytes() == main_index
    assert (linked_gitdir / "index").read_bytes() == linked_index
    # Pinned in the shared refs: visible (and gc-safe) from the main worktree.
    assert checkpoints(grepo)[snap.commit_id].type == pygit2.enums.ObjectType.COMMIT
    assert tree_of(linked, snap.commit_id) == git_add_all_tree(linked, tmp_path / "ref")
    forget(linked)


def test_submodule_gitlink_is_recorded_as_it_is(grepo: Path, tmp_path: Path) -> None:
    upstream = make_git_repo(tmp_path / "upstream")
    first = git(upstream, "rev-parse", "HEAD").stdout.strip()
    (upstream / "more.txt").write_text("more\n")
    git(upstream, "add", "more.txt")
    git(upstream, "commit", "-q", "-m", "more")
    second = git(upstream, "rev-parse", "HEAD").stdout.strip()
    git(grepo, "-c", "protocol.file.allow=always", "submodule", "add", "-q",
        str(upstream), "sub")
    git(grepo, "commit", "-q", "-m", "add sub")
    sub = grepo / "sub"
    git(sub, "checkout", "-q", first)  # the submodule moved; the superproject not told
    (sub / "scratch.txt").write_text("inside the submodule\n")
    snap = GitBackend().snapshot(grepo, [stamp(seq=1)])
    tree = checkpoints(grepo)[snap.commit_id].peel(pygit2.Commit).tree
    assert tree["sub"].filemode == pygit2.enums.FileMode.COMMIT
    assert str(tree["sub"].id) == first != second
    assert str(tree.id) == git_add_all_tree(grepo, tmp_path / "ref")
    # Inside the submodule, the submodule is a worktree of its own.
    assert resolve_worktree(sub) == sub.resolve() and backend_name(sub.resolve()) == "git"
    inner = GitBackend().snapshot(sub.resolve(), [stamp(seq=1)])
    assert "scratch.txt" in checkpoints(sub)[inner.commit_id].peel(
        pygit2.Commit).tree
    forget(sub.resolve())


# -- failures ---------------------------------------------------------------------


def test_missing_and_broken_worktrees(tmp_path: Path, grepo: Path) -> None:
    with pytest.raises(WorktreeMissing):
        GitBackend().snapshot(tmp_path / "absent", [stamp(seq=1)])
    GitBackend().snapshot(grepo, [stamp(seq=1)])
    with pytest.raises(GitFailed):
        GitBackend().tree_id(grepo, "0" * 40)
    shutil.rmtree(grepo / ".git" / "objects")
    shutil.rmtree(grepo / ".git" / "durability" / "checkpoints.git" / "objects")
    (grepo / "README.md").write_text("cannot be stored\n")
    with pytest.raises(GitFailed) as info:
        GitBackend().snapshot(grepo, [stamp(seq=2)])
    assert info.value.code == "git-failed"


def test_seeded_entries_get_their_stat_data_on_the_first_scan(grepo: Path) -> None:
    """Entries copied from the user's index carry no stat data; the first scan
    must record it, or every later full scan would hash every tracked file."""
    for i in range(5):
        (grepo / f"t{i}.txt").write_text(f"tracked {i}\n")
    git(grepo, "add", ".")
    GitBackend().snapshot(grepo, [stamp(seq=1)])
    [private] = (grepo / ".git" / "durability").glob("index-*")
    env = {**os.environ, "GIT_INDEX_FILE": str(private)}
    listing = subprocess.run(["git", "-C", str(grepo), "ls-files", "--debug"], env=env,
                             capture_output=True, text=True, check=True).stdout
    sizes = [line.split("size: ")[1].split()[0] for line in listing.splitlines()
             if "size: " in line]
    assert len(sizes) == 6 and "0" not in sizes


def test_informed_capture_notices_a_submodule_head_move(grepo: Path, tmp_path: Path) -> None:
    """A submodule's HEAD lives in the superproject's .git/modules/, which a
    watcher does not report: informed captures recheck every gitlink."""
    upstream = make_git_repo(tmp_path / "upstream")
    first = git(upstream, "rev-parse", "HEAD").stdout.strip()
    (upstream / "more.txt").write_text("more\n")
    git(upstream, "add", "more.txt")
    git(upstream, "commit", "-q", "-m", "more")
    git(grepo, "-c", "protocol.file.allow=always", "submodule", "add", "-q",
        str(upstream), "sub")
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(seq=1)])
    git(grepo / "sub", "checkout", "-q", first)
    snap = backend.snapshot(grepo, [stamp(seq=2)], changed_paths={"sub/more.txt"})
    assert worktree_index(grepo).last_scan == "paths"
    tree = checkpoints(grepo)[snap.commit_id].peel(pygit2.Commit).tree
    assert str(tree["sub"].id) == first
    assert str(tree.id) == git_add_all_tree(grepo, tmp_path / "ref")


def test_a_repository_first_recorded_by_an_informed_capture_is_rechecked_after(
        grepo: Path, tmp_path: Path) -> None:
    """A nested repository an informed capture records as a gitlink (cloned
    there after the full scan) is rechecked by the next informed captures as
    any other gitlink: its HEAD moves inside its own .git, where no watcher
    looks, and a path inside it stands for it."""
    backend = GitBackend()
    backend.snapshot(grepo, [stamp(seq=1)])
    nested = make_git_repo(grepo / "vendor" / "nested")
    backend.snapshot(grepo, [stamp(seq=2)], changed_paths={"vendor"})
    (nested / "more.txt").write_text("more\n")
    git(nested, "add", "more.txt")
    git(nested, "commit", "-q", "-m", "more")
    head = git(nested, "rev-parse", "HEAD").stdout.strip()
    snap = backend.snapshot(grepo, [stamp(seq=3)], changed_paths={"vendor/nested/more.txt"})
    assert worktree_index(grepo).last_scan == "paths"
    tree = checkpoints(grepo)[snap.commit_id].peel(pygit2.Commit).tree
    assert str(tree["vendor/nested"].id) == head, "the gitlink kept the HEAD before the commit"
    git(nested, "commit", "-q", "--allow-empty", "-m", "empty")  # no file changes: no event
    head = git(nested, "rev-parse", "HEAD").stdout.strip()
    snap = backend.snapshot(grepo, [stamp(seq=4)], changed_paths=set())
    tree = checkpoints(grepo)[snap.commit_id].peel(pygit2.Commit).tree
    assert str(tree["vendor/nested"].id) == head, "the gitlink kept the HEAD before the commit"


def test_concurrent_captures_of_one_worktree_are_serialised(
        grepo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads sharing the open state (the service's case) never interleave a
    capture: every one succeeds and holds exactly the tree of its round.

    Deterministic: each round's files are written before a barrier releases
    the four captures at once, and the next round's writes wait for all of
    them (writers racing a capture are tests/durability/backends/
    test_writers.py).  Strong: a probe holds each ``stage`` for 20 ms and
    counts how many run at once, so a missing lock is seen every time.
    """
    import threading
    import time

    state = worktree_index(grepo)
    inside, most = [0], [0]
    count_lock = threading.Lock()
    real_stage = state.stage

    def probe(changed_paths: object = None) -> pygit2.Oid:
        with count_lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.02)  # long enough for an unserialised capture to enter
            return real_stage(changed_paths)  # type: ignore[arg-type]
        finally:
            with count_lock:
                inside[0] -= 1

    monkeypatch.setattr(state, "stage", probe)
    rounds, threads_n = 3, 4
    start, done = threading.Barrier(threads_n), threading.Barrier(threads_n)
    errors: list[BaseException] = []
    trees: dict[tuple[int, int], str] = {}

    def work(i: int) -> None:
        try:
            for j in range(rounds):
                (grepo / f"t{i}-{j}.txt").write_text(f"{i} {j}\n")
                start.wait(30)
                snap = GitBackend().snapshot(grepo, [stamp(AttemptKey("run-t", f"n{i}", 0, 1))])
                trees[i, j] = tree_of(grepo, snap.commit_id)
                done.wait(30)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
            start.abort()
            done.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert most[0] == 1
    repo = checkpoints(grepo)
    for (_i, j), tree in trees.items():
        names = {e.name for e in repo[tree].peel(pygit2.Tree)}
        assert names == {"README.md"} | {f"t{a}-{b}.txt" for a in range(threads_n)
                                         for b in range(j + 1)}
    final = GitBackend().snapshot(grepo, [stamp(seq=1)])
    assert tree_of(grepo, final.commit_id) == git_add_all_tree(grepo, tmp_path / "ref")
    assert len([r for r in repo.references if r.startswith(PIN_PREFIX)]) == threads_n + 1


