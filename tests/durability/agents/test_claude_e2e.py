"""End to end: the real pinned Claude Code run through the adapter's own argv,
env, stdin and private settings (``durability.agents.claude.ClaudeCode``),
offline against the loopback stand-in, in a real jj repository.

Our hook reaches the agent only through the private ``--settings`` file:
every tool call becomes a checkpoint row carrying the session id and its
tool_use_id, the user's own ``~/.claude/settings.json`` (HOME is the test's)
is byte for byte what it was, and the user's own hook there still runs
beside ours (``--setting-sources user,project,local``).  ``--resume``
continues the session (the stand-in sees the earlier tool results and no
completed call runs again); resuming an unknown id is ``session_lost``.

A missing CLI fails the test (run `make setup`); it never skips.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from durability.agents.claude import ClaudeCode
from durability.agents.protocol import AgentRequest, Event, Final
from durability.install.command import launcher_source
from tests.e2e.fake_anthropic import FakeAnthropic, Plan, Script, results_in
from tests.e2e.test_claude_code import CLAUDE_TIMEOUT_S, claude_env, claude_exe
from tests.helpers import cli_json, durability_exe, git, jj, make_jj_repo

pytestmark = pytest.mark.slow

SESSION = "3f2a9c4e-8d1b-4e6f-a2c3-5b7d9e1f0a24"
UNKNOWN = "00000000-0000-4000-8000-0000000000aa"


def bash(command: str) -> tuple[str, dict[str, Any]]:
    return "Bash", {"command": command, "description": "step"}


def steps(*calls: tuple[str, dict[str, Any]], after: int = 0) -> Plan:
    """The calls in order, after ``after`` results already in the history."""
    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        index = len(results) - after
        return calls[index] if 0 <= index < len(calls) else None
    return plan


def run(adapter: ClaudeCode, req: AgentRequest, fake: FakeAnthropic) -> tuple[list[Event], Final]:
    """One invocation as the engine makes it: prepare, argv, env, stdin;
    every stdout line through parse; the verdict from finish."""
    adapter.prepare(req)
    # As if started from inside another Claude Code: the adapter must drop these.
    base = {k: v for k, v in claude_env(fake.base_url).items() if k != "IS_SANDBOX"}
    base |= {"CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": "cli"}
    done = subprocess.run(adapter.argv(req, claude_exe()), cwd=req.worktree,
                          env=adapter.env(req, base), input=adapter.stdin(req),
                          capture_output=True, timeout=CLAUDE_TIMEOUT_S)
    events = [e for line in done.stdout.decode().splitlines() for e in adapter.parse(line)]
    return events, adapter.finish(events, done.returncode, done.stderr.decode()[:4000])


def request(repo: Path, private: Path, **kw: Any) -> AgentRequest:
    hook = ("/bin/sh", str(launcher_source()), durability_exe())
    return AgentRequest(prompt=kw.pop("prompt", "Make a.txt, b.txt and log.txt."),
                        worktree=repo, private_dir=private, hook_command=hook, **kw)


def jj_repo(path: Path) -> Path:
    repo = make_jj_repo(path).resolve()
    (repo / "README.md").write_text("hello\n")
    jj(repo, "commit", "-m", "init")
    return repo


def user_settings(home: Path, log: Path) -> tuple[Path, bytes]:
    """The user's own settings, with a hook of theirs that logs each call."""
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"echo user-hook >> {log}"}]}]}}
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path, path.read_bytes()


def checkpoints(session_id: str) -> dict[str, dict[str, Any]]:
    rows: list[dict[str, Any]] = cli_json("snapshots", session_id)
    assert {r["harness"] for r in rows} == {"claude"}, rows
    return {r["tool_use_id"]: r for r in rows if r.get("tool_use_id")}


def test_every_tool_call_is_a_checkpoint_through_the_private_settings_only(
        tmp_path: Path) -> None:
    home = Path(claude_env("")["HOME"])
    settings, before = user_settings(home, tmp_path / "user-hook.log")
    repo = jj_repo(tmp_path / "repo")
    calls = (("Write", {"file_path": str(repo / "a.txt"), "content": "one\n"}),
             bash("echo two > b.txt"), bash("echo ran >> log.txt"))
    adapter = ClaudeCode()
    req = request(repo, tmp_path / "private", session_id=SESSION)
    with FakeAnthropic(Script(plan=steps(*calls), final_text="All three.")) as fake:
        events, final = run(adapter, req, fake)
    assert final.ok, (final, [e.raw for e in events][-3:])
    assert (final.session_id, final.text) == (SESSION, "All three.")
    called = [e.tool.id for e in events if e.kind == "tool_call" and e.tool]
    completed = [e.tool.id for e in events if e.kind == "tool_result" and e.tool]
    assert len(called) == 3 and completed == called
    # Each call is a checkpoint row of this session, carrying its tool_use_id,
    # whose tree holds what the call wrote.
    rows = checkpoints(SESSION)
    assert set(called) <= set(rows), (called, rows)
    bash_b = rows[called[1]]
    assert git(repo, "show", f"{bash_b['commit_id']}:b.txt").stdout == "two\n"
    assert cli_json("gaps", SESSION) == []
    # The user's files: untouched, and their hook ran beside ours.
    assert settings.read_bytes() == before
    assert sorted(p.name for p in (home / ".claude").glob("settings*.json")) == ["settings.json"]
    assert not (repo / ".claude" / "settings.json").exists()
    assert not (repo / ".claude" / "settings.local.json").exists()
    assert (tmp_path / "user-hook.log").read_text().splitlines() == ["user-hook"] * 3
    assert (repo / "log.txt").read_text() == "ran\n"


def test_resume_continues_the_session_without_running_a_call_again(tmp_path: Path) -> None:
    repo = jj_repo(tmp_path / "repo")
    first_calls = (bash("echo first >> log.txt"),)
    with FakeAnthropic(Script(plan=steps(*first_calls), final_text="Paused.")) as fake:
        events, final = run(ClaudeCode(), request(repo, tmp_path / "p1", session_id=SESSION),
                            fake)
    assert final.ok and final.session_id == SESSION, final
    first_id = next(e.tool.id for e in events if e.kind == "tool_result" and e.tool)
    # The transcript Claude Code keeps says which calls the session completed.
    env = claude_env("")
    assert ClaudeCode().completed_calls(SESSION, repo, env) == {first_id}
    # The resumed conversation: one more call after the one already in its history.
    resumed = Script(plan=steps(bash("echo second >> log.txt"), after=1), final_text="Done.")
    with FakeAnthropic(resumed) as fake:
        events, final = run(ClaudeCode(), request(repo, tmp_path / "p2", resume_id=SESSION,
                                                  prompt="Continue where you left off."), fake)
        main = fake.main_requests()
    assert final.ok and final.session_id == SESSION and final.text == "Done.", final
    # The stand-in's first request of the resumed process already carries the
    # earlier call's result, and the continuation prompt.
    history = results_in(main[0].body)
    assert [r["tool_use_id"] for r in history] == [first_id]
    last_user = [m for m in main[0].body["messages"] if m["role"] == "user"][-1]
    assert "Continue where you left off." in json.dumps(last_user)
    # No completed call ran twice; the new one's checkpoint is in the same session.
    assert (repo / "log.txt").read_text() == "first\nsecond\n"
    second_id = next(e.tool.id for e in events if e.kind == "tool_result" and e.tool)
    assert {first_id, second_id} <= set(checkpoints(SESSION))


def test_resuming_an_unknown_session_is_session_lost(tmp_path: Path) -> None:
    repo = jj_repo(tmp_path / "repo")
    with FakeAnthropic() as fake:
        _, final = run(ClaudeCode(), request(repo, tmp_path / "p", resume_id=UNKNOWN,
                                             prompt="Continue."), fake)
        assert fake.main_requests() == []
    assert (final.ok, final.session_lost) == (False, True), final
    assert not (repo / "made-by-claude.txt").exists()
    assert ClaudeCode().completed_calls(UNKNOWN, repo, claude_env("")) is None


def test_an_identical_hook_command_in_the_users_settings_runs_once(tmp_path: Path) -> None:
    # What the adapter's docstring promises of a user who also installed our
    # hook: Claude Code runs one command once per event, whichever file holds it.
    log = tmp_path / "hook.log"
    script = tmp_path / "hook.sh"
    script.write_text(f'#!/bin/sh\ncat > /dev/null\necho "$$" >> {log}\n')
    command = ("/bin/sh", str(script))
    home = Path(claude_env("")["HOME"])
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PostToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": "/bin/sh " + str(script)}]}]}}))
    repo = jj_repo(tmp_path / "repo")
    req = AgentRequest(prompt="Write hello.", worktree=repo, private_dir=tmp_path / "p",
                       hook_command=command)
    with FakeAnthropic() as fake:
        _, final = run(ClaudeCode(), req, fake)
    assert final.ok, final
    # One Bash call: PreToolUse and PostToolUse ran it once each, not PostToolUse twice.
    assert len(log.read_text().splitlines()) == 2
