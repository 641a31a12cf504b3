"""A git restore writes a file as git would check it out: the line endings
``.gitattributes`` asks for (``eol=crlf``), not the normalized blob.

A capture stores a ``text`` file as git does, with LF endings (the clean
filter); the restore wrote that blob as it is, so a CRLF file came back with
LF endings, `git status` showed it modified, and the verification (a fresh
capture, cleaned the same way) passed.  Found in a new user's trial.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import git, make_git_repo, run_cli, run_cli_json


def _repo(tmp_path: Path) -> Path:
    repo = make_git_repo(tmp_path / "repo").resolve()
    (repo / ".gitattributes").write_bytes(b"*.txt text eol=crlf\n*.big filter=lfs\n")
    (repo / "a.txt").write_bytes(b"one\r\ntwo\r\n")
    (repo / "raw.bin").write_bytes(b"keep\r\nas is\n")
    (repo / "x.big").write_bytes(b"not really lfs\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def test_a_restored_text_file_has_the_line_endings_its_attributes_ask_for(
        tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "a.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    (repo / "x.big").write_bytes(b"still not lfs\n")
    first = run_cli_json("snapshot", str(repo), "--run", "eol", "--node", "n")
    status = git(repo, "diff", "--stat").stdout
    (repo / "a.txt").write_bytes(b"changed\r\n")
    (repo / "raw.bin").write_bytes(b"changed\n")
    (repo / "x.big").write_bytes(b"changed\n")
    run_cli_json("snapshot", str(repo), "--run", "eol", "--node", "n")

    done = run_cli("restore", "eol", "--seq", str(first["seq"]))

    assert done.returncode == 0, done.stderr
    assert (repo / "a.txt").read_bytes() == b"one\r\ntwo\r\nthree\r\n"
    assert (repo / "raw.bin").read_bytes() == b"keep\r\nas is\n"
    assert (repo / "x.big").read_bytes() == b"still not lfs\n"
    # git sees the same change against HEAD as when the checkpoint was taken.
    assert git(repo, "diff", "--stat").stdout == status
