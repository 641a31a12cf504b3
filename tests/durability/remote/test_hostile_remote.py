"""``restore --from-remote`` against a remote someone else wrote (docs/how-to/remote.md):
its manifest and refs are data from outside, so what it says may be a lie.
Real git repositories, the installed CLI, manifests forged with git plumbing."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.remote.replicator import Replicator
from durability.store import AttemptKey, Gap, Store
from tests.durability.remote.remotekit import (
    KEY,
    add_remote,
    bare_remote,
    capture,
    manifest_commits,
    own_store,
    remote_refs,
    states,
)
from tests.helpers import cli, git, make_git_repo, run_cli


def _push_all() -> None:
    settings = Settings.from_env()
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() > 0


def _forge(remote: Path, tmp_path: Path, extra: Callable[[dict[str, Any]], dict[str, Any]]
           ) -> None:
    """Write on the remote a manifest of someone else's: one entry, made from
    the first entry of the remote's manifest by ``extra``."""
    [ref] = [r for r in remote_refs(remote) if r.startswith("refs/durability/manifests/")]
    name = git(remote, "ls-tree", "--name-only", ref).stdout.split()[0]
    entry = extra(json.loads(git(remote, "cat-file", "blob", f"{ref}:{name}").stdout))
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(entry))
    blob = git(remote, "hash-object", "-w", str(forged)).stdout.strip()
    tree = subprocess.run(["git", "-C", str(remote), "mktree"],
                          input=f"100644 blob {blob}\t{'f' * 40}.json\n",
                          capture_output=True, text=True, check=True).stdout.strip()
    commit = git(remote, "commit-tree", tree, "-m", "forged").stdout.strip()
    git(remote, "update-ref", f"refs/durability/manifests/{'f' * 40}", commit)


def test_a_forged_jj_pin_never_moves_a_local_pin(tmp_path: Path) -> None:
    """An entry naming ``refs/durability/jj/<X>`` where X is one of this
    machine's checkpoints, while the remote's ref of that name points at
    another commit: the fetch must not repoint the local pin (X would lose
    what keeps it from garbage collection, and a restore of X would get the
    other tree)."""
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    theirs = capture(repo, "theirs")
    _push_all()
    there = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(repo), str(there))
    (there / "mine.txt").write_text("a checkpoint of this machine\n")
    git(there, "add", "mine.txt")
    git(there, "commit", "-q", "-m", "mine")
    mine = git(there, "rev-parse", "HEAD").stdout.strip()
    pin = f"refs/durability/jj/{mine}"
    git(there, "update-ref", pin, mine)  # as a jj checkpoint's pin on this machine
    # The remote's ref of that name holds its own commit, and an entry names it.
    git(remote, "update-ref", pin, theirs)
    _forge(remote, tmp_path, lambda e: {**e, "seq": 2, "commit_id": mine, "ref": pin,
                                        "request_id": "forged-request"})
    add_remote(there, "backup", remote.as_uri())
    cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
        "--seq", "1", "--dry-run")
    assert git(there, "rev-parse", pin).stdout.strip() == mine


def test_a_forged_entry_never_marks_another_checkpoint_pushed(tmp_path: Path) -> None:
    """An entry of the run being restored that carries the request id of a
    checkpoint of another run (here: one not pushed yet): it is not recorded,
    and the other checkpoint stays due to be pushed."""
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "pushed")
    _push_all()
    other = AttemptKey("run-other", "agent", 0, 1)
    capture(repo, "not pushed yet", key=other)
    with Store(Settings.from_env().database) as store:
        [waiting] = store.checkpoints(other.run_id)
    assert states(other.run_id) == [{"backup": "pending"}]
    _forge(remote, tmp_path, lambda e: {**e, "seq": 2, "request_id": waiting.request_id})
    there = tmp_path / "b"
    there.mkdir()
    add_remote(there, "backup", remote.as_uri())
    done = cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
               "--seq", "1", "--dry-run")
    assert done.returncode == 0, done.stderr
    # The replicator still pushes it: it is on the remote afterwards.
    _push_all()
    assert waiting.commit_id in manifest_commits(remote)
    assert states(other.run_id) == [{"backup": "pushed"}]


@pytest.mark.parametrize("bad", [{"label": ["not", "text"]}, {"created_at_ms": "soon"},
                                 {"seq": True}, {"request_id": 7}])
def test_an_entry_with_fields_of_the_wrong_type_is_ignored(tmp_path: Path,
                                                           bad: dict[str, Any]) -> None:
    """A field the replicator never writes that way (a list for a label, text
    for a time): the entry is ignored, the run's good entries restore, and
    nothing of the bad one reaches the store."""
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    good = capture(repo, "good")
    _push_all()
    _forge(remote, tmp_path, lambda e: {**e, "seq": 2, "request_id": "forged-request", **bad})
    there = tmp_path / "b"
    there.mkdir()
    # Another machine with a store of its own (under PostgreSQL too): what
    # the bad entry could reach is that store, which must hold the good one only.
    b_env = own_store({**os.environ, "DURABILITY_HOME": str(tmp_path / "b-state"),
                       "DURABILITY_SPOOL_DIR": str(tmp_path / "b-spool")})
    add_remote(there, "backup", remote.as_uri(), env=b_env)
    done = cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
               "--json", env=b_env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"] == {"seq": 1, "commit_id": good}
    rows = json.loads(cli("snapshots", KEY.run_id, "--json", env=b_env).stdout)
    assert [r["commit_id"] for r in rows if r["source"] != "pre-restore"] == [good]


def _machine_with_a_gap(tmp_path: Path, there: Path, remote: Path) -> dict[str, str]:
    """Another machine with a store of its own (under PostgreSQL too), on
    whose record request ``gapped-request`` of the run is a gap (a capture
    that timed out there), and the remote named for ``there``: its env."""
    env = own_store({**os.environ, "DURABILITY_HOME": str(tmp_path / "b-state"),
                     "DURABILITY_SPOOL_DIR": str(tmp_path / "b-spool")})
    with Store(Settings.from_env(env).database) as store:
        assert store.add_gaps([Gap(1, KEY.run_id, "gapped-request", "timeout",
                                   KEY.node_id, KEY.iteration, KEY.attempt, str(there),
                                   "hook")]) == 1
    there.mkdir()
    add_remote(there, "backup", remote.as_uri(), env=env)
    return env


def _record_of(env: dict[str, str], request_id: str) -> object:
    with Store(Settings.from_env(env).database) as store:
        return store.request_record(request_id)


def test_an_entry_carrying_the_request_id_of_a_gap_here_is_not_recorded(
        tmp_path: Path) -> None:
    """An entry of the run whose request id is on record here as a gap (a
    forged entry, or one a stale remote holds): it is not recorded, as an
    entry carrying another checkpoint's request id is not (each request is
    on record once, checkpoint or gap); the gap stands, and the run's good
    entries restore."""
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    good = capture(repo, "good")
    _push_all()
    _forge(remote, tmp_path, lambda e: {**e, "seq": 2, "request_id": "gapped-request"})
    there = tmp_path / "b"
    b_env = _machine_with_a_gap(tmp_path, there, remote)
    done = run_cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
                   "--json", env=b_env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"] == {"seq": 1, "commit_id": good}
    gap = _record_of(b_env, "gapped-request")  # its checkpoint, if it had one
    assert isinstance(gap, Gap) and gap.reason == "timeout"
    rows = json.loads(run_cli("snapshots", KEY.run_id, "--json", env=b_env).stdout)
    assert [(r["seq"], r["commit_id"]) for r in rows if r["source"] != "pre-restore"] == [
        (1, good)]


def test_a_remote_whose_every_entry_is_refused_says_so_in_one_line(tmp_path: Path) -> None:
    """The remote lists the run, but its only entry carries the request id of
    a gap here: nothing is recorded, and the restore says why (not that the
    run has no checkpoints, which the remote's listing contradicts)."""
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "good")
    _push_all()
    [genuine] = [r for r in remote_refs(remote) if r.startswith("refs/durability/manifests/")]
    _forge(remote, tmp_path, lambda e: {**e, "request_id": "gapped-request"})
    git(remote, "update-ref", "-d", genuine)  # the remote lists the stale entry alone
    there = tmp_path / "b"
    b_env = _machine_with_a_gap(tmp_path, there, remote)
    done = run_cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
                   env=b_env)
    assert done.returncode == 3, done.stdout
    assert done.stderr == (
        f"durability: not-found: remote 'backup' lists 1 checkpoint of run '{KEY.run_id}' "
        "and none could be recorded here: each carries the request id of another "
        "checkpoint or a gap on record here\n")
    assert isinstance(_record_of(b_env, "gapped-request"), Gap)


def test_a_remote_whose_every_entry_is_forged_says_so_in_one_line(tmp_path: Path) -> None:
    """The same line when the remote's only entry of the run carries another
    checkpoint's request id (here: one of this machine's, of another run):
    not "no run or session", which the remote's listing contradicts."""
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    good = capture(repo, "good")
    _push_all()
    with Store(Settings.from_env().database) as store:
        [mine] = store.checkpoints(KEY.run_id)
    pin = f"refs/durability/jj/{good}"
    git(remote, "update-ref", pin, good)
    _forge(remote, tmp_path, lambda e: {**e, "run_id": "run-forged", "ref": pin,
                                        "request_id": mine.request_id})
    there = tmp_path / "b"
    there.mkdir()
    add_remote(there, "backup", remote.as_uri())
    done = run_cli("restore", "run-forged", "--from-remote", "backup", "--worktree", str(there))
    assert done.returncode == 3, done.stdout
    assert done.stderr == (
        "durability: not-found: remote 'backup' lists 1 checkpoint of run 'run-forged' "
        "and none could be recorded here: each carries the request id of another "
        "checkpoint or a gap on record here\n")
    with Store(Settings.from_env().database) as store:
        assert store.checkpoints("run-forged") == []
        assert store.request_record(mine.request_id) == mine
