"""A push carries the checkpoint refs and the manifest, nothing else, whatever
the user's git configuration asks of an ordinary push (docs/how-to/remote.md,
"Nothing else: no branch, no tag").  Real git repositories, file:// remotes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.config import Settings
from durability.remote.replicator import Replicator
from durability.store import Store
from tests.durability.remote.remotekit import add_remote, bare_remote, capture, remote_refs
from tests.helpers import git, make_git_repo


def _push_all() -> None:
    settings = Settings.from_env()
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() > 0


def test_push_follow_tags_in_the_users_config_pushes_no_tag(tmp_path: Path) -> None:
    """``push.followTags`` makes every push carry the annotated tags of the
    commits it pushes: the project's release tag would go to the backup."""
    repo = make_git_repo(tmp_path / "repo")
    git(repo, "tag", "-a", "v1.0", "-m", "a release of the project")
    git(repo, "config", "push.followTags", "true")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "one")
    _push_all()
    refs = remote_refs(remote)
    assert refs and all(r.startswith("refs/durability/") for r in refs), refs


def test_submodule_recurse_in_the_users_config_pushes_nothing_to_a_submodules_origin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``submodule.recurse`` makes a push first push the submodule commits
    it refers to, to the submodule's own remote (its origin): a checkpoint of
    a worktree whose submodule holds commits nobody pushed must not send
    them there.  The service runs in the folder it was started in, often the
    worktree (the hook starts it there), as this test does."""
    sub_origin = tmp_path / "sub-origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(sub_origin))
    seed = make_git_repo(tmp_path / "sub-seed")
    git(seed, "push", "-q", sub_origin.as_uri(), "HEAD:refs/heads/main")
    repo = make_git_repo(tmp_path / "repo")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "-q", "add",
        sub_origin.as_uri(), "sub")
    git(repo, "commit", "-q", "-m", "a submodule")
    (repo / "sub" / "private.txt").write_text("not pushed anywhere yet\n")
    git(repo / "sub", "add", "private.txt")
    git(repo / "sub", "commit", "-q", "-m", "work in progress")
    before = remote_refs(sub_origin)
    git(repo, "config", "submodule.recurse", "true")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "one")
    monkeypatch.chdir(repo)
    _push_all()
    assert remote_refs(sub_origin) == before
