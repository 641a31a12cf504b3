"""``durability snapshot-hook`` run as Claude Code runs it: a real payload on
stdin.  Whatever happens it exits 0, prints nothing on stdout, and either a
checkpoint or exactly one gap is on record.

Input validation runs the command's own entry in this process
(``run_cli``); the installed command runs where only a process can show
it: one capture through the service as Claude Code makes it, and the
budget, whose watchdog ends the process with ``os._exit``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.gaps import spool
from durability.ground.ids import safe_filename
from durability.hook import entry as hook_module
from durability.store import Store
from tests.helpers import (
    ServiceProcess,
    cli,
    hook_payload,
    make_jj_repo,
    run_cli,
    run_cli_json,
    start_service,
    wait_for,
)


def run_hook(payload: Any = None, *, raw: bytes | None = None,
             env: Mapping[str, str | None] | None = None,
             timeout: float = 120, process: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the hook (in this process, or with ``process`` the installed
    command); assert the parts of contract 6 (docs/DESIGN.md) that hold always."""
    full = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    data = raw if raw is not None else json.dumps(payload).encode()
    done = (cli if process else run_cli)("snapshot-hook", input=data, env=full, timeout=timeout)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    return done


def checkpoints(run_id: str) -> list[Any]:
    with Store(Settings.from_env().database) as store:
        return store.checkpoints(run_id)


def spool_lines(run_id: str) -> list[dict[str, Any]]:
    path = Path(os.environ["DURABILITY_SPOOL_DIR"]) / (safe_filename(run_id) + spool.SUFFIX)
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def one_gap(run_id: str, reason: str) -> dict[str, Any]:
    """The run's single gap, from the CLI and the spool, with ``reason``."""
    listed = run_cli_json("gaps", run_id)
    assert [g["reason"] for g in listed] == [reason], listed
    assert [g["request_id"] for g in spool_lines(run_id)] == [listed[0]["request_id"]]
    gap: dict[str, Any] = listed[0]
    return gap


def fake_jj(tmp_path: Path, body: str) -> Path:
    """A stand-in jj: the discovery of jj is a boundary this project owns."""
    path = tmp_path / "fake-bin" / "jj"
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


# -- captures ----------------------------------------------------------------------


def test_post_tool_use_through_the_service(service_process: ServiceProcess, repo: Path) -> None:
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("print(1)\n")
    payload = hook_payload(repo, session_id="sess-svc", tool_use_id="toolu_01A",
                           file_path=str(repo / "src" / "a.py"))
    done = run_hook(payload, process=True)  # the installed command, as Claude Code runs it
    assert done.stderr == ""
    [row] = checkpoints("sess-svc")
    assert (row.node_id, row.iteration, row.attempt, row.seq) == ("session", 0, 1, 1)
    assert (row.source, row.tool_use_id, row.label) == ("hook", "toolu_01A", "Write src/a.py")
    assert row.worktree == str(repo)
    assert run_cli_json("gaps", "sess-svc") == []
    assert service_process.proc.poll() is None


def test_post_tool_use_failure_is_captured_too(service_process: ServiceProcess, repo: Path) -> None:
    # A failed Bash command can still have written files.
    (repo / "half.txt").write_text("partial\n")
    payload = hook_payload(repo, session_id="sess-fail", tool_use_id="toolu_02B",
                           tool_name="Bash", event="PostToolUseFailure",
                           error="Command failed with exit code 1", is_interrupt=False)
    payload.pop("tool_response")
    run_hook(payload)
    [row] = checkpoints("sess-fail")
    assert (row.source, row.tool_use_id, row.label) == ("hook", "toolu_02B", "Bash true")


def test_large_but_legal_payload_is_captured(service_process: ServiceProcess, repo: Path) -> None:
    # A Write of a big file carries it in tool_input (and a Read in tool_response).
    content = "line of text\n" * 200_000
    (repo / "big.txt").write_text(content)
    payload = hook_payload(repo, session_id="sess-large", tool_use_id="toolu_12",
                           file_path=str(repo / "big.txt"))
    payload["tool_input"]["content"] = content
    payload["tool_response"] = {"filePath": str(repo / "big.txt"), "content": content}
    run_hook(payload)
    [row] = checkpoints("sess-large")
    assert row.label == "Write big.txt"


def test_without_service_captures_in_process(repo: Path) -> None:
    payload = hook_payload(repo, session_id="sess-local", tool_use_id="toolu_03",
                           file_path=str(repo / "README.md"))
    run_hook(payload)
    [row] = checkpoints("sess-local")
    assert (row.source, row.label) == ("hook", "Write README.md")
    assert spool_lines("sess-local") == []
    assert run_cli_json("gaps", "sess-local") == []


def test_label_is_relative_to_the_root_when_cwd_is_a_symlink(repo: Path, tmp_path: Path) -> None:
    # Claude Code reports the cwd as the user typed it (macOS /tmp is one):
    # the label names the file inside the worktree, not a way around it.
    link = tmp_path / "via-link"
    link.symlink_to(repo)
    payload = hook_payload(link, session_id="sess-link", tool_use_id="toolu_L",
                           tool_name="Edit", file_path=str(link / "README.md"))
    run_hook(payload)
    [row] = checkpoints("sess-link")
    assert (row.worktree, row.label) == (str(repo.resolve()), "Edit README.md")


def test_identity_from_environment_overrides_session(service_process: ServiceProcess,
                                                     repo: Path) -> None:
    payload = hook_payload(repo, session_id="sess-ignored", tool_use_id="toolu_04")
    run_hook(payload, env={"DURABILITY_RUN_ID": "run-env", "DURABILITY_NODE_ID": "node-env",
                           "DURABILITY_ITERATION": "2", "DURABILITY_ATTEMPT": "3"})
    [row] = checkpoints("run-env")
    assert (row.node_id, row.iteration, row.attempt) == ("node-env", 2, 3)
    assert checkpoints("sess-ignored") == []
    [attempt] = run_cli_json("attempts", "run-env")
    assert attempt["jj_pointer"] == row.commit_id


def test_worktree_from_environment(service_process: ServiceProcess, repo: Path,
                                   tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    payload = hook_payload(elsewhere, session_id="sess-wt", tool_use_id="toolu_05",
                           file_path=str(repo / "README.md"))
    run_hook(payload, env={"DURABILITY_WORKTREE": str(repo)})
    [row] = checkpoints("sess-wt")
    assert row.worktree == str(repo)
    assert row.label == "Write README.md"


@pytest.mark.parametrize("with_service", [True, False])
def test_same_tool_use_id_twice_gives_one_row(tmp_path: Path, repo: Path,
                                              with_service: bool) -> None:
    svc = start_service(tmp_path) if with_service else None
    try:
        payload = hook_payload(repo, session_id="sess-twice", tool_use_id="toolu_06")
        run_hook(payload)
        # The tree changes in between, so only the request id can make the
        # second call a replay rather than a new checkpoint.
        (repo / "later.txt").write_text("later\n")
        run_hook(payload)
        assert [r.tool_use_id for r in checkpoints("sess-twice")] == ["toolu_06"]
        run_hook(hook_payload(repo, session_id="sess-twice", tool_use_id="toolu_07"))
        assert [(r.seq, r.tool_use_id) for r in checkpoints("sess-twice")] == [
            (1, "toolu_06"), (2, "toolu_07")]
    finally:
        if svc is not None:
            svc.stop()


# -- bad input becomes one gap ----------------------------------------------------------


def test_malformed_json_is_one_gap_under_its_session() -> None:
    run_hook(raw=b'{"session_id": "sess-torn", "cwd": "/tmp", "tool_na')
    gap = one_gap("sess-torn", "bad-hook-input")
    assert "JSON" in gap["detail"]
    assert gap["source"] == "hook"


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"null", b"", b"\xff\xfe\x00"])
def test_input_that_is_not_an_object_is_one_gap(raw: bytes) -> None:
    run_hook(raw=raw)
    one_gap("_invalid", "bad-hook-input")


@pytest.mark.parametrize("raw", [b"[1]", b'{"session_id": "sess-other", "cwd'])
def test_unreadable_input_is_filed_under_the_environment_run(raw: bytes) -> None:
    run_hook(raw=raw, env={"DURABILITY_RUN_ID": "run-from-env"})
    one_gap("run-from-env", "bad-hook-input")
    assert spool_lines("sess-other") == [] and spool_lines("_invalid") == []


def test_oversized_input_is_one_gap(repo: Path) -> None:
    head = json.dumps(hook_payload(repo, session_id="sess-big"))[:-1]
    pad = b"x" * (hook_module.MAX_INPUT_BYTES + 10)
    run_hook(raw=head.encode() + b', "pad": "' + pad + b'"}')
    gap = one_gap("sess-big", "bad-hook-input")
    assert str(hook_module.MAX_INPUT_BYTES) in gap["detail"]
    assert checkpoints("sess-big") == []


@pytest.mark.parametrize("env", [{}, {"DURABILITY_RUN_ID": "../../x"}])
def test_bad_run_id_is_one_gap_and_never_a_path(repo: Path, tmp_path: Path,
                                                env: dict[str, str]) -> None:
    session = "sess-ok" if env else "../../x"
    run_hook(hook_payload(repo, session_id=session), env=env)
    gap = one_gap("_invalid", "bad-hook-input")
    assert "../../x" in gap["detail"]
    spool_dir = Path(os.environ["DURABILITY_SPOOL_DIR"])
    assert sorted(p.name for p in spool_dir.iterdir()) == ["_invalid" + spool.SUFFIX]
    assert not (tmp_path / "x.gaps.ndjson").exists()
    assert checkpoints("sess-ok") == []


@pytest.mark.parametrize(("name", "value"), [("DURABILITY_NODE_ID", "a/b"),
                                             ("DURABILITY_ITERATION", "-1"),
                                             ("DURABILITY_ATTEMPT", "zero")])
def test_bad_identity_from_environment_is_one_gap(repo: Path, name: str, value: str) -> None:
    run_hook(hook_payload(repo, session_id="sess-badenv"), env={name: value})
    one_gap("sess-badenv", "bad-hook-input")
    assert checkpoints("sess-badenv") == []


@pytest.mark.parametrize(("where", "reason"), [("plain", "not-a-jj-repo"),
                                               ("missing", "worktree-missing"),
                                               ("relative", "bad-hook-input")])
def test_unusable_cwd_is_one_gap(tmp_path: Path, where: str, reason: str) -> None:
    cwd = tmp_path / where
    if where == "plain":
        cwd.mkdir()
    payload = hook_payload(cwd, session_id=f"sess-{where}", tool_use_id="toolu_09")
    if where == "relative":
        payload["cwd"] = "some/relative/dir"
    # jj only: a plain folder is then "not a jj repo" (not a git tree to try).
    run_hook(payload, env={"DURABILITY_BACKEND": "jj"})
    gap = one_gap(f"sess-{where}", reason)
    assert (gap["node_id"], gap["iteration"], gap["attempt"]) == ("session", 0, 1)
    assert gap["tool_use_id"] == "toolu_09"


def test_service_side_failure_is_recorded_once(service_process: ServiceProcess,
                                               tmp_path: Path) -> None:
    # Looks like a jj workspace to the hook, but jj cannot read it: the service
    # files the gap and the hook must not file a second one.
    broken = tmp_path / "broken"
    (broken / ".jj" / "repo").mkdir(parents=True)
    (broken / ".jj" / "working_copy").mkdir()
    run_hook(hook_payload(broken, session_id="sess-broken", tool_use_id="toolu_10"))
    gap = one_gap("sess-broken", wait_for(lambda: spool_lines("sess-broken"))[0]["reason"])
    assert gap["reason"] in {"jj-failed", "not-a-jj-repo"}
    assert gap["tool_use_id"] == "toolu_10"


# -- jj discovery --------------------------------------------------------------------


def test_jj_missing_is_a_gap(tmp_path: Path) -> None:
    # Not colocated: a colocated repository without jj is captured through git.
    repo = make_jj_repo(tmp_path / "jj-only", colocate=False)
    run_hook(hook_payload(repo, session_id="sess-nojj"),
             env={"DURABILITY_JJ": str(tmp_path / "no-such-jj")})
    one_gap("sess-nojj", "jj-missing")
    assert checkpoints("sess-nojj") == []


def test_jj_too_old_is_a_gap(repo: Path, tmp_path: Path) -> None:
    old = fake_jj(tmp_path, 'echo "jj 0.20.0"\n')
    run_hook(hook_payload(repo, session_id="sess-oldjj"), env={"DURABILITY_JJ": str(old)})
    gap = one_gap("sess-oldjj", "jj-too-old")
    assert "0.20.0" in gap["detail"]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in {"Z", "X"}


ANSWERS_VERSION = 'if [ "$1" = "--version" ]; then echo "jj 0.46.0"; exit 0; fi\n'


def hang_jj(repo: Path, tmp_path: Path, session: str, *, version: str, budget_ms: int,
            reason: str) -> None:
    """One hook call whose jj (after ``version``, the fake's answer to
    ``--version``) hangs: exactly one ``reason`` gap from the hook, no
    checkpoint, and the hanging jj gone afterwards."""
    pid_file = tmp_path / "jj.pid"
    slow = fake_jj(tmp_path, f'{version}echo $$ > "{pid_file}"\nexec sleep 300\n')
    # The subprocess timeout (60 s) is far below the fake jj's 300 s: only the
    # hook's own budget can make this pass.
    run_hook(hook_payload(repo, session_id=session), timeout=60, process=True,
             env={"DURABILITY_JJ": str(slow), "DURABILITY_HOOK_TIMEOUT_MS": str(budget_ms)})
    gap = one_gap(session, reason)
    assert gap["source"] == "hook"
    pid = int(pid_file.read_text())
    wait_for(lambda: _gone(pid), timeout=30)
    assert checkpoints(session) == []


@pytest.mark.timing
@pytest.mark.parametrize("hangs_on_version", [False, True])
def test_hanging_jj_is_bounded_by_the_hook_budget(repo: Path, tmp_path: Path,
                                                   hangs_on_version: bool) -> None:
    hang_jj(repo, tmp_path, "sess-hang", version="" if hangs_on_version else ANSWERS_VERSION,
            budget_ms=2000, reason="timeout" if hangs_on_version else "jj-timeout")


@pytest.mark.timing
def test_wedged_service_is_bounded_by_the_hook_budget(repo: Path) -> None:
    # Something listens on the socket and never answers (a wedged service).
    sock_path = os.environ["DURABILITY_SOCKET"]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as wedged:
        wedged.bind(sock_path)
        wedged.listen(8)
        # A short answer wait in a long budget: with a 4 s budget the
        # in-process capture got about 1.9 s, which a loaded machine overran
        # (a timeout gap, no checkpoint).
        run_hook(hook_payload(repo, session_id="sess-wedged"), timeout=60, process=True,
                 env={"DURABILITY_HOOK_TIMEOUT_MS": "30000",
                      "DURABILITY_SERVICE_ANSWER_MS": "1500"})
    # Issue 8: the hook stops waiting after its answer wait (never more than
    # half its budget: test_answer_wait.py) and captures in-process with the
    # rest (docs/RELIABILITY.md).
    [row] = checkpoints("sess-wedged")
    assert row.worktree == str(repo)
    assert spool_lines("sess-wedged") == []


# -- the fast path ---------------------------------------------------------------------

_IMPORTS = r"""
import io, json, sys
before = set(sys.modules)
sys.argv = ["durability", "snapshot-hook"]
sys.stdin = io.TextIOWrapper(io.BytesIO(PAYLOAD))
from durability.__main__ import main
try:
    main()
except SystemExit as exc:
    code = exc.code
sys.stderr.write(json.dumps({"code": code, "new": sorted(set(sys.modules) - before)}))
"""


def test_fast_path_imports_only_the_standard_library(service_process: ServiceProcess,
                                                      repo: Path) -> None:
    payload = json.dumps(hook_payload(repo, session_id="sess-fast", tool_use_id="toolu_11"))
    script = f"PAYLOAD = {payload.encode()!r}\n" + _IMPORTS
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    report = json.loads(done.stderr)
    assert report["code"] == 0
    [row] = checkpoints("sess-fast")  # it really went through the service
    assert row.tool_use_id == "toolu_11"
    tops = {name.split(".")[0] for name in report["new"]}
    forbidden = {"click", "pydantic", "pydantic_core", "pygit2", "filelock", "watchdog",
                 "platformdirs"}
    assert not tops & forbidden, sorted(tops & forbidden)
    assert tops - set(sys.stdlib_module_names) <= {"durability"}, sorted(tops)
    ours = {n for n in report["new"] if n.startswith("durability.")}
    assert not ours & {"durability.cli.main", "durability.capture.capturer",
                       "durability.service.server", "durability.config",
                       "durability.capture.inprocess", "durability.service.protocol",
                       "durability.store", "durability.runs"}
