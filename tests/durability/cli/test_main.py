"""The ``durability`` command end to end: the installed script as a
subprocess, real jj repositories, the JSON it prints and how it fails."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ServiceProcess, cli, make_jj_repo, run_cli, run_cli_json, start_service

RUN = "run-acc"


@pytest.fixture(params=["in-process", "service"])
def mode(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    svc: ServiceProcess | None = None
    if request.param == "service":
        svc = start_service(tmp_path)
    yield request.param
    if svc is not None:
        assert svc.stop() == 0


def snap(repo: Path, *args: str) -> dict[str, object]:
    out: dict[str, object] = run_cli_json("snapshot", str(repo), *args)
    return out


def one_line_error(done: subprocess.CompletedProcess[str], code: str, exit_status: int) -> None:
    """A user-facing failure: the exit status, one line on stderr, no traceback."""
    assert done.returncode == exit_status, (done.returncode, done.stderr)
    assert done.stderr.startswith(f"durability: {code}: "), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


# -- snapshot ----------------------------------------------------------------------


def test_snapshot_json_shape_dedup_and_next_seq(mode: str, repo: Path) -> None:
    first = snap(repo, "--run", "run-1", "--node", "n", "--label", "start")
    assert set(first) == {"seq", "commit_id", "deduped"}
    assert (first["seq"], first["deduped"]) == (1, False)
    assert isinstance(first["commit_id"], str) and len(first["commit_id"]) == 40
    same = snap(repo, "--run", "run-1", "--node", "n")
    assert same == {"seq": 1, "commit_id": first["commit_id"], "deduped": True}
    (repo / "new.txt").write_text("new\n")
    second = snap(repo, "--run", "run-1", "--node", "n")
    assert (second["seq"], second["deduped"]) == (2, False)
    assert second["commit_id"] != first["commit_id"]


def test_snapshot_with_a_long_label_works_the_same_either_way(mode: str, repo: Path) -> None:
    done = snap(repo, "--run", "run-label", "--node", "n", "--label", "L" * 1500)
    assert done["seq"] == 1
    [row] = run_cli_json("snapshots", "run-label")
    assert row["label"] == "L" * 1000


def test_snapshot_defaults_to_the_current_folder_and_prints_a_line(repo: Path) -> None:
    (repo / "sub").mkdir()
    done = run_cli("snapshot", "--run", "run-cwd", "--node", "n", cwd=repo / "sub")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("seq 1 commit ")
    [row] = run_cli_json("snapshots", "run-cwd")
    assert (row["worktree"], row["source"]) == (str(repo), "manual")


@pytest.mark.parametrize(("where", "code"), [("plain", "not-a-jj-repo"),
                                             ("missing", "worktree-missing")])
def test_snapshot_of_an_unusable_path_fails_and_files_a_gap(tmp_path: Path, where: str,
                                                            code: str) -> None:
    path = tmp_path / where
    if where == "plain":
        path.mkdir()
    # jj only: a plain folder is then "not a jj repo" (not a git tree to try).
    env = {**os.environ, "DURABILITY_BACKEND": "jj"}
    done = run_cli("snapshot", str(path), "--run", "run-bad", "--node", "n", env=env)
    one_line_error(done, code, 5)
    [gap] = run_cli_json("gaps", "run-bad")
    assert (gap["reason"], gap["source"], gap["node_id"]) == (code, "manual", "n")
    text = run_cli("gaps", "run-bad")
    assert text.returncode == 0 and code in text.stdout and "n/0/1" in text.stdout


# -- listing -------------------------------------------------------------------------

SNAPSHOT_KEYS = {"run_id", "node_id", "iteration", "attempt", "seq", "commit_id", "source",
                 "tool_use_id", "label", "worktree", "created_at_ms", "harness", "agent_id",
                 "agent_type", "session_id", "replicated"}


def test_snapshots_fields_and_order_attempt_then_seq(repo: Path) -> None:
    # Attempt 2 is captured first: the listing still puts attempt 1 first.
    for attempt, content in (("2", "b1"), ("2", "b2"), ("1", "a1"), ("1", "a2")):
        (repo / "f.txt").write_text(content)
        snap(repo, "--run", "run-o", "--node", "n", "--attempt", attempt,
             "--label", f"{attempt}:{content}")
    (repo / "g.txt").write_text("other node")
    snap(repo, "--run", "run-o", "--node", "other")
    rows = run_cli_json("snapshots", "run-o", "--node", "n")
    assert all(set(r) == SNAPSHOT_KEYS for r in rows)
    assert [(r["attempt"], r["seq"], r["label"]) for r in rows] == [
        (1, 1, "1:a1"), (1, 2, "1:a2"), (2, 1, "2:b1"), (2, 2, "2:b2")]
    assert {(r["run_id"], r["node_id"], r["iteration"], r["source"], r["worktree"])
            for r in rows} == {("run-o", "n", 0, "manual", str(repo))}
    assert all(r["tool_use_id"] is None and isinstance(r["created_at_ms"], int) for r in rows)
    assert len(run_cli_json("snapshots", "run-o")) == 5
    table = run_cli("snapshots", "run-o")
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split()[:4] == ["NODE", "IT", "ATT", "SEQ"]
    assert len(table.stdout.splitlines()) == 6


def test_listing_an_unknown_run_is_not_found_not_an_empty_success() -> None:
    # A typo in a run id must not look like "nothing happened" (issue 10).
    for command in ("snapshots", "attempts", "gaps"):
        done = run_cli(command, "nobody-here", "--json")
        assert (done.returncode, done.stdout) == (3, ""), command
        assert done.stderr.startswith("durability: not-found: no run or session 'nobody-here'")


def test_a_known_run_with_nothing_of_a_kind_lists_empty(repo: Path) -> None:
    snap(repo, "--run", "run-e", "--node", "n")
    assert run_cli_json("gaps", "run-e") == []
    done = run_cli("gaps", "run-e")
    assert (done.returncode, done.stdout) == (0, "")
    assert "no gaps for run run-e" in done.stderr


def test_attempts_point_at_the_latest_checkpoint(repo: Path) -> None:
    snap(repo, "--run", "run-a", "--node", "n")
    (repo / "x.txt").write_text("x")
    latest = snap(repo, "--run", "run-a", "--node", "n")
    snap(repo, "--run", "run-a", "--node", "n", "--iteration", "1", "--attempt", "2")
    rows = run_cli_json("attempts", "run-a")
    assert [(a["node_id"], a["iteration"], a["attempt"]) for a in rows] == [
        ("n", 0, 1), ("n", 1, 2)]
    assert rows[0]["jj_pointer"] == latest["commit_id"]
    assert rows[0]["worktree"] == str(repo)
    assert {"state", "started_at_ms", "finished_at_ms", "heartbeat_at_ms",
            "error_json"} <= set(rows[0])
    text = run_cli("attempts", "run-a")
    assert str(latest["commit_id"]) in text.stdout


def test_tables_never_print_control_characters_from_labels_or_details(repo: Path) -> None:
    # Labels and gap details come from hook payloads (file names an agent
    # chose): printed raw, a newline forges a row and ESC drives the terminal.
    label = "two\nlines\x1b[31mred\r"
    run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n", "--label", label)
    run_cli("snapshot", str(repo / "gone\x1b[2J"), "--run", RUN, "--node", "n")
    listed = run_cli("snapshots", RUN)
    gaps = run_cli("gaps", RUN)
    for done in (listed, gaps):
        assert done.returncode == 0, done.stderr
        assert not any(c in done.stdout for c in "\x1b\r"), done.stdout
        assert len(done.stdout.strip().splitlines()) == 2 if done is listed else 1
    assert "two\\nlines\\x1b[31mred\\r" in listed.stdout
    assert run_cli_json("snapshots", RUN)[0]["label"] == label  # JSON keeps the truth


# -- restore -----------------------------------------------------------------------


def test_restore_json_shape_and_undo(mode: str, repo: Path) -> None:
    (repo / "a.txt").write_text("one\n")
    first = snap(repo, "--run", "run-r", "--node", "n")
    (repo / "a.txt").write_text("two\n")
    (repo / "b.txt").write_text("added\n")
    second = snap(repo, "--run", "run-r", "--node", "n")
    (repo / "a.txt").write_text("three, never captured\n")

    done = run_cli_json("restore", "run-r", "--node", "n", "--seq", "1")
    assert set(done) == {"worktree", "restored", "pre_restore", "paths", "written", "deleted"}
    assert done["worktree"] == str(repo)
    assert (done["paths"], done["written"], done["deleted"]) == (None, 1, 1)
    assert done["restored"] == {"seq": 1, "commit_id": first["commit_id"]}
    # The pre-restore checkpoint as the undo names it: a local restore's is
    # the restored attempt's next seq.
    assert {k: v for k, v in done["pre_restore"].items() if k != "commit_id"} == {
        "run_id": "run-r", "node_id": "n", "iteration": 0, "attempt": 1, "seq": 3}
    assert (repo / "a.txt").read_text() == "one\n"
    assert not (repo / "b.txt").exists()

    # The pre-restore checkpoint undoes it, uncaptured edit included.
    undo = run_cli_json("restore", "run-r", "--node", "n", "--seq", "3")
    assert undo["restored"]["commit_id"] == done["pre_restore"]["commit_id"]
    assert (repo / "a.txt").read_text() == "three, never captured\n"
    assert (repo / "b.txt").read_text() == "added\n"
    sources = [r["source"] for r in run_cli_json("snapshots", "run-r")]
    assert sources[:3] == ["manual", "manual", "pre-restore"]
    assert second["seq"] == 2


def test_restore_defaults_to_latest_and_prints_a_line(repo: Path) -> None:
    (repo / "a.txt").write_text("kept\n")
    snap(repo, "--run", "run-l", "--node", "n")
    (repo / "a.txt").write_text("lost\n")
    done = run_cli("restore", "run-l", "--node", "n")
    assert done.returncode == 0, done.stderr
    assert "to seq 1" in done.stdout
    assert ("undo: durability restore run-l --node n --iteration 0 --attempt 1 --seq 2"
            in done.stdout)
    assert (repo / "a.txt").read_text() == "kept\n"


@pytest.mark.parametrize("args", [["--seq", "9"], ["--attempt", "4"], ["--iteration", "3"]],
                         ids=["seq", "attempt", "iteration"])
def test_restore_refuses_a_checkpoint_that_does_not_exist(repo: Path, args: list[str]) -> None:
    (repo / "a.txt").write_text("a\n")
    snap(repo, "--run", "run-m", "--node", "n")
    (repo / "a.txt").write_text("untouched\n")
    one_line_error(run_cli("restore", "run-m", "--node", "n", *args, "--json"), "not-found", 3)
    assert (repo / "a.txt").read_text() == "untouched\n"
    assert len(run_cli_json("snapshots", "run-m")) == 1  # no pre-restore was taken


@pytest.mark.parametrize(("run", "node"), [("run-m", "other"), ("run-none", "n")])
def test_restore_refuses_an_unknown_node_or_run(repo: Path, run: str, node: str) -> None:
    snap(repo, "--run", "run-m", "--node", "n")
    one_line_error(run_cli("restore", run, "--node", node), "not-found", 3)


def test_restore_of_an_attempt_without_checkpoints_says_so_plainly(repo: Path) -> None:
    run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    done = run_cli("restore", RUN, "--node", "n", "--attempt", "2")
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr == (f"durability: not-found: run {RUN!r} node 'n' iteration 0 "
                           "attempt 2 has no checkpoints\n")


# -- doctor ------------------------------------------------------------------------


def test_doctor_all_ok(tmp_path: Path, repo: Path) -> None:
    done = run_cli("doctor", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [ln.split()[:2] for ln in lines[:4]] == [["ok", "backend"], ["ok", "state"],
                                                   ["ok", "spool"], ["ok", "service"]]
    assert "jj 0." in lines[0]
    assert "not running" in lines[3]
    svc = start_service(tmp_path)
    try:
        checks = run_cli_json("doctor")
        service = next(c for c in checks if c["name"] == "service")
        assert service["ok"] is True
        assert f"pid {svc.proc.pid}" in service["detail"] and "0o600" in service["detail"]
    finally:
        assert svc.stop() == 0


def test_doctor_fails_when_jj_is_missing(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "jj-only", colocate=False)
    env = {**os.environ, "DURABILITY_JJ": str(tmp_path / "no-jj")}
    done = run_cli("doctor", env=env, cwd=repo)
    assert done.returncode == 1
    jj_line = done.stdout.splitlines()[0]
    assert jj_line.split()[:2] == ["FAIL", "backend"]
    assert "jj-missing" in jj_line
    checks = json.loads(run_cli("doctor", "--json", env=env, cwd=repo).stdout)
    assert [c["ok"] for c in checks if c["name"] == "backend"] == [False]


def test_doctor_fails_on_a_symlinked_spool_folder(tmp_path: Path) -> None:
    real = tmp_path / "real-spool"
    real.mkdir(mode=0o700)
    Path(os.environ["DURABILITY_SPOOL_DIR"]).symlink_to(real)
    done = run_cli("doctor")
    assert done.returncode == 1
    [spool_line] = [ln for ln in done.stdout.splitlines() if ln.split()[1:2] == ["spool"]]
    assert spool_line.startswith("FAIL") and "symlink" in spool_line


# The state folder holds the SQLite file: under PostgreSQL the store does not
# live there, so this is about the file.
@pytest.mark.sqlite_file
@pytest.mark.parametrize("args", [["gaps", "r"], ["snapshots", "r"], ["attempts", "r"],
                                  ["restore", "r", "--node", "n"]])
def test_unusable_state_folder_is_one_line_store_unavailable(tmp_path: Path,
                                                             args: list[str]) -> None:
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("not a folder\n")
    env = {**os.environ, "DURABILITY_HOME": str(blocker)}
    one_line_error(run_cli(*args, env=env), "store-unavailable", 6)


def test_snapshot_with_an_unusable_state_folder_fails_in_one_line(tmp_path: Path,
                                                                  repo: Path) -> None:
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("not a folder\n")
    env = {**os.environ, "DURABILITY_HOME": str(blocker)}
    done = run_cli("snapshot", str(repo), "--run", "r", "--node", "n", env=env)
    # The same status and code as every other command on this folder (the
    # snapshot used to exit 5 here), and the line names the culprit.
    one_line_error(done, "store-unavailable", 6)
    assert str(blocker) in done.stderr, done.stderr
    assert blocker.read_text() == "not a folder\n"


# -- bad input ---------------------------------------------------------------------

BAD_ID_COMMANDS = {
    "snapshot-run": ["snapshot", "--run", "../../x", "--node", "n"],
    "snapshot-node": ["snapshot", "--run", "r", "--node", "a/b"],
    "snapshots": ["snapshots", "../../x"],
    "snapshots-node": ["snapshots", "r", "--node", "../n"],
    "restore": ["restore", "../../x", "--node", "n"],
    "restore-node": ["restore", "r", "--node", ".hidden"],
    "gaps": ["gaps", "../../x"],
    "attempts": ["attempts", "../../x"],
    "empty": ["gaps", ""],
}


@pytest.mark.parametrize("name", sorted(BAD_ID_COMMANDS))
def test_invalid_id_is_one_line_invalid_value_exit_2(repo: Path, name: str) -> None:
    done = run_cli(*BAD_ID_COMMANDS[name], cwd=repo)
    one_line_error(done, "invalid-value", 2)
    assert not (repo.parent / "x").exists()


@pytest.mark.parametrize("args", [
    ["snapshot", "--run", "r", "--node", "n", "--attempt", "0"],
    ["snapshot", "--run", "r"],
    ["restore", "r", "--node", "n", "--seq", "many"],
    ["no-such-command"],
], ids=["attempt-0", "missing-node", "seq-not-a-number", "unknown-command"])
def test_usage_errors_are_one_line_too(args: list[str]) -> None:
    one_line_error(run_cli(*args), "invalid-value", 2)


def test_version_and_help_succeed() -> None:
    # The installed command itself (tests/helpers.py INSTALLED_COMMAND_TESTS).
    assert cli("--version").returncode == 0
    done = cli("--help")
    assert done.returncode == 0 and "snapshot-hook" in done.stdout


@pytest.mark.slow
def test_every_command_has_an_example_in_its_help() -> None:
    listing = run_cli("--help").stdout
    commands = [line.split()[0] for line in listing.split("Commands:")[1].splitlines()
                if line.strip()]
    assert {"sessions", "restore", "status", "stop", "service", "doctor"} <= set(commands)
    for command in commands:
        done = run_cli(command, "--help")
        assert done.returncode == 0 and "Example" in done.stdout, command
    version = run_cli("--version").stdout
    assert version.count("\n") == 1 and version.startswith("durability, version ")


def test_a_file_name_with_control_characters_never_reaches_the_terminal(
        tmp_path: Path) -> None:
    from tests.helpers import make_git_repo

    repo = make_git_repo(tmp_path / "grepo")
    evil = "evil\x1b]0;pwn\x07\nname"
    (repo / evil).write_text("x\n")
    snap(repo, "--run", "run-x", "--node", "n")
    (repo / evil).unlink()
    snap(repo, "--run", "run-x", "--node", "n")
    for args in (("restore", "run-x", "--seq", "1", "--dry-run"),
                 ("restore", "run-x", "--seq", "1"), ("show", "run-x", "--seq", "2")):
        done = run_cli(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout
        if "--dry-run" in args or "show" in args:  # these name the file: escaped
            assert "evil\\x1b]0;pwn\\x07\\nname" in done.stdout, args
