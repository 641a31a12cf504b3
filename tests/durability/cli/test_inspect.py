"""``show``, ``diff`` and ``log`` through the installed command, on real git
and jj repositories (colocated and not): every kind of change (an edit, an
executable bit, a binary file, a rename into a folder with a space and a
non-ASCII name, a deletion, a symlink), colour only on a terminal, the
worktree compared without being captured, and a worktree's timeline across
sessions with its gaps."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    durability_exe,
    git,
    hook_payload,
    jj,
    make_git_repo,
    make_jj_repo,
    run_cli,
    run_cli_json,
    store_git,
)

KINDS = ["git", "jj", "jj-separate"]
_MOVED = "dir with space/été.txt"
_LINES = "".join(f"line {i}\n" for i in range(20))


def _repo(tmp_path: Path, kind: str) -> Path:
    if kind == "git":
        return make_git_repo(tmp_path / "repo").resolve()
    path = make_jj_repo(tmp_path / "repo", colocate=kind == "jj").resolve()
    (path / "README.md").write_text("hello\n")
    return path


def _snap(repo: Path, run: str = "r1", label: str | None = None) -> dict[str, Any]:
    extra = ["--label", label] if label else []
    out: dict[str, Any] = run_cli_json("snapshot", str(repo), "--run", run, "--node", "main",
                                       *extra)
    return out


def _two_checkpoints(repo: Path) -> None:
    """seq 1, then seq 2 with one change of every kind."""
    (repo / "a.txt").write_text("one\ntwo\nthree\n")
    (repo / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (repo / "data.bin").write_bytes(b"\x00\x01\x02binary\x00")
    (repo / "move me.txt").write_text(_LINES)
    (repo / "gone.txt").write_text("bye\n")
    assert _snap(repo, label="first")["seq"] == 1
    (repo / "a.txt").write_text("one\nTWO\nthree\nfour\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "data.bin").write_bytes(b"\x00\x09\x08other\x00")
    (repo / "dir with space").mkdir()
    (repo / "move me.txt").rename(repo / _MOVED)
    (repo / "gone.txt").unlink()
    (repo / "link").symlink_to("a.txt")
    assert _snap(repo, label="second")["seq"] == 2


def _file(status: str, path: str, old: str | None, new: str | None, adds: int = 0,
          dels: int = 0, *, old_path: str | None = None, binary: bool = False,
          sizes: tuple[int | None, int | None] = (None, None)) -> dict[str, Any]:
    return {"status": status, "path": path, "old_path": old_path, "old_mode": old,
            "new_mode": new, "binary": binary, "additions": adds, "deletions": dels,
            "large": False, "old_size": sizes[0], "new_size": sizes[1]}


SECOND = [
    _file("modified", "a.txt", "100644", "100644", 2, 1, sizes=(14, 19)),
    _file("modified", "data.bin", "100644", "100644", binary=True, sizes=(10, 9)),
    _file("renamed", _MOVED, "100644", "100644", old_path="move me.txt", sizes=(150, 150)),
    _file("deleted", "gone.txt", "100644", None, 0, 1, sizes=(4, None)),
    _file("added", "link", None, "120000", 1, 0, sizes=(None, 5)),
    _file("modified", "run.sh", "100644", "100755", sizes=(18, 18)),
]


@pytest.mark.parametrize("kind", KINDS)
def test_show_lists_every_kind_of_change_against_the_previous_checkpoint(
        tmp_path: Path, kind: str) -> None:
    repo = _repo(tmp_path, kind)
    _two_checkpoints(repo)
    shown = run_cli_json("show", "r1")
    assert (shown["seq"], shown["label"], shown["source"], shown["worktree"]) == (
        2, "second", "manual", str(repo))
    assert shown["base"]["seq"] == 1 and len(shown["base"]["commit_id"]) == 40
    assert sorted(shown["files"], key=lambda f: f["path"]) == SECOND
    assert shown["totals"] == {"files": 6, "additions": 3, "deletions": 2}
    text = run_cli("show", "--latest", cwd=repo).stdout
    assert "changes:    +3 -2 6 files against seq 1" in text
    assert f"renamed   +0 -0    move me.txt -> {_MOVED}" in text
    assert "modified  binary   data.bin" in text
    assert "modified  +0 -0    run.sh (mode 100644 -> 100755)" in text
    assert "added     +1 -0    link (symlink)" in text
    first = run_cli_json("show", "r1", "--seq", "1")
    assert (first["base"], first["files"]) == (None, [])


@pytest.mark.parametrize("kind", KINDS)
def test_diff_between_checkpoints_is_a_unified_diff_that_names_binary_files(
        tmp_path: Path, kind: str) -> None:
    repo = _repo(tmp_path, kind)
    _two_checkpoints(repo)
    done = subprocess.run([durability_exe(), "diff", "r1", "--seq", "1", "--to", "2"],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert b"\x1b[" not in out  # piped: plain
    assert b"-two\n+TWO\n" in out and b"+four\n" in out
    assert b"Binary files a/data.bin and b/data.bin differ" in out
    assert b"binary" not in out.replace(b"Binary files", b"")  # content never dumped
    assert b"rename from move me.txt\n" in out
    assert b"old mode 100644\nnew mode 100755\n" in out
    assert b"deleted file mode 100644" in out and b"new file mode 120000" in out
    # The default is what A changed, as show lists it.
    assert run_cli("diff", "r1", "--seq", "2").stdout == out.decode()
    backwards = run_cli_json("diff", "r1", "--seq", "2", "--to", "1")
    assert {f["path"]: f["status"] for f in backwards["files"]}["move me.txt"] == "renamed"
    assert (backwards["from"]["seq"], backwards["to"]["seq"]) == (2, 1)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["git", "jj-separate"])
def test_diff_stat_name_only_and_paths(tmp_path: Path, kind: str) -> None:
    repo = _repo(tmp_path, kind)
    _two_checkpoints(repo)
    stat = run_cli("diff", "r1", "--seq", "1", "--to", "2", "--stat")
    assert stat.returncode == 0 and stat.stdout.splitlines()[0].split() == [
        "STATUS", "CHANGES", "PATH"]
    assert stat.stdout.splitlines()[-1] == "6 files changed, +3 -2"
    names = run_cli("diff", "r1", "--seq", "1", "--to", "2", "--name-only").stdout.splitlines()
    assert names == ["a.txt", "data.bin", _MOVED, "gone.txt", "link", "run.sh"]
    # PATHS: a folder stands for what is under it; relative to the folder here.
    sub = repo / "dir with space"
    only = run_cli("diff", "r1", "--seq", "1", "--to", "2", "--name-only", "--", ".", cwd=sub)
    assert only.stdout.splitlines() == [_MOVED]
    two = run_cli("diff", "r1", "--seq", "2", "--name-only", "--", "a.txt", "gone.txt", cwd=repo)
    assert two.stdout.splitlines() == ["a.txt", "gone.txt"]
    latest = run_cli("diff", "--latest", "--seq", "2", "--name-only", "--", "link", cwd=repo)
    assert latest.stdout.splitlines() == ["link"]
    outside = run_cli("diff", "r1", "--seq", "2", "--", "../x", cwd=repo)
    assert outside.returncode == 2 and "outside the worktree" in outside.stderr


def _on_terminal(*args: str, env: dict[str, str]) -> bytes:
    """The command's stdout when stdout is a terminal."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([durability_exe(), *args], stdout=follower,
                            stderr=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=120) == 0
    os.close(leader)
    return b"".join(chunks)


def test_diff_is_coloured_on_a_terminal_unless_no_color(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "git")
    _two_checkpoints(repo)
    args = ("diff", "r1", "--seq", "2", "--", "a.txt")
    coloured = _on_terminal(*args, env=dict(os.environ))
    assert b"\x1b[32m+TWO\x1b[m" in coloured and b"\x1b[31m-two\x1b[m" in coloured
    plain = _on_terminal(*args, env={**os.environ, "NO_COLOR": "1"})
    assert b"\x1b[" not in plain and b"+TWO" in plain
    forced = subprocess.run([durability_exe(), "diff", "--color", "always", *args[1:]],
                            capture_output=True, timeout=120)
    assert b"\x1b[1mdiff --git a/a.txt b/a.txt\x1b[m" in forced.stdout


def _untouched(repo: Path, kind: str) -> object:
    """What a read must leave as it is: checkpoints, git's index, HEAD and
    refs (with the toolkit's private index), or jj's operation log."""
    rows = run_cli_json("snapshots", "r1")
    if kind == "git":
        private = sorted(p for p in (repo / ".git" / "durability").iterdir() if p.is_file())
        return (rows, (repo / ".git" / "index").read_bytes(), git(repo, "rev-parse", "HEAD").stdout,
                git(repo, "for-each-ref").stdout, [p.read_bytes() for p in private],
                store_git(repo, "for-each-ref").stdout)
    return rows, jj(repo, "op", "log", "--ignore-working-copy", "--no-graph", "-T",
                    'id ++ "\\n"').stdout


@pytest.mark.parametrize("kind", KINDS)
def test_diff_with_the_worktree_reads_the_files_without_capturing_them(
        tmp_path: Path, kind: str) -> None:
    repo = _repo(tmp_path, kind)
    _two_checkpoints(repo)
    (repo / "a.txt").write_text("one\nTWO\n")
    (repo / _MOVED).rename(repo / "moved again.txt")
    (repo / "new file é.txt").write_text("fresh\n")
    (repo / "data.bin").unlink()
    before = _untouched(repo, kind)
    got = run_cli_json("diff", "r1", "--seq", "2", "--worktree")
    assert (got["from"]["seq"], got["to"]) == (2, "worktree")
    files = {f["path"]: f for f in got["files"]}
    assert set(files) == {"a.txt", "moved again.txt", "new file é.txt", "data.bin"}
    assert (files["a.txt"]["additions"], files["a.txt"]["deletions"]) == (0, 2)
    assert files["moved again.txt"]["old_path"] == _MOVED
    assert files["new file é.txt"]["status"] == "added"
    assert files["data.bin"] == _file("deleted", "data.bin", "100644", None, binary=True,
                                      sizes=(9, None))
    patch = run_cli("diff", "r1", "--seq", "2", "--worktree", "--", "new file é.txt")
    assert "+fresh" in patch.stdout and ".jj" not in patch.stdout
    assert _untouched(repo, kind) == before


@pytest.mark.slow
def test_read_commands_refuse_what_cannot_be_shown(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "git")
    _two_checkpoints(repo)
    both = run_cli("diff", "r1", "--seq", "1", "--to", "2", "--worktree")
    assert both.returncode == 2 and both.stderr.startswith("durability: invalid-value: ")
    assert run_cli("diff", "r1", "--stat", "--name-only").returncode == 2
    missing = run_cli("show", "r1", "--seq", "9")
    assert missing.returncode == 3 and "seq 1 to 2" in missing.stderr
    assert run_cli("diff", "r1", "--seq", "1", "--to", "9").returncode == 3
    first = run_cli("diff", "r1", "--seq", "1")
    assert (first.returncode, first.stdout) == (0, "")
    assert "first checkpoint" in first.stderr
    assert run_cli("show", "no-such-run").returncode == 3
    node = run_cli("snapshots", "r1", "--node", "no-such-node")  # as show and restore say it
    assert node.returncode == 3 and "has no node 'no-such-node'" in node.stderr, node.stderr


def _gap_here(repo: Path, session: str) -> None:
    """A hook call whose capture fails (jj forced on a git repository): a gap."""
    payload = hook_payload(repo, session_id=session, tool_use_id="toolu_gap",
                           file_path=str(repo / "a.txt"))
    done = run_cli("snapshot-hook", input=json.dumps(payload),
                   env={**os.environ, "DURABILITY_BACKEND": "jj"})
    assert (done.returncode, done.stdout) == (0, "")


@pytest.mark.slow
def test_log_is_the_worktrees_timeline_across_sessions_with_gaps_marked(
        tmp_path: Path) -> None:
    repo = _repo(tmp_path, "git")
    other = make_git_repo(tmp_path / "other").resolve()
    _snap(other, run="elsewhere")
    _two_checkpoints(repo)
    _gap_here(repo, "sess-gap")
    (repo / "a.txt").write_text("one\nTWO\nthree\nfour\nfive\n")
    _snap(repo, run="r2", label="next session")
    entries = run_cli_json("log", str(repo))
    assert [(e["kind"], e["run_id"], e.get("seq")) for e in entries] == [
        ("checkpoint", "r2", 1), ("gap", "sess-gap", None), ("checkpoint", "r1", 2),
        ("checkpoint", "r1", 1)]
    newest = entries[0]
    # A session's first checkpoint is compared with the worktree's newest before it.
    assert ((newest["base"]["run_id"], newest["base"]["seq"]), newest["totals"]) == (
        ("r1", 2), {"files": 1, "old_bytes": 19, "new_bytes": 24})
    # Sizes from the trees, never the contents (show counts the lines).
    assert entries[2]["totals"] == {"files": 6, "old_bytes": 196, "new_bytes": 201}
    assert (entries[3]["base"], entries[3]["totals"]) == (None, None)
    assert entries[1]["reason"] == "not-a-jj-repo" and entries[1]["tool_use_id"] == "toolu_gap"
    lines = run_cli("log", cwd=repo / "dir with space").stdout.splitlines()
    assert lines[0].split() == ["TIME", "RUN", "NODE/IT/ATT", "SEQ", "SOURCE", "CHANGES",
                                "LABEL"]
    assert lines[1].split()[2:] == ["r2", "main/0/1", "1", "manual", "1", "file", "+5", "B",
                                    "next", "session"]
    assert lines[2].split()[2:9] == ["sess-gap", "session/0/1", "GAP", "hook", "not",
                                     "captured", "not-a-jj-repo:"]
    assert lines[3].split()[2:9] == ["r1", "main/0/1", "2", "manual", "6", "files", "+5"]
    assert lines[4].split()[2:7] == ["r1", "main/0/1", "1", "manual", "-"]
    assert [e["run_id"] for e in run_cli_json("log", str(repo), "--limit", "2")] == \
        ["r2", "sess-gap"]
    assert [e["run_id"] for e in run_cli_json("log", str(other))] == ["elsewhere"]


@pytest.mark.slow
def test_a_name_that_is_not_utf8_is_shown_as_its_bytes(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "git")
    _snap(repo)
    name = os.fsdecode(b"caf\xe9 menu.txt")  # Latin-1, not UTF-8
    (repo / name).write_text("soup\n")
    _snap(repo)
    [changed] = run_cli_json("show", "r1")["files"]
    assert (changed["path"], changed["status"], changed["additions"]) == (
        "caf\udce9 menu.txt", "added", 1)
    assert run_cli("diff", "r1", "--name-only").stdout == "caf\\xe9 menu.txt\n"
    done = subprocess.run([durability_exe(), "diff", "r1"], capture_output=True, timeout=120)
    assert b'+++ "b/caf\\351 menu.txt"' in done.stdout and b"+soup\n" in done.stdout


def test_a_second_jj_workspace_is_read_as_itself_not_as_the_first(tmp_path: Path) -> None:
    main = _repo(tmp_path, "jj")
    second = (tmp_path / "second").resolve()
    jj(main, "workspace", "add", "--no-colocate", str(second))
    (second / "b.txt").write_text("b\n")
    (main / "main only.txt").write_text("main\n")
    _snap(second, run="w2")
    (second / "b.txt").write_text("b\nc\n")
    got = run_cli_json("diff", "w2", "--worktree")
    assert [(f["path"], f["additions"]) for f in got["files"]] == [("b.txt", 1)]
    assert run_cli_json("show", "w2")["worktree"] == str(second)


def test_show_names_the_tool_call_harness_and_agent_of_a_hook_checkpoint(
        tmp_path: Path) -> None:
    repo = _repo(tmp_path, "git")
    _snap(repo, run="before")
    (repo / "a.txt").write_text("x\n")
    payload = hook_payload(repo, session_id="sess-h", tool_use_id="toolu_9",
                           file_path=str(repo / "a.txt"), agent_id="ag-1",
                           agent_type="Explore")
    assert run_cli("snapshot-hook", input=json.dumps(payload)).returncode == 0
    shown = run_cli_json("show", "sess-h")
    assert (shown["tool_use_id"], shown["harness"], shown["agent_id"], shown["agent_type"]) == (
        "toolu_9", "claude", "ag-1", "Explore")
    assert shown["base"]["run_id"] == "before"
    text = run_cli("show", "sess-h").stdout.splitlines()
    assert {"tool call:  toolu_9", "harness:    claude", "agent id:   ag-1",
            "agent type: Explore"} <= set(text)
    assert ("changes:    +1 -0 1 file against seq 1 of run before node main iteration 0 "
            "attempt 1") in text
