"""End to end with the real Gemini CLI (the pinned 0.61.0 that
scripts/install-agent-clis.sh installs) driven through its adapter
(durability/agents/gemini.py), offline against the Gemini API stand-in
(tests/e2e/fake_gemini.py), in a real jj repository.

``~/.gemini/settings.json`` here plays the user's own (it selects API-key
auth, as a user's does) and must be byte for byte the same afterwards, with
no ``.gemini/`` written into the project: the adapter's hook lives in the
settings of a private ``GEMINI_CLI_HOME`` whose other entries link to the
user's real ``~/.gemini`` (so the session lands there).

A missing CLI fails the test (run `make .venv/agent-clis-ready`); it never skips.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from durability.agents.gemini import GeminiHarness
from durability.agents.protocol import AgentRequest
from tests.e2e import fake_gemini
from tests.e2e.agent_driver import GEMINI, Invocation, base_env, cli_path, run, toolkit_env
from tests.e2e.fake_gemini import FakeGemini, Script
from tests.helpers import cli_json, durability_exe, jj, make_jj_repo

pytestmark = pytest.mark.slow

USER_SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                 "ui": {"theme": "Default"}}


def _home(tmp_path: Path, fake: FakeGemini) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "user-home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=2))
    env = base_env(home, GEMINI_API_KEY=fake_gemini.API_KEY,
                   GOOGLE_GEMINI_BASE_URL=fake.base_url)
    return home, env


def _invoke(repo: Path, tmp_path: Path, env: dict[str, str], prompt: str,
            resume_id: str | None = None, tag: str = "a") -> Invocation:
    request = AgentRequest(prompt=prompt, worktree=repo, private_dir=tmp_path / f"private-{tag}",
                           hook_command=(durability_exe(), "snapshot-hook"),
                           hook_env=toolkit_env(), resume_id=resume_id,
                           model=fake_gemini.MODEL)
    return run(GeminiHarness(), request, cli_path(GEMINI), env)


def _plan(steps: list[tuple[str, dict[str, Any]]]) -> fake_gemini.Plan:
    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        return steps[len(results)] if len(results) < len(steps) else None
    return plan


def _chats(home: Path) -> list[Path]:
    return sorted((home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))


def _repo(tmp_path: Path) -> Path:
    repo = make_jj_repo(tmp_path / "repo").resolve()
    (repo / "README.md").write_text("hello\n")
    return repo


def test_every_gemini_tool_call_is_a_checkpoint_and_the_user_settings_are_untouched(
        tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    steps = [
        ("write_file", {"file_path": str(repo / "notes.md"), "content": "one\n"}),
        ("run_shell_command", {"command": "echo hello > made-by-gemini.txt",
                               "description": "write a file"}),
    ]
    with FakeGemini(Script(plan=_plan(steps))) as fake:
        home, env = _home(tmp_path, fake)
        settings_before = (home / ".gemini" / "settings.json").read_bytes()
        done = _invoke(repo, tmp_path, env, "Write the notes and a file.")
        seen = [f"{r.method} {r.path}" for r in fake.requests]

    final = done.final
    assert final.ok, (final, done.stderr[-2000:], seen)
    assert final.text == fake_gemini.FINAL_TEXT
    session = final.session_id
    assert session is not None
    calls = [e.tool for e in done.events if e.kind == "tool_call" and e.tool]
    assert [(c.id, c.name) for c in calls] == [
        ("write_file__gcall_e2e_0001", "write_file"),
        ("run_shell_command__gcall_e2e_0002", "run_shell_command")]
    assert [e.tool.id for e in done.events if e.kind == "tool_result" and e.tool] == \
        [c.id for c in calls]
    # Usage: only in the result, per invocation: three responses of 120
    # prompt tokens (30 cached) and 9 output tokens.
    [usage] = [e.usage for e in done.events if e.usage]
    assert (usage.model, usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (
        fake_gemini.MODEL, 270, 90, 27)

    rows = cli_json("snapshots", session)
    assert {r["harness"] for r in rows} == {"gemini"}
    labels = [r["label"] for r in rows]
    assert labels == ["write_file notes.md", "run_shell_command echo hello > made-by-gemini.txt"]
    # Gemini 0.61.0's hook payload carries no tool call id.
    assert [r["tool_use_id"] for r in rows] == [None, None]
    first, second = rows[0]["commit_id"], rows[1]["commit_id"]
    assert jj(repo, "file", "show", "-r", first, "notes.md").stdout == "one\n"
    assert "made-by-gemini.txt" not in jj(repo, "file", "list", "-r", first).stdout
    assert jj(repo, "file", "show", "-r", second, "made-by-gemini.txt").stdout == "hello\n"
    assert cli_json("gaps", session) == []

    assert (home / ".gemini" / "settings.json").read_bytes() == settings_before
    assert not (repo / ".gemini").exists()
    # The hook came from the private home's settings: the user's own plus ours.
    private = tmp_path / "private-a" / "gemini-home" / ".gemini"
    merged = json.loads((private / "settings.json").read_text())
    assert set(merged["hooks"]) == {"BeforeTool", "AfterTool"}
    assert merged["ui"] == USER_SETTINGS["ui"] and merged["security"] == USER_SETTINGS["security"]
    assert (private / "tmp").resolve() == (home / ".gemini" / "tmp").resolve()
    [chat] = _chats(home)
    assert session[:8] in chat.name and "write_file__gcall_e2e_0001" in chat.read_text()


def test_a_resumed_gemini_session_carries_the_results_and_survives_the_next_start(
        tmp_path: Path) -> None:
    """Gemini 0.61.0 deletes a session resumed in a later minute than its
    file's name at its next start; the adapter's settings turn that cleanup
    off.  The minute is made earlier by renaming the file, as a session
    started an hour ago would be named."""
    repo = _repo(tmp_path)
    with FakeGemini(Script(plan=_plan([("run_shell_command", {"command": "echo one > one.txt"})]))
                    ) as fake:
        home, env = _home(tmp_path, fake)
        first = _invoke(repo, tmp_path, env, "Write one.")
        assert first.final.ok, first.stderr[-2000:]
        session = first.final.session_id
        assert session is not None
        [chat] = _chats(home)
        chat.rename(chat.with_name(f"session-2026-01-01T00-00-{session[:8]}.jsonl"))
        fake.script.plan = _plan([("run_shell_command", {"command": "echo one > one.txt"}),
                                  ("run_shell_command", {"command": "echo two > two.txt"})])
        before = len(fake.streams())
        second = _invoke(repo, tmp_path, env, "Go on.", resume_id=session, tag="b")
        assert second.final.ok, second.stderr[-2000:]
        history = fake.streams()[before].body
        # A new, unrelated session starts: Gemini's startup cleanup would
        # delete the resumed session's files here.
        fake.script.plan = _plan([])
        third = _invoke(repo, tmp_path, env, "Something else.", tag="c")
        assert third.final.ok and third.final.session_id != session
        fake.script.plan = _plan([])
        fourth = _invoke(repo, tmp_path, env, "Go on again.", resume_id=session, tag="d")

    assert second.final.session_id == session
    calls = fake_gemini.function_calls(history)
    assert [c["name"] for c in calls] == ["run_shell_command"]
    assert {r["id"] for r in fake_gemini.function_responses(history)} == {"gcall_e2e_0001"}
    assert fake_gemini.user_texts(history)[-1] == "Go on."
    assert (repo / "two.txt").read_text() == "two\n"
    assert any(session[:8] in p.name for p in _chats(home))
    assert fourth.final.ok and fourth.final.session_id == session, fourth.stderr[-1500:]
    labels = [r["label"] for r in cli_json("snapshots", session)]
    assert labels == ["run_shell_command echo one > one.txt",
                      "run_shell_command echo two > two.txt"]


def test_resuming_an_unknown_gemini_session_is_a_lost_session(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    with FakeGemini() as fake:
        _, env = _home(tmp_path, fake)
        done = _invoke(repo, tmp_path, env, "Go on.",
                       resume_id="0000aaaa-0000-4000-8000-000000000000")
        assert fake.streams() == []
    assert done.returncode == 42
    assert done.final.session_lost and not done.final.ok


def test_a_gemini_daily_quota_is_a_quota_reset_at_pacific_midnight(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    daily = fake_gemini.resource_exhausted(
        "You exceeded your current quota, please check your plan and billing details.",
        retry_delay_s=3600, quota_id="GenerateRequestsPerDayPerProjectPerModel-FreeTier")
    with FakeGemini(Script(failures=[daily])) as fake:
        _, env = _home(tmp_path, fake)
        done = _invoke(repo, tmp_path, env, "Write one.")
        assert len(fake.streams()) == 1  # a per-day quota is not retried
    final = done.final
    assert done.returncode != 0 and not final.ok and not final.session_lost
    assert final.quota is not None, (done.lines, done.stderr[-1000:])
    assert "daily quota" in final.quota.message
    assert final.quota.reset_at_ms is not None
    assert os.environ.get("TZ") is None or final.quota.reset_at_ms > 0


def test_a_429_gemini_retries_is_silent_in_the_stream(tmp_path: Path) -> None:
    """One RESOURCE_EXHAUSTED with a 1 s retry delay: Gemini waits and
    retries by itself; the stream says nothing of it (stderr does), so the
    attempt simply succeeds."""
    repo = _repo(tmp_path)
    with FakeGemini(Script(failures=[fake_gemini.resource_exhausted(retry_delay_s=1)])) as fake:
        _, env = _home(tmp_path, fake)
        done = _invoke(repo, tmp_path, env, "Write a file.")
        assert len(fake.streams()) == 3  # the 429, then the call and the answer
    assert done.final.ok and done.final.quota is None, done.stderr[-1000:]
    assert not [e for e in done.events if e.kind in ("retry", "quota", "error")]
    assert "Attempt 1 failed: Resource has been exhausted" in done.stderr
    assert (repo / "made-by-gemini.txt").read_text() == "hello\n"
