"""Something (the agent) replaces a file with a folder during a restore,
after the restore planned from the pre-restore checkpoint: on both backends
the restore stops with ``restore-conflict`` naming the path, and the folder
and what it holds are left exactly as they were (never written into,
replaced or chmod-ed)."""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from durability.backends import tree_files
from durability.backends import tree_writer as git_restore
from durability.backends.git import forget
from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.ground.errors import RestoreError
from durability.restore.apply import restore
from durability.store import AttemptKey
from tests.helpers import make_git_repo, make_jj_repo

KEY = AttemptKey("run-agent", "node", 0, 1)


@pytest.fixture(params=["git", "jj"])
def wt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    make = make_git_repo if request.param == "git" else make_jj_repo
    path = make(tmp_path / "wt").resolve()
    yield path
    forget(path)


def _snap(settings: Settings, wt: Path) -> int:
    done = snapshot_now(settings, key=KEY, path=wt, request_id=str(uuid.uuid4()))
    assert done.seq is not None, done
    return done.seq


def _agent_makes_a_folder(wt: Path, name: str) -> None:
    path = wt / name
    path.unlink()
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    (path / "work.txt").write_text("the agent's new work\n")


def _assert_folder_untouched(wt: Path, name: str) -> None:
    st = os.lstat(wt / name)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o755
    assert sorted(os.listdir(wt / name)) == ["work.txt"]
    assert (wt / name / "work.txt").read_text() == "the agent's new work\n"


def _wrap(monkeypatch: pytest.MonkeyPatch, module: Any, name: str,
          before: Callable[[], None]) -> None:
    """``module.name`` runs ``before`` once, then itself."""
    real = getattr(module, name)
    done: list[bool] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(True)
            before()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)


def test_a_link_replaced_by_a_folder_after_planning_is_a_conflict(
        wt: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    (wt / "link").symlink_to("one")
    first = _snap(settings, wt)
    (wt / "link").unlink()
    (wt / "link").symlink_to("two")
    _snap(settings, wt)
    # After the plan (made from the pre-restore checkpoint, where `link` is
    # a link), before the writes: the agent puts a folder there.
    swap = lambda: _agent_makes_a_folder(wt, "link")  # noqa: E731
    _wrap(monkeypatch, git_restore, "apply_plan", swap)
    _wrap(monkeypatch, tree_files, "apply_plan", swap)
    with pytest.raises(RestoreError) as info:
        restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=first)
    assert info.value.code == "restore-conflict", info.value.message
    assert "link is a folder" in info.value.message
    _assert_folder_untouched(wt, "link")


def test_a_file_replaced_by_a_folder_before_its_chmod_is_a_conflict(
        wt: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    (wt / "run.sh").write_text("#!/bin/sh\n")
    (wt / "run.sh").chmod(0o644)
    first = _snap(settings, wt)
    (wt / "run.sh").chmod(0o755)
    (wt / "gone.txt").write_text("goes\n")
    _snap(settings, wt)
    # The restore deletes gone.txt, then changes only run.sh's mode; the
    # agent puts a folder at run.sh after the restore looked at it.
    _wrap(monkeypatch, git_restore, "_delete", lambda: _agent_makes_a_folder(wt, "run.sh"))
    with pytest.raises(RestoreError) as info:
        restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=first)
    assert info.value.code == "restore-conflict", info.value.message
    assert "run.sh" in info.value.message
    _assert_folder_untouched(wt, "run.sh")
