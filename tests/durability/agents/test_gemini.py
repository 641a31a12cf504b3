"""The Gemini adapter on stream lines the real Gemini CLI 0.61.0 printed
against the loopback stand-in (fixtures/gemini-streams.json, recorded by
record_streams.py), and on the private home it builds."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from durability.agents import gemini
from durability.agents.gemini import GeminiHarness, classify_quota, private_home, settings_with_hook
from durability.agents.protocol import AgentRequest, Event

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "gemini-streams.json").read_text())


def _scenario(name: str) -> dict[str, Any]:
    found: dict[str, Any] = FIXTURE["scenarios"][name]
    return found


def _parse(adapter: GeminiHarness, name: str) -> list[Event]:
    return [e for line in _scenario(name)["lines"] for e in adapter.parse(line)]


def test_the_fixture_is_of_the_checked_version() -> None:
    assert FIXTURE["version"] == gemini.CHECKED_VERSION


def test_a_session_of_two_tool_calls() -> None:
    adapter = GeminiHarness()
    events = _parse(adapter, "tools")
    assert [e.kind for e in events] == [
        "session", "tool_call", "tool_result", "tool_call", "tool_result", "message",
        "usage", "result"]
    assert events[0].session_id == json.loads(_scenario("tools")["lines"][0])["session_id"]
    assert [(e.tool.id, e.tool.name, e.tool.completed) for e in events if e.tool] == [
        ("write_file__gcall_e2e_0001", "write_file", False),
        ("write_file__gcall_e2e_0001", "write_file", True),
        ("run_shell_command__gcall_e2e_0002", "run_shell_command", False),
        ("run_shell_command__gcall_e2e_0002", "run_shell_command", True)]
    [usage] = [e.usage for e in events if e.usage]
    # 3 responses of 120 prompt tokens (30 cached) and 9 output: input is the uncached part.
    assert (usage.model, usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (
        "gemini-2.5-flash", 270, 90, 27)
    final = adapter.finish(events, 0, _scenario("tools")["stderr_head"])
    assert final.ok and final.text == "Done: I wrote made-by-gemini.txt."
    assert final.session_id == events[0].session_id and final.quota is None
    assert final.num_turns is None


def test_the_answer_is_the_text_after_the_last_tool_result() -> None:
    adapter = GeminiHarness()
    lines = [
        '{"type":"init","session_id":"s1","model":"m"}',
        '{"type":"message","role":"assistant","content":"Let me look.","delta":true}',
        '{"type":"tool_use","tool_name":"read_file","tool_id":"read_file__a","parameters":{}}',
        '{"type":"tool_result","tool_id":"read_file__a","status":"success","output":"x"}',
        '{"type":"message","role":"assistant","content":"All ","delta":true}',
        '{"type":"message","role":"assistant","content":"done.","delta":true}',
        '{"type":"result","status":"success","stats":{"input_tokens":0,"output_tokens":0}}',
    ]
    events = [e for line in lines for e in adapter.parse(line)]
    assert adapter.finish(events, 0, "").text == "All done."


def test_an_unknown_session_is_a_lost_session() -> None:
    scenario = _scenario("lost")
    adapter = GeminiHarness()
    final = adapter.finish(_parse(adapter, "lost"), scenario["returncode"],
                           scenario["stderr_head"])
    assert scenario["returncode"] == gemini.EXIT_INPUT_ERROR
    assert final.session_lost and not final.ok
    assert final.error is not None and "Invalid session identifier" in final.error


def test_a_daily_quota_resets_at_the_next_pacific_midnight() -> None:
    scenario = _scenario("daily_quota")
    adapter = GeminiHarness()
    events = _parse(adapter, "daily_quota")
    final = adapter.finish(events, scenario["returncode"], scenario["stderr_head"])
    assert scenario["returncode"] == 173
    assert not final.ok and not final.session_lost and final.quota is not None
    assert "exhausted your daily quota" in final.quota.message
    again = classify_quota(final.quota.message, now_s=scenario["recorded_at"])
    assert again is not None and again.reset_at_ms is not None
    reset = datetime.fromtimestamp(again.reset_at_ms / 1000, ZoneInfo("America/Los_Angeles"))
    recorded = datetime.fromtimestamp(scenario["recorded_at"], ZoneInfo("America/Los_Angeles"))
    assert (reset.hour, reset.minute) == (0, 0)
    assert 0 < (reset - recorded).total_seconds() <= 24 * 3600


@pytest.mark.parametrize(("message", "quota", "reset"), [
    ("[API Error: You have exhausted your daily quota on this model.]", True, True),
    ("Resource has been exhausted (e.g. check quota). RESOURCE_EXHAUSTED", True, False),
    ("[API Error: fetch failed]", False, False),
])
def test_quota_classification(message: str, quota: bool, reset: bool) -> None:
    found = classify_quota(message)
    assert (found is not None) is quota
    assert found is None or (found.reset_at_ms is not None) is reset


def test_argv_takes_the_prompt_on_stdin(tmp_path: Path) -> None:
    request = AgentRequest(prompt="x" * 200_000, worktree=tmp_path, private_dir=tmp_path,
                           model="gemini-2.5-flash", resume_id="abc")
    argv = GeminiHarness().argv(request, "/bin/gemini")
    assert argv[:3] == ["/bin/gemini", "-p", ""] and "x" * 10 not in " ".join(argv)
    assert argv[argv.index("--resume") + 1] == "abc"
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert "--skip-trust" in argv and argv[argv.index("--approval-mode") + 1] == "yolo"
    assert GeminiHarness().stdin(request) == request.prompt.encode()


def test_settings_keep_the_users_and_add_our_hooks() -> None:
    theirs: dict[str, Any] = {"ui": {"theme": "Dark"},
                              "hooks": {"AfterTool": [{"matcher": "x", "hooks": []}]},
                              "general": {"sessionRetention": {"maxAge": "7d"}}}
    merged = settings_with_hook("dur snapshot-hook", base=theirs, max_turns=7)
    assert merged["ui"] == {"theme": "Dark"}
    assert merged["hooks"]["AfterTool"][0] == {"matcher": "x", "hooks": []}
    ours = {"matcher": ".*", "hooks": [{"type": "command", "name": "durability",
                                        "command": "dur snapshot-hook", "timeout": 15000}]}
    assert merged["hooks"]["AfterTool"][1] == ours and merged["hooks"]["BeforeTool"] == [ours]
    assert merged["general"]["sessionRetention"] == {"maxAge": "7d", "enabled": False}
    assert merged["model"]["maxSessionTurns"] == 7
    assert theirs["hooks"]["AfterTool"] == [{"matcher": "x", "hooks": []}]  # not changed


def test_the_private_home_links_the_users_gemini_and_writes_nothing_there(tmp_path: Path) -> None:
    real = tmp_path / "user" / ".gemini"
    (real / "extensions").mkdir(parents=True)
    (real / "settings.json").write_text('{"ui": {"theme": "Dark"}}')
    (real / "oauth_creds.json").write_text("{}")
    (real / "projects.json").write_text('{"projects": {}}')
    before = {p: p.read_bytes() for p in real.rglob("*") if p.is_file()}
    adapter = GeminiHarness()
    request = AgentRequest(prompt="p", worktree=tmp_path / "wt", private_dir=tmp_path / "priv",
                           hook_command=("/opt/d", "snapshot-hook"),
                           hook_env={"DURABILITY_RUN_ID": "r"})
    env = adapter.env(request, {"HOME": str(tmp_path / "user"), "PATH": "/bin"})
    assert env[gemini.HOME_ENV] == str(tmp_path / "priv" / "gemini-home")
    assert env["DURABILITY_RUN_ID"] == "r" and env["HOME"] == str(tmp_path / "user")
    adapter.prepare(request)
    mine = tmp_path / "priv" / "gemini-home" / ".gemini"
    assert {p.name for p in mine.iterdir()} == {
        "settings.json", "extensions", "oauth_creds.json", "projects.json", "tmp", "history"}
    for name in ("extensions", "oauth_creds.json", "tmp", "history"):
        assert (mine / name).is_symlink() and (mine / name).resolve() == (real / name).resolve()
    assert not (mine / "projects.json").is_symlink()
    settings = json.loads((mine / "settings.json").read_text())
    assert settings["ui"] == {"theme": "Dark"} and "AfterTool" in settings["hooks"]
    assert {p: p.read_bytes() for p in real.rglob("*") if p.is_file()} == before
    # Again (a retry with the same private folder): rebuilt, not stacked.
    adapter.prepare(request)
    assert len(json.loads((mine / "settings.json").read_text())["hooks"]["AfterTool"]) == 1


def test_private_home_of_a_user_without_gemini_folder(tmp_path: Path) -> None:
    real = tmp_path / "nobody" / ".gemini"
    real.mkdir(parents=True)
    private_home(tmp_path / "h", real, {"a": 1})
    assert json.loads((tmp_path / "h" / ".gemini" / "settings.json").read_text()) == {"a": 1}
    assert (real / "tmp").is_dir() and (real / "history").is_dir()


def test_junk_and_user_messages_carry_nothing() -> None:
    adapter = GeminiHarness()
    for line in ("", "Warning: Basic terminal", '{"type":"message","role":"user","content":"x"}',
                 '{"type":"tool_use"}', "{bad"):
        assert adapter.parse(line) == []
