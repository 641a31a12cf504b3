"""Every exit status docs/reference/exit-codes.md documents, reached through
the installed CLI, and the table they come from (``durability.ground.errors``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.ground import errors
from durability.ground.store_errors import NotFound, StoreUnavailable
from tests.helpers import cli, git, make_git_repo, run_cli, start_service


def _code_line(done: object, code: str) -> None:
    stderr = getattr(done, "stderr", "")
    assert stderr.startswith(f"durability: {code}: "), stderr
    assert stderr.count("\n") == 1, stderr  # one line, never a traceback


def test_invalid_value_exits_2() -> None:
    done = run_cli("snapshots", "../escape")
    assert done.returncode == 2
    _code_line(done, "invalid-value")


def test_a_bad_option_exits_2_with_the_same_one_line_form() -> None:
    done = run_cli("snapshots", "run", "--no-such-option")
    assert done.returncode == 2
    _code_line(done, "invalid-value")


def test_not_found_exits_3(tmp_path: Path) -> None:
    done = run_cli("restore", "no-such-run", "--node", "n")
    assert done.returncode == 3
    _code_line(done, "not-found")


def test_service_unreachable_exits_4(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    done = run_cli("watch", str(repo), "--run", "r", "--node", "n")
    assert done.returncode == 4
    _code_line(done, "service-unreachable")


def test_service_running_exits_4(tmp_path: Path) -> None:
    svc = start_service(tmp_path)
    try:
        done = cli("serve")  # a service process: its signal handlers are its own
        assert done.returncode == 4
        _code_line(done, "service-running")
    finally:
        assert svc.stop() == 0


def test_a_capture_error_exits_5(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = run_cli("snapshot", str(plain), "--run", "r", "--node", "n")
    assert done.returncode == 5
    _code_line(done, "not-a-repo")


def _unusable_state(tmp_path: Path) -> dict[str, str]:
    """A state folder whose database path is a folder: every store use fails."""
    home = tmp_path / "state-broken"
    (home / "state.db").mkdir(parents=True)
    env = {**os.environ, "DURABILITY_HOME": str(home)}
    env.pop("DURABILITY_DATABASE_URL", None)  # the suite on PostgreSQL: this one is the file
    return env


@pytest.mark.parametrize("command", ["snapshot", "gaps", "snapshots", "attempts"])
def test_store_unavailable_exits_6_from_every_command(tmp_path: Path, command: str) -> None:
    # `snapshot` used to exit 5 here (the capture carried the store's code)
    # where `gaps` exited 6: the code decides the status, not the carrier.
    repo = make_git_repo(tmp_path / "repo")
    args = {"snapshot": ("snapshot", str(repo), "--run", "r", "--node", "n")}.get(
        command, (command, "r"))
    done = run_cli(*args, env=_unusable_state(tmp_path))
    assert done.returncode == 6, done.stderr
    _code_line(done, "store-unavailable")


def test_restore_conflict_exits_7(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("v1\n")
    assert run_cli("snapshot", str(repo), "--run", "r", "--node", "n").returncode == 0
    (repo / "notes.txt").unlink()
    assert run_cli("snapshot", str(repo), "--run", "r", "--node", "n").returncode == 0
    with open(repo / ".git" / "info" / "exclude", "a") as f:
        f.write("notes.txt\n")
    (repo / "notes.txt").write_text("PRECIOUS\n")
    done = run_cli("restore", "r", "--node", "n", "--seq", "1")
    assert done.returncode == 7
    _code_line(done, "restore-conflict")
    git(repo, "status", "--short")  # the repository itself is untouched and readable


def test_every_code_of_the_tree_has_a_documented_status() -> None:
    documented = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 75}
    assert set(errors._EXIT_CODES.values()) == documented
    assert all(errors._EXIT_CODES.get(reason) == 5 for reason in
               ("jj-missing", "jj-too-old", "not-a-jj-repo", "not-a-repo", "worktree-missing",
                "jj-failed", "git-failed", "jj-timeout", "timeout"))


@pytest.mark.parametrize(("error", "status"), [
    (errors.CaptureError("x", code="store-unavailable"), 6),
    (errors.ServiceError("x"), 4),
    (errors.ServiceTimeout("x"), 5),
    (errors.ConnectionLost("x"), 4),
    (errors.CaptureError("x", code="some-new-capture-code"), 5),
    (errors.DurabilityError("x", code="some-new-code"), 1),
    (NotFound("x"), 3),
    (StoreUnavailable("x"), 6),
])
def test_exit_code_by_code_then_family(error: BaseException, status: int) -> None:
    assert errors.exit_code(error) == status


@pytest.mark.parametrize(("code", "kind"), [
    ("not-found", NotFound), ("store-unavailable", StoreUnavailable),
    ("service-running", errors.ServiceRunning), ("peer-refused", errors.ProtocolError),
    ("restore-conflict", errors.RestoreError), ("jj-failed", errors.CaptureError),
    ("whatever", errors.DurabilityError),
])
def test_a_code_from_the_wire_becomes_its_error(code: str, kind: type) -> None:
    error = errors.from_code(code, "message")
    assert type(error) is kind
    assert getattr(error, "code", None) == code and str(error) == "message"


def test_a_file_the_command_cannot_write_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    project = tmp_path / "project"
    project.mkdir()
    env = {**os.environ, "XDG_DATA_HOME": str(blocker)}
    done = run_cli("install-hook", "--scope", "project", "--project-dir", str(project), env=env)
    assert done.returncode == 2
    _code_line(done, "invalid-value")
    assert str(blocker) in done.stderr
