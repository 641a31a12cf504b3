"""``run_cli`` (tests/helpers.py), the command run in this process, answers
as the installed command does: the same exit status, stdout and stderr,
with exactly the environment it is given."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest

from tests.helpers import INSTALLED_COMMAND_TESTS, cli, run_cli

CASES = {
    "version": (["--version"], None),
    "no command": ([], None),
    "help": (["restore", "--help"], None),
    "unknown option": (["log", "--bogus"], None),
    "unknown command": (["nosuch"], None),
    "invalid id": (["gaps", "bad id!"], None),
    "not found": (["gaps", "nobody-here", "--json"], None),
    "empty listing": (["sessions", "--json"], None),
    "hook input": (["snapshot-hook"], b'{"session_id": "sess-torn", "cwd": "/tm'),
}


@pytest.mark.parametrize("name", CASES)
def test_run_cli_answers_as_the_installed_command(name: str) -> None:
    args, data = CASES[name]
    installed = cli(*args, input=data)
    here = run_cli(*args, input=data)
    assert (here.returncode, here.stdout, here.stderr) == \
        (installed.returncode, installed.stdout, installed.stderr)


def test_run_cli_sees_exactly_the_environment_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABILITY_HOOK_TIMEOUT_MS", "soon")  # refused by the settings
    refused = run_cli("sessions")
    assert refused.returncode == 2 and "DURABILITY_HOOK_TIMEOUT_MS" in refused.stderr
    assert (refused.returncode, refused.stderr) == (cli("sessions").returncode,
                                                    cli("sessions").stderr)
    without = {k: v for k, v in os.environ.items() if k != "DURABILITY_HOOK_TIMEOUT_MS"}
    assert run_cli("sessions", env=without).returncode == 0
    assert cli("sessions", env=without).returncode == 0
    assert os.environ["DURABILITY_HOOK_TIMEOUT_MS"] == "soon"  # put back after the call


def test_run_cli_runs_in_the_folder_it_is_given(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    here = run_cli("snapshot", "--run", "r", "--node", "n", cwd=plain)
    assert here.returncode == 5 and str(plain) in here.stderr
    assert Path.cwd() != plain


def test_run_cli_refuses_a_second_call_from_another_thread() -> None:
    from tests import helpers

    errors: list[BaseException] = []
    with helpers._run_cli_lock:  # a call is under way
        def call() -> None:
            try:
                run_cli("--version")
            except RuntimeError as exc:
                errors.append(exc)

        thread = threading.Thread(target=call)
        thread.start()
        thread.join(60)
    assert len(errors) == 1 and "one command at a time" in str(errors[0])


def test_the_installed_command_tests_are_there() -> None:
    root = Path(__file__).resolve().parents[3]
    for entry in INSTALLED_COMMAND_TESTS:
        path, name = entry.split("::")
        tree = ast.parse((root / path).read_text())
        assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, entry
