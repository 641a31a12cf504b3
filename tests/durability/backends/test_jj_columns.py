"""jj is told a terminal width (COLUMNS) when the environment names none, so
it never spawns ``tput`` on a capture (issue 25); a width the user set stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.backends.jj import JJ_COLUMNS, JjBackend, JjBinary, find_jj
from tests.helpers import jj_path, make_jj_repo, write_script


def _recording_jj(tmp_path: Path) -> tuple[JjBinary, Path]:
    """The real jj behind a script that notes each run's COLUMNS."""
    seen = tmp_path / "columns.txt"
    (tmp_path / "bin").mkdir()
    script = write_script(tmp_path / "bin" / "jj", f'#!/bin/sh\necho "${{COLUMNS-unset}}" >> '
                                                   f'{seen}\nexec {jj_path()} "$@"\n')
    real = find_jj({"DURABILITY_JJ": jj_path()})
    return JjBinary(str(script), real.version), seen


def test_a_capture_tells_jj_a_width_when_none_is_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    repo = make_jj_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("a\n")
    binary, seen = _recording_jj(tmp_path)
    snap = JjBackend(binary, timeout_s=120).snapshot(repo)
    assert snap.commit_id
    assert set(seen.read_text().split()) == {JJ_COLUMNS}


def test_a_width_the_user_set_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "123")
    repo = make_jj_repo(tmp_path / "repo")
    binary, seen = _recording_jj(tmp_path)
    JjBackend(binary, timeout_s=120).snapshot(repo)
    assert set(seen.read_text().split()) == {"123"}
