"""Sessions a user can find: ``sessions`` lists every run id with records
(hook sessions too), ``--latest`` picks the newest of the worktree here, an
unknown run is ``not-found``, ``restore`` needs no --node for a one-node run,
and a seq out of range names the valid range."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import hook_payload, make_git_repo, run_cli, run_cli_json


def _hook(repo: Path, session: str, call: str, name: str = "a.txt") -> None:
    (repo / name).write_text(f"{session} {call}\n")
    payload = hook_payload(repo, session_id=session, tool_use_id=call,
                           file_path=str(repo / name))
    done = run_cli("snapshot-hook", input=json.dumps(payload))
    assert done.returncode == 0 and done.stdout == ""


def test_sessions_lists_hook_sessions_newest_first_with_their_worktree(tmp_path: Path) -> None:
    one = make_git_repo(tmp_path / "one").resolve()
    two = make_git_repo(tmp_path / "two").resolve()
    _hook(one, "sess-old", "t1")
    _hook(one, "sess-old", "t2", "b.txt")
    _hook(two, "sess-new", "t1")
    rows = run_cli_json("sessions")
    assert [r["run_id"] for r in rows] == ["sess-new", "sess-old"]
    old = rows[1]
    assert (old["worktree"], old["checkpoints"], old["gaps"], old["sources"]) == (
        str(one), 2, 0, "hook")
    assert old["first_ms"] <= old["last_ms"]
    only_one = run_cli_json("sessions", "--worktree", str(one))
    assert [r["run_id"] for r in only_one] == ["sess-old"]
    table = run_cli("sessions")
    assert table.stdout.splitlines()[0].split()[:2] == ["RUN", "LAST"]
    assert "sess-old" in table.stdout and str(two) in table.stdout


def test_latest_picks_the_newest_session_of_the_worktree_here(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    other = make_git_repo(tmp_path / "other").resolve()
    _hook(repo, "sess-a", "t1")
    _hook(repo, "sess-b", "t1", "b.txt")
    _hook(other, "sess-c", "t1")
    rows = run_cli_json("snapshots", "--latest", cwd=repo / ".git" / "..")
    assert {r["run_id"] for r in rows} == {"sess-b"}
    sub = repo / "sub"
    sub.mkdir()
    assert {r["run_id"] for r in run_cli_json("attempts", "--latest", cwd=sub)} == {"sess-b"}
    assert run_cli_json("gaps", "--latest", cwd=sub) == []
    both = run_cli("snapshots", "sess-a", "--latest", cwd=repo)
    assert both.returncode == 2 and "not both" in both.stderr


def test_an_unknown_run_is_not_found_for_every_read_command(tmp_path: Path) -> None:
    for command in ("snapshots", "gaps", "attempts", "restore"):
        done = run_cli(command, "no-such-run")
        assert done.returncode == 3, (command, done.stderr)
        assert done.stderr.startswith("durability: not-found: no run or session 'no-such-run'")
    fresh = make_git_repo(tmp_path / "fresh")
    done = run_cli("snapshots", "--latest", cwd=fresh)
    assert done.returncode == 3 and "no session has touched" in done.stderr


def test_restore_without_node_uses_the_only_node_and_names_the_seq_range(
        tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    _hook(repo, "sess-r", "t1")
    _hook(repo, "sess-r", "t2")
    (repo / "a.txt").write_text("later\n")
    done = run_cli_json("restore", "sess-r", "--seq", "1")
    assert done["restored"]["seq"] == 1
    assert (repo / "a.txt").read_text() == "sess-r t1\n"
    out_of_range = run_cli("restore", "sess-r", "--seq", "99")
    assert out_of_range.returncode == 3
    assert "has no checkpoint seq 99 (seq 1 to 3)" in out_of_range.stderr


def test_restore_of_a_run_with_several_nodes_asks_for_one(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    for node in ("n1", "n2"):
        (repo / f"{node}.txt").write_text(node)
        assert run_cli("snapshot", str(repo), "--run", "r", "--node", node).returncode == 0
    done = run_cli("restore", "r")
    assert done.returncode == 2
    assert "has nodes n1, n2: pick one with --node" in done.stderr
