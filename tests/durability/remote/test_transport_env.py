"""git runs with the user's own settings for reaching a remote (how ssh is
started, which CA to trust), and without the repository-locating variables of
the environment it was started from (a hook's GIT_DIR): docs/how-to/remote.md.
No network: "ssh" here is a script that runs git's remote command locally."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.config import Settings
from durability.remote.replicator import Replicator
from durability.store import Store
from tests.durability.remote.remotekit import (
    add_remote,
    bare_remote,
    capture,
    manifest_commits,
    quick_states,
)
from tests.helpers import make_git_repo, write_script


def test_an_ssh_remote_is_reached_with_the_users_git_ssh_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CI and containers name their deploy key with GIT_SSH_COMMAND; the
    replicator's git must use it, not a bare ``ssh`` that has no key."""
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    fake_ssh = write_script(tmp_path / "fake-ssh", '#!/bin/sh\nexec sh -c "$2"\n')
    monkeypatch.setenv("GIT_SSH_COMMAND", str(fake_ssh))
    monkeypatch.setenv("GIT_SSH_VARIANT", "simple")  # host, then git's command
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "not-this-repository"))  # as in a hook
    add_remote(repo, "backup", f"ssh://backup.invalid{remote}")
    commit = capture(repo, "over ssh")
    settings = Settings.from_env()
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() == 1
    monkeypatch.delenv("GIT_DIR")  # for the checks' own git
    assert manifest_commits(remote) == {commit}
    assert quick_states() == [{"backup": "pushed"}]
