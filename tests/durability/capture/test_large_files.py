"""Issue 8 item 5: jj's limit on new files no longer hides files silently.

jj leaves a new file over ``snapshot.max-new-file-size`` (1 MiB by default)
out of its snapshot and only warns.  Our captures raise the limit to
``DURABILITY_MAX_NEW_FILE_SIZE`` (64 MiB by default), and a file still over it
is a ``file-too-large`` gap naming it: the capture is never "unchanged".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from durability.config import DEFAULT_MAX_NEW_FILE_SIZE, Settings
from durability.ground.errors import InvalidInput
from tests.helpers import commit_manifest, make_jj_repo, run_cli, run_cli_json


def snapshot(repo: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    full = {**os.environ, **(env or {})}
    return dict(run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n", env=full))


def test_a_new_file_over_jjs_own_limit_is_captured_by_default(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "j")
    (repo / "small.txt").write_text("a\n")
    snapshot(repo)
    big = os.urandom(3 * 1024 * 1024)  # three times jj's own 1 MiB default
    (repo / "big.bin").write_bytes(big)
    done = snapshot(repo)
    assert not done["deduped"] and done.get("skipped", []) == []
    assert commit_manifest(repo, done["commit_id"])["big.bin"][2] == big


@pytest.mark.slow
def test_a_file_still_over_the_limit_is_a_gap_never_unchanged(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "j")
    (repo / "small.txt").write_text("a\n")
    env = {"DURABILITY_MAX_NEW_FILE_SIZE": "1000"}
    first = snapshot(repo, env)
    os.makedirs(repo / "deep dir")
    (repo / "deep dir" / 'odd "name".bin').write_bytes(b"x" * 1001)
    (repo / "fits.bin").write_bytes(b"y" * 1000)

    human = run_cli("snapshot", str(repo), "--run", "r", "--node", "n",
                    env={**os.environ, **env})
    assert human.returncode == 0, human.stderr
    assert "unchanged" not in human.stdout and "1 path(s) left out" in human.stdout
    assert 'file-too-large: deep dir/odd "name".bin' in human.stderr

    again = snapshot(repo, env)
    assert again.get("skipped", []) == [
        {"path": 'deep dir/odd "name".bin', "reason": "file-too-large"}]
    tree = commit_manifest(repo, again["commit_id"])
    assert "fits.bin" in tree and 'deep dir/odd "name".bin' not in tree
    assert again["seq"] == first["seq"] + 1  # the human snapshot was seq 2, this one dedups
    recorded = [g for g in run_cli_json("gaps", "r") if g["reason"] == "file-too-large"]
    assert len(recorded) == 1 and 'odd "name".bin' in recorded[0]["detail"]

    # Raised limit: the same file is captured.
    done = snapshot(repo, {"DURABILITY_MAX_NEW_FILE_SIZE": "1KiB"})
    assert done.get("skipped", []) == [] and not done["deduped"]
    assert 'deep dir/odd "name".bin' in commit_manifest(repo, done["commit_id"])


@pytest.mark.parametrize("raw,want", [("", DEFAULT_MAX_NEW_FILE_SIZE), ("5000", 5000),
                                      ("64MiB", 64 << 20), ("2g", 2 << 30), ("8 KiB", 8192)])
def test_max_new_file_size_setting(raw: str, want: int) -> None:
    env = {"DURABILITY_MAX_NEW_FILE_SIZE": raw} if raw else {}
    assert Settings.from_env(env).max_new_file_size == want


@pytest.mark.parametrize("raw", ["0", "-5", "lots", "5 PB", "1.5M"])
def test_an_invalid_max_new_file_size_is_invalid_value(raw: str) -> None:
    with pytest.raises(InvalidInput, match="DURABILITY_MAX_NEW_FILE_SIZE"):
        Settings.from_env({"DURABILITY_MAX_NEW_FILE_SIZE": raw})


def test_the_hook_files_one_invalid_value_gap_for_a_bad_size(tmp_path: Path) -> None:
    # Not an internal-error gap from deep in an in-process capture: the hook
    # checks every setting up front and names the variable.
    import json
    import os

    from tests.helpers import hook_payload, make_git_repo

    repo = make_git_repo(tmp_path / "repo")
    env = {**os.environ, "DURABILITY_MAX_NEW_FILE_SIZE": "lots"}
    done = run_cli("snapshot-hook", input=json.dumps(hook_payload(repo, session_id="sess-size")),
                   env=env)
    assert (done.returncode, done.stdout) == (0, "")
    [gap] = run_cli_json("gaps", "sess-size")
    assert gap["reason"] == "invalid-value" and "DURABILITY_MAX_NEW_FILE_SIZE" in gap["detail"]
