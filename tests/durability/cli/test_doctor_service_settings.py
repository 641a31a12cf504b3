"""`durability doctor` says when the running service captures under settings
other than this shell's.

A service captures with the environment it was started in: the first hook
that found none started it under its harness's environment.  Found in a new
user's trial: a service started where jj could not be found (DURABILITY_JJ
naming a missing file) filed a jj-missing gap for every later hook, whose own
environment was fine, and doctor said "ok" for the service; installing jj
changes nothing until that service is stopped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.helpers import make_jj_repo, run_cli, start_service


def _service_check(repo: Path) -> dict[str, str]:
    done = run_cli("doctor", "--json", "--project-dir", str(repo))
    checks = {c["name"]: c for c in json.loads(done.stdout)}
    return checks["service"]


def _check_with_service(tmp_path: Path, repo: Path,
                        env: dict[str, str] | None = None) -> dict[str, str]:
    """doctor's service check, from this shell, of a service started under ``env``."""
    service = start_service(tmp_path, env=env)
    try:
        return _service_check(repo)
    finally:
        service.stop()


def test_doctor_warns_of_a_service_that_finds_no_jj_where_this_shell_does(
        tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo", colocate=False)
    broken = dict(os.environ, DURABILITY_JJ=str(tmp_path / "no-such-jj"))
    check = _check_with_service(tmp_path, repo, broken)
    assert check["status"] == "warn", check
    assert "jj-missing" in check["detail"] and "no-such-jj" in check["detail"]
    assert "durability stop" in check["next_step"]


def test_doctor_warns_of_a_service_with_another_backend_or_file_size_limit(
        tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo")
    other = dict(os.environ, DURABILITY_BACKEND="git", DURABILITY_MAX_NEW_FILE_SIZE="1M")
    check = _check_with_service(tmp_path, repo, other)
    assert check["status"] == "warn", check
    assert "DURABILITY_BACKEND=git" in check["detail"]
    assert "DURABILITY_MAX_NEW_FILE_SIZE=1048576" in check["detail"]


def test_a_service_started_here_is_ok(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo")
    check = _check_with_service(tmp_path, repo)
    assert check["status"] == "ok", check


def test_doctor_warns_of_a_service_that_records_under_another_machine_id(
        tmp_path: Path) -> None:
    # Its records would be another machine's: this shell would not see them.
    repo = make_jj_repo(tmp_path / "repo")
    ours = json.loads(run_cli("doctor", "--json", "--project-dir", str(repo)).stdout)
    [machine] = [c for c in ours if c["name"] == "machine"]
    kept = (Path(os.environ["DURABILITY_HOME"]) / "host-id").read_text().strip()
    assert machine["status"] == "ok" and machine["detail"].startswith(f"{kept} (kept in ")
    check = _check_with_service(tmp_path, repo,
                                dict(os.environ, DURABILITY_HOST_ID="service-side"))
    assert check["status"] == "warn", check
    assert f"DURABILITY_HOST_ID=service-side there, {kept} here" in check["detail"]
