"""A refused push says why: git's own reason, not its hints.

Found in a new user's trial of issue 15: when another machine had written the
same attempt to the remote, the service log (and the ``replication-failed``
gap's detail) read ``git push failed: hint: to the same ref. ... | hint: See
the 'Note about fast-forwards' ...``: the last three lines of git's stderr,
all hints.  The refused ref and its reason (``[rejected] (non-fast-forward)``)
are on stdout with ``--porcelain``; now they lead the message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.remote.transport import RemoteFailed, push
from tests.helpers import git, make_git_repo


def test_a_non_fast_forward_push_names_the_ref_and_the_reason(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    repo = make_git_repo(tmp_path / "repo")
    push(str(repo / ".git"), remote.as_uri(), ["HEAD:refs/durability/git/abc"])
    git(repo, "commit", "-q", "--amend", "-m", "another history")
    with pytest.raises(RemoteFailed) as caught:
        push(str(repo / ".git"), remote.as_uri(), ["HEAD:refs/durability/git/abc"])
    message = str(caught.value)
    assert "refs/durability/git/abc" in message and "non-fast-forward" in message, message
    assert "hint:" not in message, message
