"""``durability forget``: a path taken out of every checkpoint, locally and on
the remote, with seqs, pointers and undo points kept (real jj, real git, a
bare repository as the remote)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pygit2
import pytest

from durability.backends.git_commit import key_ref
from durability.config import Settings
from durability.ground.errors import InvalidInput
from durability.remote.replicator import Replicator
from durability.restore.apply import restore
from durability.retention.forget import run_forget
from durability.store.remote_rows import Remotes
from tests.durability.remote.remotekit import manifest_commits, remote_refs
from tests.durability.retention.gckit import KEY, Recorder, make_repo, store_git
from tests.helpers import git, run_cli

SECRET = b"API_KEY=sk-live-0123456789abcdef\n"


def _exists(git_dir: Path, oid: str) -> bool:
    return subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e", oid],
                          capture_output=True, timeout=60).returncode == 0


def _add_remote(tmp_path: Path, settings: Settings, wt: Path) -> Path:
    """A bare repository, added as ``wt``'s remote ``backup``."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    Remotes(settings.database).add(str(wt), "backup", bare.as_uri())
    return bare


def _recorded(settings: Settings, wt: Path, captures: int = 1, *,
              delete: bool = True) -> Recorder:
    """A recorder of ``wt`` that captured ``keys.txt`` (SECRET) ``captures``
    times; ``keys.txt`` is then deleted from disk, unless not ``delete``."""
    rec = Recorder(settings, wt)
    (wt / "keys.txt").write_bytes(SECRET)
    for _ in range(captures):
        rec.capture()
    if delete:
        (wt / "keys.txt").unlink()
    return rec


def _push(settings: Settings, rec: Recorder) -> None:
    assert Replicator(settings, lambda: rec.store, os.environ).run_once() > 0


def _build(kind: str, tmp_path: Path, settings: Settings) -> tuple[Recorder, Path, int]:
    """A worktree with a remote whose ``keys.txt`` (a key an agent wrote into a file no secret
    pattern names, so replication pushed it) is in 50 checkpoints, an undo
    point (a restore's pre-restore checkpoint) among them, most of them
    pushed; ``keys.txt`` is then deleted from disk.  Returns the recorder, the
    bare remote and the undo point's seq."""
    wt = make_repo(kind, tmp_path / "wt")
    bare = _add_remote(tmp_path, settings, wt)
    rec = Recorder(settings, wt)
    rec.capture()  # seq 1: no keys.txt yet
    (wt / "keys.txt").write_bytes(SECRET)
    for _ in range(29):  # seqs 2-30
        rec.capture()
    _push(settings, rec)
    edited = b"edited, never captured\n"
    (wt / "work.txt").write_bytes(edited)
    done = restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=10)
    undo = done.pre_restore_seq  # 31: the tree before the restore, keys.txt included
    rec.content[(KEY, undo)] = edited
    for _ in range(19):  # 32-50
        rec.capture()
    _push(settings, rec)
    rec.capture()  # 51: not pushed yet (still in the outbox)
    (wt / "keys.txt").unlink()
    return rec, bare, undo


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["git", "jj"])
def test_forget_removes_a_file_from_50_checkpoints_here_and_on_the_remote(
        kind: str, tmp_path: Path, settings: Settings) -> None:
    rec, bare, undo = _build(kind, tmp_path, settings)
    wt, store = rec.worktree, rec.store
    blob = str(pygit2.hash(SECRET))
    git_dir = Path(store_git(wt).path)
    before = store.checkpoints(KEY.run_id)
    holding = [c.seq for c in before if c.seq != 1]
    assert len(holding) == 50 and undo == 31
    assert _exists(git_dir, blob) and _exists(bare, blob)

    dry = run_forget(settings, store, wt, ["keys.txt"], dry_run=True)
    assert sorted(c.seq for c in dry.holding) == holding
    assert [c.commit_id for c in store.checkpoints(KEY.run_id)] == [c.commit_id
                                                                    for c in before]
    assert _exists(git_dir, blob)

    report = run_forget(settings, store, wt, ["keys.txt"])

    assert sorted(c.seq for c in report.holding) == holding
    assert report.remotes and report.remotes[0]["error"] is None, report.remotes
    assert report.blobs_left == [] and report.collected
    after = store.checkpoints(KEY.run_id)
    assert [c.seq for c in after] == [c.seq for c in before]
    assert [(c.label, c.source, c.request_id) for c in after] == [
        (c.label, c.source, c.request_id) for c in before]
    assert not _exists(git_dir, blob)
    repo = store_git(wt)
    for old, new in zip(before, after, strict=True):
        assert (new.commit_id != old.commit_id) == (old.seq in holding)
        tree = repo[new.commit_id].peel(pygit2.Commit).tree
        assert "keys.txt" not in tree
        assert bytes(repo[tree["work.txt"].id].data) == rec.content[(KEY, new.seq)]
    pointer = next(a.jj_pointer for a in store.attempts(KEY.run_id) if a.attempt == 1)
    assert pointer == after[-1].commit_id
    # Every row's commit is pinned (gc would keep it): jj, its own ref; git,
    # the attempt's ref, whose chain holds it.
    tip = repo.references[key_ref(KEY)].target if kind == "git" else None
    for c in after:
        if tip is None:
            assert f"refs/durability/jj/{c.commit_id}" in repo.references
        else:
            assert str(tip) == c.commit_id or repo.descendant_of(tip, c.commit_id)

    # The remote: our refs name the new commits only; its own gc drops the blob.
    refs = remote_refs(bare)
    named = {c.commit_id for c in after}
    assert not {c.commit_id for c in before if c.seq in holding} & set(refs.values())
    assert manifest_commits(bare) <= named and manifest_commits(bare)
    git(bare, "gc", "-q", "--prune=now")
    assert not _exists(bare, blob)

    # Every checkpoint still restores, the undo point included; the rest of
    # the tree is intact and keys.txt does not come back.
    for seq in (1, 2, undo, 51):
        done = restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=seq)
        assert done.restored.seq == seq
        assert (wt / "work.txt").read_bytes() == rec.content[(KEY, seq)]
        assert (wt / "README.md").read_text() == "hello\n"
        assert not (wt / "keys.txt").exists()
    # The checkpoint left in the outbox goes to the remote as the new commit.
    _push(settings, rec)
    assert {c.commit_id for c in store.checkpoints(KEY.run_id)} >= manifest_commits(bare)
    assert after[-1].commit_id in manifest_commits(bare)
    states = Remotes(settings.database).states(after)
    assert {s["backup"] for s in states.values()} == {"pushed"}, states
    rec.close()


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_forget_of_one_run_leaves_other_runs(kind: str, tmp_path: Path,
                                             settings: Settings) -> None:
    from durability.store import AttemptKey

    wt = make_repo(kind, tmp_path / "wt")
    rec = Recorder(settings, wt)
    other = AttemptKey("sess-other", "session", 0, 1)
    (wt / "key.pem").write_bytes(SECRET)
    rec.capture()
    rec.capture(key=other)
    (wt / "key.pem").unlink()
    report = run_forget(settings, rec.store, wt, ["key.pem"], run_id=KEY.run_id)
    assert [c.run_id for c in report.holding] == [KEY.run_id]
    repo = store_git(wt)
    mine = rec.store.checkpoints(KEY.run_id)[0]
    theirs = rec.store.checkpoints(other.run_id)[0]
    assert "key.pem" not in repo[mine.commit_id].peel(pygit2.Commit).tree
    assert "key.pem" in repo[theirs.commit_id].peel(pygit2.Commit).tree
    # Still held by the other run: the blob stays, and the report says so.
    assert report.blobs_left == [str(pygit2.hash(SECRET))]
    rec.close()


def test_a_path_still_in_the_worktree_is_refused(tmp_path: Path,
                                                 settings: Settings) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = _recorded(settings, wt, delete=False)
    with pytest.raises(InvalidInput, match=r"keys\.txt still in"):
        run_forget(settings, rec.store, wt, ["keys.txt"])
    assert "keys.txt" in store_git(wt)[rec.store.checkpoints(KEY.run_id)[0].commit_id].peel(
        pygit2.Commit).tree
    with pytest.raises(InvalidInput):
        run_forget(settings, rec.store, wt, ["../outside"])
    rec.close()


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_the_dry_run_refuses_a_path_still_in_the_worktree_as_the_run_does(
        kind: str, tmp_path: Path, settings: Settings) -> None:
    wt = make_repo(kind, tmp_path / "wt")
    rec = _recorded(settings, wt, delete=False)
    with pytest.raises(InvalidInput, match=r"keys\.txt still in") as dry:
        run_forget(settings, rec.store, wt, ["keys.txt"], dry_run=True)
    with pytest.raises(InvalidInput) as real:
        run_forget(settings, rec.store, wt, ["keys.txt"])
    assert str(dry.value) == str(real.value)
    rec.close()
    # The installed command: the same line and exit status, with or without --dry-run.
    dry_done = run_cli("forget", "keys.txt", "--dry-run", cwd=wt)
    done = run_cli("forget", "keys.txt", cwd=wt)
    assert dry_done.returncode == done.returncode == 2, (dry_done.stderr, done.stderr)
    assert dry_done.stderr == done.stderr
    assert done.stderr.startswith("durability: invalid-value: keys.txt still in")
    assert dry_done.stdout == "" and (wt / "keys.txt").read_bytes() == SECRET


def test_a_path_git_now_ignores_may_stay_on_disk(tmp_path: Path,
                                                 settings: Settings) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    (wt / "keys.txt").write_bytes(SECRET)
    (wt / "certs").mkdir()
    (wt / "certs" / "a.pem").write_text("a\n")
    (wt / "certs" / "notes.txt").write_text("n\n")
    rec.capture()
    # Ignored from now on: no capture takes keys.txt in again, so it may stay.
    (wt / ".gitignore").write_text("keys.txt\n*.pem\n")
    dry = run_forget(settings, rec.store, wt, ["keys.txt"], dry_run=True)
    assert [c.seq for c in dry.holding] == [1]
    # A folder is refused while a file below it is not ignored.
    for paths in (["certs"], ["keys.txt", "certs"]):
        for dry_run in (True, False):
            with pytest.raises(InvalidInput, match=r"^certs still in .*have git ignore it"):
                run_forget(settings, rec.store, wt, paths, dry_run=dry_run)
    report = run_forget(settings, rec.store, wt, ["keys.txt", "certs/a.pem"])
    assert [c.seq for c in report.holding] == [1] and report.blobs_left == []
    assert (wt / "keys.txt").read_bytes() == SECRET
    later = rec.capture()
    tree = store_git(wt)[later.commit_id].peel(pygit2.Commit).tree
    assert "keys.txt" not in tree and "certs/a.pem" not in tree and "certs/notes.txt" in tree
    assert all("keys.txt" not in store_git(wt)[c.commit_id].peel(pygit2.Commit).tree
               for c in rec.store.checkpoints(KEY.run_id))
    # One the user's own index tracks is refused, ignored or not: a fresh
    # private index starts from the user's index.
    (wt / "tracked.cfg").write_text("t\n")
    git(wt, "add", "tracked.cfg")
    rec.capture()
    (wt / ".gitignore").write_text("keys.txt\n*.pem\ntracked.cfg\n")
    with pytest.raises(InvalidInput, match=r"^tracked\.cfg still in"):
        run_forget(settings, rec.store, wt, ["tracked.cfg"], dry_run=True)
    rec.close()


def test_jj_keeps_tracking_an_ignored_path_so_it_must_be_gone(tmp_path: Path,
                                                              settings: Settings) -> None:
    wt = make_repo("jj", tmp_path / "wt")
    rec = _recorded(settings, wt, delete=False)
    (wt / ".gitignore").write_text("keys.txt\n")
    # What the refusal guards against: jj's next snapshot still holds it.
    later = rec.capture()
    assert "keys.txt" in store_git(wt)[later.commit_id].peel(pygit2.Commit).tree
    for dry_run in (True, False):
        with pytest.raises(InvalidInput, match=r"^keys\.txt still in"):
            run_forget(settings, rec.store, wt, ["keys.txt"], dry_run=dry_run)
    rec.close()


def test_the_command_dry_run_and_a_path_no_checkpoint_holds(tmp_path: Path,
                                                            settings: Settings) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    (wt / "keys.txt").write_bytes(SECRET)
    (wt / "sub").mkdir()
    (wt / "sub" / "key.txt").write_text("k\n")
    rec.capture()
    (wt / "keys.txt").unlink()
    (wt / "sub" / "key.txt").unlink()
    rec.close()
    done = run_cli("forget", "keys.txt", "--dry-run", "--json", cwd=wt)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [c["seq"] for c in data["checkpoints"]] == [1] and data["dry_run"]
    # A relative path starts at the current folder inside the worktree.
    done = run_cli("forget", "key.txt", "--dry-run", "--json", cwd=wt / "sub")
    assert json.loads(done.stdout)["paths"] == ["sub/key.txt"], done.stderr
    done = run_cli("forget", "../../elsewhere", "--worktree", str(wt), cwd=wt / "sub")
    assert done.returncode == 2
    assert done.stderr.startswith("durability: invalid-value: ")
    assert "elsewhere' is outside the worktree" in done.stderr
    done = run_cli("forget", "never-there.txt", "--worktree", str(wt))
    assert done.returncode == 0, done.stderr
    assert "nothing to forget" in done.stdout
    done = run_cli("forget", "keys.txt", "--worktree", str(wt))
    assert done.returncode == 0, done.stderr
    assert "forgot keys.txt from 1 checkpoints" in done.stdout
    assert "1 of 1 blobs gone" in done.stdout
    done = run_cli("forget", "keys.txt", "--worktree", str(wt), "--run", "no-such-run")
    assert done.returncode == 3, done.stderr


def test_a_remote_that_refuses_is_replaced_by_the_next_forget(tmp_path: Path,
                                                              settings: Settings) -> None:
    wt = make_repo("git", tmp_path / "wt")
    bare = _add_remote(tmp_path, settings, wt)
    rec = _recorded(settings, wt, 2, delete=False)
    _push(settings, rec)
    (wt / "keys.txt").unlink()
    blob = str(pygit2.hash(SECRET))
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho refused by policy >&2\nexit 1\n")
    hook.chmod(0o755)

    done = run_cli("forget", "keys.txt", "--worktree", str(wt))
    assert done.returncode == 9, (done.stdout, done.stderr)
    assert done.stderr.startswith("durability: remote-failed: remote backup")
    assert len(done.stderr.strip().splitlines()) == 1
    assert "forgot keys.txt from 2 checkpoints" in done.stdout
    assert not _exists(Path(store_git(wt).path), blob)
    git(bare, "gc", "-q", "--prune=now")
    assert _exists(bare, blob)  # the remote still holds the old chain

    hook.unlink()
    report = run_forget(settings, rec.store, wt, ["keys.txt"])
    assert report.holding == []
    assert [r["error"] for r in report.remotes] == [None]
    git(bare, "gc", "-q", "--prune=now")
    assert not _exists(bare, blob)
    assert manifest_commits(bare) == {c.commit_id for c in rec.store.checkpoints(KEY.run_id)}
    assert not list((settings.state_dir / "forget").iterdir())
    rec.close()


def test_forget_waits_for_the_worktree_lock_and_changes_nothing_without_it(
        tmp_path: Path, settings: Settings) -> None:
    from durability.ground.errors import LockTimeout

    wt = make_repo("git", tmp_path / "wt")
    rec = _recorded(settings, wt)
    before = rec.store.checkpoints(KEY.run_id)
    with rec.capturer.lock(wt, 10), pytest.raises(LockTimeout):
        run_forget(settings, rec.store, wt, ["keys.txt"], lock_timeout_s=0.2)
    assert rec.store.checkpoints(KEY.run_id) == before
    assert _exists(Path(store_git(wt).path), str(pygit2.hash(SECRET)))
    rec.close()


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_forget_killed_before_the_rows_moved_is_finished_by_the_next(
        kind: str, tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from durability.retention import forget as forget_module

    wt = make_repo(kind, tmp_path / "wt")
    rec = _recorded(settings, wt, 3)
    before = rec.store.checkpoints(KEY.run_id)

    class Killed(Exception):
        pass

    def killed(*_args: object, **_kw: object) -> None:
        raise Killed  # the process dies after the commits and refs, before the rows

    with monkeypatch.context() as m:
        m.setattr(forget_module.store_prune, "apply", killed)
        with pytest.raises(Killed):
            run_forget(settings, rec.store, wt, ["keys.txt"])
    assert rec.store.checkpoints(KEY.run_id) == before
    repo = store_git(wt)
    for c in before:  # every row still names a commit that is there, keys.txt and all
        assert "keys.txt" in repo[c.commit_id].peel(pygit2.Commit).tree
    restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=2)
    assert (wt / "work.txt").read_bytes() == rec.content[(KEY, 2)]
    assert (wt / "keys.txt").read_bytes() == SECRET  # the restore brought it back: delete again
    (wt / "keys.txt").unlink()

    report = run_forget(settings, rec.store, wt, ["keys.txt"])
    assert report.blobs_left == [], report.notes
    after = rec.store.checkpoints(KEY.run_id)
    assert [c.seq for c in after][:len(before)] == [c.seq for c in before]
    repo = store_git(wt)
    assert not [r for r in repo.references if r.startswith("refs/durability/forget-pending/")]
    for c in after:
        tree = repo[c.commit_id].peel(pygit2.Commit).tree
        assert "keys.txt" not in tree and "work.txt" in tree
    rec.close()


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_another_machine_restores_the_forgotten_checkpoints_from_the_remote(
        kind: str, tmp_path: Path, settings: Settings) -> None:
    from tests.durability.remote.remotekit import own_store

    wt = make_repo(kind, tmp_path / "wt")
    bare = _add_remote(tmp_path, settings, wt)
    rec = _recorded(settings, wt, 3, delete=False)
    _push(settings, rec)
    (wt / "keys.txt").unlink()
    assert run_forget(settings, rec.store, wt, ["keys.txt"]).remotes[0]["error"] is None
    rows = rec.store.checkpoints(KEY.run_id)

    other = tmp_path / "machine-b"
    b_env = own_store({**os.environ, "DURABILITY_HOME": str(other / "state"),
                       "DURABILITY_SPOOL_DIR": str(other / "spool"),
                       "DURABILITY_SOCKET": str(other / "s.sock")})
    there = tmp_path / "b"
    there.mkdir()
    assert run_cli("remote", "add", "backup", bare.as_uri(), "--worktree", str(there),
                   env=b_env).returncode == 0
    for seq in (1, 3):
        done = run_cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
                       "--seq", str(seq), "--json", env=b_env)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["restored"] == {"seq": seq,
                                                       "commit_id": rows[seq - 1].commit_id}
        assert (there / "work.txt").read_bytes() == rec.content[(KEY, seq)]
        assert not (there / "keys.txt").exists()
    rec.close()


def test_a_process_that_kept_the_index_open_does_not_take_the_path_back(
        tmp_path: Path, settings: Settings) -> None:
    """The service keeps each git worktree's private index in memory: after a
    forget run elsewhere (here: the installed command), its next capture
    must not find the forgotten path's entry there and track it again once
    it is back on disk and ignored."""
    wt = make_repo("git", tmp_path / "wt")
    rec = _recorded(settings, wt, delete=False)  # this process stands for the service
    os.rename(wt / "keys.txt", tmp_path / "env.saved")
    done = run_cli("forget", "keys.txt", "--worktree", str(wt))
    assert done.returncode == 0, done.stderr
    (wt / ".gitignore").write_text("keys.txt\n")
    os.rename(tmp_path / "env.saved", wt / "keys.txt")
    out = rec.capture()
    tree = store_git(wt)[out.commit_id].peel(pygit2.Commit).tree
    assert ".gitignore" in tree and "keys.txt" not in tree
    rec.close()


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_capture_during_forget_waits_and_lands_on_the_rewritten_checkpoints(
        kind: str, tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from durability.backends import history as backend_prune

    wt = make_repo(kind, tmp_path / "wt")
    rec = _recorded(settings, wt, 3)
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(rec.capture(b"during forget\n")))
    rewrite = (backend_prune.forget_chain if kind == "git" else backend_prune.forget_commits)

    def rewriting(*args: object, **kw: object) -> dict[str, str]:
        thread.start()  # a capture asks while forget holds the worktree lock
        return rewrite(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(backend_prune, rewrite.__name__, rewriting)
    report = run_forget(settings, rec.store, wt, ["keys.txt"])
    thread.join(60)
    assert len(outcome) == 1 and report.blobs_left == []
    rows = rec.store.checkpoints(KEY.run_id)
    assert [c.seq for c in rows] == [1, 2, 3, 4]
    repo = store_git(wt)
    last = repo[rows[-1].commit_id].peel(pygit2.Commit)
    assert bytes(repo[last.tree["work.txt"].id].data) == b"during forget\n"
    assert "keys.txt" not in last.tree
    if kind == "git":  # it went on the rewritten chain, not the old one
        assert [str(p) for p in last.parent_ids] == [rows[2].commit_id]
    for c in rows:
        assert "keys.txt" not in repo[c.commit_id].peel(pygit2.Commit).tree
    rec.close()


def test_an_unreachable_remote_stops_forget_before_anything_changes(
        tmp_path: Path, settings: Settings) -> None:
    from durability.remote.transport import RemoteFailed

    wt = make_repo("git", tmp_path / "wt")
    Remotes(settings.database).add(str(wt), "backup", (tmp_path / "gone.git").as_uri())
    rec = _recorded(settings, wt)
    before = rec.store.checkpoints(KEY.run_id)
    with pytest.raises(RemoteFailed):
        run_forget(settings, rec.store, wt, ["keys.txt"])
    assert rec.store.checkpoints(KEY.run_id) == before
    assert "keys.txt" in store_git(wt)[before[0].commit_id].peel(pygit2.Commit).tree
    rec.close()
