"""The pre-call hook (Claude Code and Codex ``PreToolUse``, Gemini CLI
``BeforeTool``): it records the call announced, and a call announced and never
finished is one ``call-unfinished`` gap, decided at the session's next hook
or its end, named in the label of the checkpoint that holds what it wrote.

In process: ``entry.main`` with the harnesses' payloads (their shapes as in
test_harness_payloads.py), real jj, real spool and store.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.gaps import calls, spool
from durability.gaps.ingest import ingest_spool
from durability.ground import errors, paths
from durability.hook import entry as hook_entry
from durability.store import Store
from tests.durability.hook.test_entry import _IMPORTS
from tests.durability.hook.test_harness_payloads import (
    codex_payload,
    codex_stop_payload,
    gemini_payload,
)
from tests.durability.hook.test_imports import HEAVY
from tests.helpers import (
    ServiceProcess,
    hook_payload,
    make_git_repo,
    make_jj_repo,
    run_cli,
    run_cli_json,
    store_git,
)

SESSION = "sess-announce"


def hook(payload: dict[str, Any]) -> None:
    """One hook call, as the harness makes it (in process)."""
    assert hook_entry.main(io.BytesIO(json.dumps(payload).encode())) == 0


def pre(repo: Path, call: str, **kw: Any) -> dict[str, Any]:
    """Claude Code's PreToolUse payload: the post-call one without a response."""
    kw.setdefault("session_id", SESSION)
    payload = hook_payload(repo, tool_use_id=call, event="PreToolUse", **kw)
    payload.pop("tool_response")
    return payload


def post(repo: Path, call: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("session_id", SESSION)
    return hook_payload(repo, tool_use_id=call, **kw)


def bash(command: str) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": command, "description": "run"}}


def gaps(run_id: str = SESSION) -> list[Any]:
    settings = Settings.from_env()
    with Store(settings.database) as store:
        ingest_spool(store, paths.spool_dirs())
        return store.gaps(run_id)


def spool_gaps(run_id: str = SESSION) -> list[dict[str, Any]]:
    """The gap lines the hooks spooled (read without ingesting anything)."""
    path = Path(os.environ["DURABILITY_SPOOL_DIR"]) / (run_id + spool.SUFFIX)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def labels(run_id: str = SESSION) -> list[str | None]:
    with Store(Settings.from_env().database) as store:
        return [c.label for c in store.checkpoints(run_id)]


def calls_file(run_id: str = SESSION) -> Path:
    return Path(calls.calls_file(paths.spool_dir_str(), run_id))


@pytest.fixture(autouse=True)
def live_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness of every in-process hook: this test's own process, alive
    until the test ends.  ``calls.harness_process`` walks the ancestors of the
    process that runs the hook, which in process are pytest's: whatever
    started pytest (a shell reparented to init, ``timeout``) would decide
    these tests.  Its walk is tested on its own, with a process tree the test
    builds (``test_the_harness_is_*``); a killed harness is a ``Harness``."""
    identity = calls.process_identity(os.getpid())
    assert identity is not None
    monkeypatch.setattr(calls, "harness_process", lambda: identity)


class Harness:
    """A harness process the test kills: the pre-call hooks made while it
    lives are announced by it (``calls.harness_process`` is where the hook
    finds its harness; everything after is real)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        identity = calls.process_identity(self.proc.pid)
        assert identity is not None
        self.patch = pytest.MonkeyPatch()
        self.patch.setattr(calls, "harness_process", lambda: identity)

    def kill(self) -> None:
        """Kill it; the hooks after are the resumed session's, a live harness."""
        self.proc.kill()
        self.proc.wait()
        self.patch.undo()


@pytest.fixture
def harness() -> Iterator[Harness]:
    made = Harness()
    yield made
    made.kill()


def test_calls_announced_then_finished_leave_no_gap(repo: Path) -> None:
    hook(pre(repo, "toolu_A", **bash("echo one > one.txt")))
    (repo / "one.txt").write_text("one\n")
    hook(post(repo, "toolu_A", **bash("echo one > one.txt")))
    hook(pre(repo, "toolu_B", file_path=str(repo / "two.txt")))
    (repo / "two.txt").write_text("two\n")
    hook(post(repo, "toolu_B", file_path=str(repo / "two.txt")))
    assert gaps() == []
    assert labels() == ["Bash echo one > one.txt", "Write two.txt"]
    assert not calls_file().exists()  # nothing open: no file left


@pytest.mark.parametrize("backend", ["jj", "git"])
def test_a_killed_bash_call_is_one_gap_at_the_next_hook(
        tmp_path: Path, harness: Harness, backend: str) -> None:
    repo = make_jj_repo(tmp_path / "jj") if backend == "jj" else \
        make_git_repo(tmp_path / "git").resolve()
    hook(pre(repo, "toolu_K", **bash("sleep 30; echo late > late.txt")))
    (repo / "half.txt").write_text("written before the kill\n")
    harness.kill()
    assert spool_gaps() == []  # nothing is decided until the session's next hook
    hook(pre(repo, "toolu_N", file_path=str(repo / "next.txt")))
    assert [g["reason"] for g in spool_gaps()] == ["call-unfinished"]
    [gap] = gaps()
    assert (gap.reason, gap.tool_use_id, gap.node_id, gap.worktree) == (
        "call-unfinished", "toolu_K", "session", str(repo))
    assert "Bash sleep 30; echo late > late.txt" in (gap.detail or "")
    assert gap.reason in errors.GAP_REASONS  # a stable reason, listed with the others
    (repo / "next.txt").write_text("next\n")
    hook(post(repo, "toolu_N", file_path=str(repo / "next.txt")))
    # The checkpoint that holds the killed call's writes names it.
    assert labels() == ["Write next.txt [after unfinished: Bash sleep 30; echo late > late.txt]"]
    with Store(Settings.from_env().database) as store:
        [row] = store.checkpoints(SESSION)
    assert "half.txt" in store_git(repo, "ls-tree", "-r", "--name-only", row.commit_id).stdout
    hook(pre(repo, "toolu_M", **bash("true")))
    (repo / "more.txt").write_text("more\n")
    hook(post(repo, "toolu_M", **bash("true")))
    assert [g.reason for g in gaps()] == ["call-unfinished"]
    assert labels()[-1] == "Bash true"


def test_a_killed_call_is_decided_by_the_next_post_call_hook_too(
        repo: Path, harness: Harness) -> None:
    """An install whose next call has no pre-call hook (or a payload of
    another call): its post-call hook decides."""
    hook(pre(repo, "toolu_K", **bash("sleep 30")))
    harness.kill()
    hook(post(repo, "toolu_N", file_path=str(repo / "README.md")))
    assert [(g.reason, g.tool_use_id) for g in gaps()] == [("call-unfinished", "toolu_K")]
    assert labels() == ["Write README.md [after unfinished: Bash sleep 30]"]


def test_a_session_killed_and_never_resumed_still_has_its_gap(
        repo: Path, harness: Harness) -> None:
    """No later hook of the session comes: gap ingestion (every command that
    reads gaps, and the service) files it once its harness is gone; resumed
    after all, the session's next capture still names it, with no second gap."""
    hook(pre(repo, "toolu_K", **bash("make all")))
    assert run_cli("gaps", SESSION).returncode == 3  # running: nothing on record yet
    harness.kill()
    [gap] = run_cli_json("gaps", SESSION)
    assert (gap["reason"], gap["tool_use_id"]) == ("call-unfinished", "toolu_K")
    assert [g["reason"] for g in run_cli_json("gaps", SESSION)] == ["call-unfinished"]
    (repo / "built.txt").write_text("x\n")
    hook(post(repo, "toolu_N", file_path=str(repo / "built.txt")))
    assert labels() == ["Write built.txt [after unfinished: Bash make all]"]
    assert len(run_cli_json("gaps", SESSION)) == 1
    assert not calls_file().exists()


def test_an_attempt_retried_decides_the_killed_attempts_call(
        repo: Path, harness: Harness) -> None:
    """A durable run retries a killed attempt as attempt 2 (a new session, a
    new lane): its first hook finds the first attempt's harness gone."""
    run = {**os.environ, "DURABILITY_RUN_ID": "run-7", "DURABILITY_NODE_ID": "build"}
    payload = pre(repo, "toolu_K", **bash("make"))
    assert hook_entry.main(io.BytesIO(json.dumps(payload).encode()), env=run) == 0
    harness.kill()
    retried = {**run, "DURABILITY_ATTEMPT": "2"}
    payload = pre(repo, "toolu_R", session_id="sess-retry", **bash("make"))
    assert hook_entry.main(io.BytesIO(json.dumps(payload).encode()), env=retried) == 0
    [gap] = spool_gaps("run-7")
    assert (gap["reason"], gap["node_id"], gap["attempt"], gap["tool_use_id"]) == (
        "call-unfinished", "build", 1, "toolu_K")
    for n, call in enumerate(["toolu_R", "toolu_S"]):
        (repo / f"out{n}.txt").write_text("x\n")
        payload = post(repo, call, session_id="sess-retry", **bash("make"))
        assert hook_entry.main(io.BytesIO(json.dumps(payload).encode()), env=retried) == 0
    # The retried attempt's first checkpoint names the killed call, and only that one.
    assert labels("run-7") == ["Bash make [after unfinished: Bash make]", "Bash make"]
    assert not calls_file("run-7").exists()


@pytest.mark.parametrize("end", ["Stop", "SessionEnd"])
def test_a_call_never_finished_is_one_gap_at_the_session_end(repo: Path, end: str) -> None:
    # The harness lives on (a call its post-call hook never came for).
    hook(pre(repo, "toolu_K", **bash("sleep 30")))
    stop = {"session_id": SESSION, "transcript_path": str(repo / "t.jsonl"), "cwd": str(repo),
            "permission_mode": "default", "hook_event_name": end}
    hook(stop)
    hook(stop)  # installed twice: still one gap
    [gap] = gaps()
    assert (gap.reason, gap.tool_use_id) == ("call-unfinished", "toolu_K")
    assert labels()[0] in ("turn end [after unfinished: Bash sleep 30]",
                           "[after unfinished: Bash sleep 30]")
    assert not calls_file().exists()


def test_a_call_denied_or_blocked_is_a_gap_that_claims_no_writes(repo: Path) -> None:
    """Claude Code runs PreToolUse before its permission checks: a call the
    user denies, or another hook blocks, never runs and gets no post-call
    hook.  Its gap cannot tell a kill from a denial, and claims no writes."""
    hook(pre(repo, "toolu_D", **bash("rm -rf build")))
    hook({"session_id": SESSION, "cwd": str(repo), "hook_event_name": "SessionEnd"})
    [gap] = gaps()
    assert (gap.reason, gap.tool_use_id) == ("call-unfinished", "toolu_D")
    assert "killed, denied or blocked" in (gap.detail or "")
    assert "anything it wrote is in the next checkpoint" in (gap.detail or "")
    assert "what it wrote is" not in (gap.detail or "")


def test_a_call_the_permission_classifier_denied_is_no_gap(repo: Path) -> None:
    """Claude Code's PermissionDenied (its auto mode denied the call): the
    call never ran, so it is over, with nothing to capture and no gap."""
    hook(pre(repo, "toolu_D", **bash("rm -rf build")))
    (repo / "other.txt").write_text("another session's edit\n")
    denied = pre(repo, "toolu_D", **bash("rm -rf build"))
    denied.update(hook_event_name="PermissionDenied", reason="Permission denied")
    hook(denied)
    assert labels() == []  # it ran nothing: no checkpoint
    hook({"session_id": SESSION, "cwd": str(repo), "hook_event_name": "SessionEnd"})
    assert gaps() == []
    assert not calls_file().exists()


def test_codex_a_call_never_finished_is_named_at_the_turn_end(repo: Path) -> None:
    payload = codex_payload(repo, "apply_patch", call_id="call_P")
    payload["hook_event_name"] = "PreToolUse"
    payload.pop("tool_response")
    hook(payload)
    hook(codex_stop_payload(repo))
    [gap] = gaps("0199a7c1-codex-session")
    assert (gap.reason, gap.tool_use_id) == ("call-unfinished", "call_P")
    assert labels("0199a7c1-codex-session") == ["turn end [after unfinished: Bash apply_patch]"]


def test_gemini_calls_pair_by_their_input_and_the_agent_end_decides(repo: Path) -> None:
    target = str(repo / "notes.md")
    before = gemini_payload(repo, "write_file", {"file_path": target, "content": "x"})
    before["hook_event_name"] = "BeforeTool"
    before.pop("tool_response")
    hook(before)
    hook(gemini_payload(repo, "write_file", {"file_path": target, "content": "x"}))
    assert gaps("gemini-session-1") == []
    shell = gemini_payload(repo, "run_shell_command", {"command": "make"})
    shell["hook_event_name"] = "BeforeTool"
    hook(shell)
    hook({"session_id": "gemini-session-1", "transcript_path": str(repo / "chat.json"),
          "cwd": str(repo), "hook_event_name": "AfterAgent",
          "timestamp": "2026-11-29T10:00:09.000Z", "prompt": "build it",
          "prompt_response": "Done.", "stop_hook_active": False})
    [gap] = gaps("gemini-session-1")
    assert (gap.reason, gap.tool_use_id) == ("call-unfinished", None)
    assert "run_shell_command make" in (gap.detail or "")


def test_a_parallel_batch_and_a_sub_agent_decide_nothing(repo: Path) -> None:
    """Calls of one batch may run at once and finish in any order; a
    sub-agent's calls run while its parent's Task call is open."""
    read = {"tool_name": "Read"}
    hook(pre(repo, "toolu_R1", file_path=str(repo / "README.md"), **read))
    hook(pre(repo, "toolu_R2", file_path=str(repo / "README.md"), **read))
    hook(post(repo, "toolu_R2", file_path=str(repo / "README.md"), **read))
    hook(post(repo, "toolu_R1", file_path=str(repo / "README.md"), **read))
    task = {"tool_name": "Task", "tool_input": {"prompt": "look around"}}
    hook(pre(repo, "toolu_T", **task))
    sub = {"agent_id": "agent-7", "agent_type": "Explore"}
    hook(pre(repo, "toolu_S", **bash("ls"), **sub))
    hook(post(repo, "toolu_S", **bash("ls"), **sub))
    hook(post(repo, "toolu_T", **task))
    assert gaps() == []
    assert not calls_file().exists()


def test_calls_started_while_a_long_one_runs_decide_nothing(repo: Path) -> None:
    """Claude Code starts each read-only call as it streams in, beside those
    still running: calls starting and finishing around a long one (a Task's
    sub-agent, a slow search) say nothing about it while its harness lives."""
    hook(pre(repo, "toolu_T", tool_name="Task", tool_input={"prompt": "look"}))
    for call in ("toolu_R1", "toolu_R2"):
        hook(pre(repo, call, file_path=str(repo / "README.md"), tool_name="Read"))
        hook(post(repo, call, file_path=str(repo / "README.md"), tool_name="Read"))
    hook(post(repo, "toolu_T", tool_name="Task", tool_input={"prompt": "look"}))
    assert gaps() == []
    hook(pre(repo, "toolu_A", **bash("sleep 30")))  # its post-call hook never comes
    hook(pre(repo, "toolu_B", **bash("true")))
    hook(post(repo, "toolu_B", **bash("true")))
    hook(pre(repo, "toolu_C", **bash("ls")))
    hook(post(repo, "toolu_C", **bash("ls")))
    assert gaps() == []  # the harness lives: decided at the turn's end
    (repo / "end.txt").write_text("x\n")
    hook({"session_id": SESSION, "cwd": str(repo), "hook_event_name": "Stop"})
    assert [(g.reason, g.tool_use_id) for g in gaps()] == [("call-unfinished", "toolu_A")]
    assert labels()[-1] == "turn end [after unfinished: Bash sleep 30]"


def test_without_proc_a_new_batch_decides_a_call_left_open(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the harness process cannot be known (no /proc), a pre-call hook
    after a post-call one decides: a new batch began, the old one is over."""
    monkeypatch.setattr(calls, "harness_process", lambda: None)
    hook(pre(repo, "toolu_A", **bash("sleep 30")))
    hook(pre(repo, "toolu_B", **bash("true")))  # the same batch: maybe parallel
    hook(post(repo, "toolu_B", **bash("true")))
    assert gaps() == []
    hook(pre(repo, "toolu_C", **bash("ls")))  # a new batch
    assert [(g.reason, g.tool_use_id) for g in gaps()] == [("call-unfinished", "toolu_A")]
    (repo / "c.txt").write_text("c\n")
    hook(post(repo, "toolu_C", **bash("ls")))
    assert labels()[-1] == "Bash ls [after unfinished: Bash sleep 30]"


def test_an_install_without_the_pre_call_event_keeps_no_calls_file(repo: Path) -> None:
    hook(post(repo, "toolu_A", **bash("true")))
    (repo / "end.txt").write_text("end\n")
    hook({"session_id": SESSION, "cwd": str(repo), "hook_event_name": "Stop"})
    assert gaps() == []
    assert not calls_file().exists()
    assert labels() == ["Bash true", "turn end"]


def test_a_pre_call_hook_captures_nothing_and_files_no_gap_of_its_own(repo: Path) -> None:
    (repo / "early.txt").write_text("x\n")
    hook(pre(repo, "toolu_A", **bash("true")))
    hook({**pre(repo, "toolu_B", **bash("true")), "cwd": "relative/path"})
    assert labels() == []
    assert gaps() == []


def test_the_summary_is_short_and_hides_token_shaped_words() -> None:
    token = "ghp_" + "a1B2c3D4e5" * 4
    text = calls.summary(f"curl -H 'Authorization: Bearer {token}' https://x.example/a")
    assert token not in text
    assert text == "curl -H 'Authorization: Bearer [redacted]' https://x.example/a"
    assert calls.summary(f"TOKEN={'Z9' * 20} make") == "TOKEN=[redacted] make"
    assert calls.summary("ls src/very_long_but_plain_folder_name_here/") == \
        "ls src/very_long_but_plain_folder_name_here/"
    assert len(calls.summary("echo " + "word " * 100)) == 80


_PROBE = "from durability.gaps import calls; print(calls.harness_process())"


def _harness_identity() -> str:
    """This process's identity: the harness of the process trees below (the
    real ``/proc`` walk), which read the output of what they run, as the
    harnesses read their hooks'.  No age is waited for: the walk asks who
    reads the hook's output, not how long anything took to start."""
    identity = calls.process_identity(os.getpid())
    assert identity is not None
    return identity


def _helper(tmp_path: Path, shape: str, command: str) -> str:
    """A shell command running ``command`` through a helper of ``shape``
    that does not exec it (and ends with it), as the harness would run it."""
    script = tmp_path / "run-hook.sh"
    if shape == "shells":
        return f"/bin/sh -c \"{command}; true\"; true"
    if shape == "shebang script":  # its process is named after the script
        script.write_text(f"#!/bin/sh\n{command}\nstatus=$?\nexit $status\n")
        script.chmod(0o755)
        return f"{script}; true"
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text("import subprocess, sys\n"
                       f"sys.exit(subprocess.run({command!r}, shell=True).returncode)\n")
    return f"{sys.executable} {wrapper}; true"


@pytest.mark.parametrize("shape", ["shells", "shebang script", "python wrapper"])
def test_the_harness_is_the_first_ancestor_that_is_no_shell_or_helper(
        tmp_path: Path, shape: str) -> None:
    """The real walk: this process runs a hook-shaped tree (a shell, then
    the helper, then the process asking); the helper started with it."""
    harness_identity = _harness_identity()
    command = _helper(tmp_path, shape, f"{sys.executable} -c '{_PROBE}'")
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == harness_identity


def test_the_harness_is_the_maker_of_the_socket_pair_the_hook_writes_to(
        tmp_path: Path) -> None:
    """Node (Claude Code, Gemini CLI) gives a child a socket pair, not a
    pipe, for its output: the harness is the process that made it, through
    a wrapper too."""
    import socket

    ours, theirs = socket.socketpair()
    command = _helper(tmp_path, "python wrapper", f"{sys.executable} -c '{_PROBE}'")
    with ours:
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdout=theirs)
        theirs.close()
        out = b""
        while chunk := ours.recv(4096):
            out += chunk
        assert proc.wait(timeout=60) == 0
    assert out.decode().strip() == _harness_identity()


def test_a_hook_whose_output_no_ancestor_reads_has_no_known_harness(tmp_path: Path) -> None:
    """Output to a file: no process can be told for the harness (a wrapper
    would be taken for it), so none is; the session's ends decide."""
    out = tmp_path / "out.txt"
    command = _helper(tmp_path, "python wrapper", f"{sys.executable} -c '{_PROBE}'")
    with out.open("w") as f:
        subprocess.run(["/bin/sh", "-c", command], stdout=f, stderr=subprocess.STDOUT,
                       check=True, timeout=60)
    assert out.read_text().strip() == "None"


@pytest.mark.parametrize("shape", ["shebang script", "python wrapper"])
def test_calls_announced_through_a_helper_decide_nothing_while_it_lives(
        repo: Path, tmp_path: Path, shape: str) -> None:
    """The installed hook run through a helper process, which ends with each
    hook: a call still running at the next pre-call hook is no gap."""
    harness_identity = _harness_identity()
    command = _helper(tmp_path, shape, f"{Path(sys.executable).with_name('durability')} "
                                       "snapshot-hook")
    for call in ("toolu_A", "toolu_B"):
        subprocess.run(["/bin/sh", "-c", command], input=json.dumps(pre(
            repo, call, **bash("sleep 30"))), text=True, check=True, timeout=60,
            capture_output=True)  # a harness reads its hooks' output
    assert spool_gaps() == []
    recorded = [json.loads(line) for line in calls_file().read_text().splitlines()]
    assert [(r["call"], r["proc"]) for r in recorded] == [
        ("toolu_A", harness_identity), ("toolu_B", harness_identity)]


def test_the_stdlib_spool_folder_is_the_spool_folder(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    assert paths.spool_dir_str() == str(paths.spool_dir())
    monkeypatch.delenv("DURABILITY_SPOOL_DIR")
    assert paths.spool_dir_str() == str(paths.spool_dir())
    monkeypatch.delenv("DURABILITY_HOME")
    assert paths.spool_dir_str() == str(paths.spool_dir())
    monkeypatch.delenv("XDG_STATE_HOME")
    assert paths.spool_dir_str() == str(paths.spool_dir())


def _imports_of(payload: dict[str, Any]) -> list[str]:
    """The modules one run of the installed hook's entry loads (a fresh interpreter)."""
    script = f"PAYLOAD = {json.dumps(payload).encode()!r}\n" + _IMPORTS
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stderr.splitlines()[-1])
    assert report["code"] == 0
    new: list[str] = report["new"]
    return new


def test_the_pre_call_and_its_post_call_stay_within_the_import_budget(
        service_process: ServiceProcess, repo: Path) -> None:
    announced = _imports_of(pre(repo, "toolu_A", **bash("true")))
    finished = _imports_of(post(repo, "toolu_A", **bash("true")))
    for loaded in (announced, finished):
        assert not set(loaded) & set(HEAVY), sorted(set(loaded) & set(HEAVY))
    assert labels() == ["Bash true"]  # the post-call went through the service
    assert not calls_file().exists()


def test_an_announcement_is_never_lost_to_a_file_removed_meanwhile(tmp_path: Path) -> None:
    """Hooks settle and remove the calls file while others wait for its lock:
    a waiting one opens the path again, so the open call it records stays."""
    import threading

    path = str(tmp_path / "race.calls.ndjson")

    def finished_call(n: int) -> None:
        lane = calls.Lane(path, "session\x1f0\x1f1\x1f")
        try:
            lane.open(create=True)
            lane.add(k="pre", call=f"c{n}", run="r", tool="Read", summary="", ts=0, proc=None)
            lane.save()
        finally:
            lane.close()
        lane = calls.Lane(path, "session\x1f0\x1f1\x1f")
        try:
            if lane.open(create=False):
                lane.add(k="post", call=f"c{n}")
                lane.save()
        finally:
            lane.close()

    def open_call() -> None:
        lane = calls.Lane(path, "session\x1f0\x1f1\x1f")
        try:
            lane.open(create=True)
            lane.add(k="pre", call="killed", run="r", tool="Bash", summary="", ts=0, proc=None)
            lane.save()
        finally:
            lane.close()

    for _ in range(30):
        threads = [threading.Thread(target=finished_call, args=(n,)) for n in range(6)]
        threads.insert(3, threading.Thread(target=open_call))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        lane = calls.Lane(path, "session\x1f0\x1f1\x1f")
        try:
            assert lane.open(create=False)
            assert [n for (_, n), e in lane.calls.items() if not e["finished"]] == ["killed"]
            lane.add(k="post", call="killed")
            lane.save()
        finally:
            lane.close()
        assert not os.path.exists(path)


def test_the_calls_file_stays_small_while_one_call_stays_open(tmp_path: Path) -> None:
    """One call left open keeps the file; 3,000 calls finished after it do
    not make it grow (each hook reads all of it), and what it says of the
    open calls is the same: still open, decided or not, after a post-call."""
    path = str(tmp_path / "long.calls.ndjson")
    key = "session\x1f0\x1f1\x1f"

    def hook_of(*lines: dict[str, Any]) -> calls.Lane:
        lane = calls.Lane(path, key)
        try:
            assert lane.open(create=True)
            for line in lines:
                lane.add(**line)
            lane.save()
        finally:
            lane.close()
        return lane

    def announced(call: str) -> dict[str, Any]:
        return {"k": "pre", "call": call, "run": "r", "tid": call, "tool": "Bash",
                "summary": "make", "ts": 0, "proc": None, "worktree": "/w"}

    hook_of(announced("filed"), {"k": "gap", "call": "filed"})  # decided, not yet named
    hook_of(announced("open"))
    for n in range(3000):
        hook_of(announced(f"c{n}"))
        hook_of({"k": "post", "call": f"c{n}"})
        assert os.path.getsize(path) < 40_000, n
    lane = calls.Lane(path, key)
    try:
        assert lane.open(create=False)
        assert [e["call"] for e in lane.unfinished(None, "pre", "PreToolUse")] == ["open"]
        assert [e["call"] for e in lane.untold("/w")] == ["filed"]
        assert sorted(n for (_, n), e in lane.calls.items() if not e["finished"]) == \
            ["filed", "open"]
    finally:
        lane.close()


def test_a_pre_call_hook_files_no_gap_for_a_payload_too_big(repo: Path) -> None:
    """Its post-call hook meets the same payload (a Write of 16 MiB) and files
    the one bad-hook-input gap; the pre-call hook's would be a second."""
    head = json.dumps(pre(repo, "toolu_W", file_path=str(repo / "big.bin")))[:-1]
    pad = b"x" * (hook_entry.MAX_INPUT_BYTES + 10)
    assert hook_entry.main(io.BytesIO(head.encode() + b', "pad": "' + pad + b'"}')) == 0
    assert spool_gaps() == []
    post_head = json.dumps(post(repo, "toolu_W", file_path=str(repo / "big.bin")))[:-1]
    assert hook_entry.main(io.BytesIO(post_head.encode() + b', "pad": "' + pad + b'"}')) == 0
    assert [g["reason"] for g in spool_gaps()] == ["bad-hook-input"]


def test_a_pre_call_hook_out_of_time_files_no_timeout_gap(repo: Path) -> None:
    """The calls file held by another (a stuck hook): the pre-call hook's
    watchdog exits on time and files nothing (the post-call hook captures)."""
    import fcntl

    path = calls_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        done = subprocess.run(
            [sys.executable, "-m", "durability", "snapshot-hook"],
            input=json.dumps(pre(repo, "toolu_T", **bash("true"))), text=True,
            capture_output=True, timeout=60,
            env={**os.environ, "DURABILITY_HOOK_TIMEOUT_MS": "1000"})
    assert done.returncode == 0, done.stderr
    assert spool_gaps() == []
