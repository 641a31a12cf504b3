"""A file whose name is not UTF-8 is never left out of a jj checkpoint silently.

jj cannot record such a name: its snapshot skips the path (a file, or a whole
folder) and only warns ("Skipped some paths because they are not valid
UTF-8").  Found in a new user's trial: a Claude Code Bash call that wrote
``bad\\377name.txt`` in a jj repository left no trace at all (the git backend
records it).  Each such path is now a ``Skipped`` path and an
``unreadable-path`` gap naming it, like a file jj refuses for its size.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from durability.backends.jj import _not_utf8
from tests.helpers import commit_manifest, make_jj_repo, run_cli, run_cli_json

pytestmark = pytest.mark.slow


def snapshot(repo: Path) -> dict[str, Any]:
    return dict(run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n"))


def test_a_non_utf8_name_in_a_jj_repo_is_a_gap_never_unchanged(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "j")
    (repo / "fine.txt").write_text("a\n")
    first = snapshot(repo)
    os.makedirs(repo / "sub dir")
    (repo / os.fsdecode(b"bad\xffname.txt")).write_bytes(b"bad\n")
    (repo / "sub dir" / os.fsdecode(b'q"\xfe.txt')).write_bytes(b"q\n")
    (repo / os.fsdecode(b"folder\xfe")).mkdir()
    (repo / os.fsdecode(b"folder\xfe") / "in.txt").write_text("in\n")

    human = run_cli("snapshot", str(repo), "--run", "r", "--node", "n")
    assert human.returncode == 0, human.stderr
    assert "unchanged" not in human.stdout and "3 path(s) left out" in human.stdout
    assert "unreadable-path: bad\\xffname.txt" in human.stderr, human.stderr

    again = snapshot(repo)
    want = sorted([os.fsdecode(b"bad\xffname.txt"), os.fsdecode(b'sub dir/q"\xfe.txt'),
                   os.fsdecode(b"folder\xfe")])
    assert sorted(s["path"] for s in again["skipped"]) == want
    assert {s["reason"] for s in again["skipped"]} == {"unreadable-path"}
    assert again["seq"] == first["seq"]  # jj sees no change: the same checkpoint
    assert set(commit_manifest(repo, again["commit_id"])) == {"fine.txt"}
    gaps = [g for g in run_cli_json("gaps", "r") if g["reason"] == "unreadable-path"]
    assert len(gaps) == 3, gaps
    assert all("not UTF-8" in g["detail"] for g in gaps), gaps


def test_the_warning_is_read_with_rusts_escapes() -> None:
    stderr = ('Warning: Skipped some paths because they are not valid UTF-8:\n'
              '  .: "bad\\xFEdir"\n'
              '  a b/\u00e9: "q\\"\\\\\\xFF \\tz\\u{7f}"\n'
              'Working copy changes:\n'
              'A fine.txt\n')
    assert _not_utf8(stderr) == [
        os.fsdecode(b"bad\xfedir"),
        os.fsdecode("a b/\u00e9/q\"\\".encode() + b"\xff \tz\x7f"),
    ]
    assert _not_utf8("Working copy changes:\nA x\n") == []
