"""The Codex adapter on stream lines the real Codex 0.171.0 printed against
the loopback stand-in (fixtures/codex-streams.json, recorded by
record_streams.py), and on what it writes for one invocation."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from durability.agents import codex
from durability.agents.codex import CodexHarness, classify_quota, hooks_override, toml_inline
from durability.agents.protocol import AgentRequest, Event
from durability.agents.registry import harness
from durability.ground.errors import InvalidInput

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "codex-streams.json").read_text())


def _scenario(name: str) -> dict[str, Any]:
    found: dict[str, Any] = FIXTURE["scenarios"][name]
    return found


def _parse(adapter: CodexHarness, name: str) -> list[Event]:
    return [e for line in _scenario(name)["lines"] for e in adapter.parse(line)]


def _request(tmp_path: Path, **kw: Any) -> AgentRequest:
    return AgentRequest(prompt="Do it.", worktree=tmp_path / "wt", private_dir=tmp_path / "p",
                        hook_command=("/opt/dur bin/durability", "snapshot-hook"), **kw)


def test_the_fixture_is_of_the_checked_version() -> None:
    assert FIXTURE["version"] == f"codex-cli {codex.CHECKED_VERSION}"


def test_a_session_of_three_tool_calls() -> None:
    adapter = CodexHarness()
    events = _parse(adapter, "tools")
    assert [e.kind for e in events] == [
        "session", "error", "error",
        "tool_call", "tool_result", "tool_call", "tool_result", "tool_call", "tool_result",
        "message", "usage", "result"]
    thread = json.loads(_scenario("tools")["lines"][0])["thread_id"]
    assert events[0].session_id == thread
    tools = [(e.kind, e.tool.id, e.tool.name, e.tool.completed) for e in events if e.tool]
    assert tools == [
        ("tool_call", "item_2", "apply_patch", False),
        ("tool_result", "item_2", "apply_patch", True),
        ("tool_call", "item_3", "Bash", False), ("tool_result", "item_3", "Bash", True),
        ("tool_call", "item_4", "Bash", False), ("tool_result", "item_4", "Bash", True)]
    [usage] = [e.usage for e in events if e.usage]
    # 4 responses of 100 input tokens (20 cached) and 7 output.
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (320, 80, 28)
    final = adapter.finish(events, 0, _scenario("tools")["stderr_head"])
    assert final.ok and final.session_id == thread and not final.session_lost
    assert final.text == "Done: I wrote made-by-codex.txt." and final.quota is None
    assert final.num_turns == 1 and final.error is None
    assert events[-1].text == final.text


def test_a_resumed_thread_counts_only_the_tokens_past_the_rollouts_total() -> None:
    """turn.completed reports the thread's running total (600 input after
    the resume); the rollout held 400 before it: the invocation spent 200."""
    adapter = CodexHarness()
    before = json.loads(_scenario("resumed")["rollout_token_counts"][3])
    adapter._total = before["payload"]["info"]["total_token_usage"]
    assert adapter._total["input_tokens"] == 400
    [usage] = [e.usage for e in _parse(adapter, "resumed") if e.usage]
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (160, 40, 14)


def test_rollout_total_reads_the_last_token_count(tmp_path: Path) -> None:
    thread = json.loads(_scenario("resumed")["lines"][0])["thread_id"]
    day = tmp_path / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    counts = _scenario("resumed")["rollout_token_counts"]
    (day / f"rollout-2026-12-02T02-25-30-{thread}.jsonl").write_text(
        '{"type":"session_meta"}\n' + "\n".join(counts[:4]) + "\n")
    assert codex.rollout_total(tmp_path, thread)["input_tokens"] == 400
    assert codex.rollout_total(tmp_path, "01a2347b-0000-7000-8000-000000000000") == {}
    assert codex.rollout_total(tmp_path, "../../etc") == {}


def test_prepare_of_a_resume_takes_the_baseline_from_the_user_codex_home(tmp_path: Path) -> None:
    thread = json.loads(_scenario("resumed")["lines"][0])["thread_id"]
    home = tmp_path / "codex-home"
    day = home / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    (day / f"rollout-x-{thread}.jsonl").write_text(
        "\n".join(_scenario("resumed")["rollout_token_counts"][:4]) + "\n")
    adapter = CodexHarness()
    request = _request(tmp_path, resume_id=thread)
    adapter.env(request, {"CODEX_HOME": str(home), "PATH": "/usr/bin"})
    adapter.prepare(request)
    [usage] = [e.usage for e in _parse(adapter, "resumed") if e.usage]
    assert usage.input_tokens == 160


def test_an_unknown_thread_is_a_lost_session() -> None:
    scenario = _scenario("lost")
    adapter = CodexHarness()
    events = _parse(adapter, "lost")
    final = adapter.finish(events, scenario["returncode"], scenario["stderr_head"])
    assert scenario["returncode"] == 1 and events == []
    assert final.session_lost and not final.ok and final.session_id is None
    assert final.error is not None and "no rollout found for thread id" in final.error


def test_a_usage_limit_is_a_quota_with_the_reset_it_names() -> None:
    scenario = _scenario("usage_limit")
    adapter = CodexHarness()
    events = _parse(adapter, "usage_limit")
    quotas = [e for e in events if e.kind == "quota"]
    assert len(quotas) == 2  # the error line and turn.failed
    final = adapter.finish(events, scenario["returncode"], scenario["stderr_head"])
    assert not final.ok and final.quota is not None and not final.session_lost
    assert final.quota.message.startswith("You\u2019ve hit your usage limit")
    # Re-read at the moment it was recorded: the named minute is the reset.
    again = classify_quota(final.quota.message, now_s=scenario["recorded_at"])
    assert again is not None and again.reset_at_ms is not None
    assert abs(again.reset_at_ms / 1000 - scenario["resets_at"]) < 60


def test_a_rate_limit_codex_gave_up_on_is_a_quota_without_reset() -> None:
    scenario = _scenario("rate_limited")
    adapter = CodexHarness()
    final = adapter.finish(_parse(adapter, "rate_limited"), scenario["returncode"],
                           scenario["stderr_head"])
    assert final.quota is not None and final.quota.reset_at_ms is None
    assert "429" in final.quota.message and not final.ok


@pytest.mark.parametrize(("message", "quota"), [
    ("You've hit your usage limit. Try again at Dec 9 3:03 AM.", True),
    ("exceeded retry limit, last status: 429 Too Many Requests", True),
    ("We\u2019re currently experiencing high demand, which may cause temporary errors.", False),
    ("stream disconnected before completion", False),
])
def test_quota_classification(message: str, quota: bool) -> None:
    assert (classify_quota(message) is not None) is quota


def test_the_warning_items_are_not_a_failure() -> None:
    adapter = CodexHarness()
    lines = _scenario("tools")["lines"]
    events = [e for line in lines for e in adapter.parse(line)]
    assert [e.text for e in events if e.kind == "error"] == [
        "`--dangerously-bypass-hook-trust` is enabled. Enabled hooks may run without review "
        "for this invocation."] * 2
    assert adapter.finish(events, 0, "").ok


def test_a_reconnecting_error_is_a_retry() -> None:
    [event] = CodexHarness().parse('{"type":"error","message":"Reconnecting... 2/5"}')
    assert event.kind == "retry"


def test_junk_lines_carry_nothing() -> None:
    adapter = CodexHarness()
    for line in ("", "WARNING: something", '{"type":"turn.started"}', "[1,2]", '{"type": tru'):
        assert adapter.parse(line) == []


def test_argv_of_a_new_session_and_of_a_resume(tmp_path: Path) -> None:
    adapter = CodexHarness()
    schema = {"type": "object"}
    new = adapter.argv(_request(tmp_path, model="gpt-5.5", output_schema=schema), "/x/codex")
    assert new[:3] == ["/x/codex", "exec", "--json"] and new[-1] == "-"
    assert new[new.index("--cd") + 1] == str(tmp_path / "wt")
    assert new[new.index("--model") + 1] == "gpt-5.5"
    assert new[new.index("--output-schema") + 1] == str(tmp_path / "p" / "codex-output-schema.json")
    assert "--dangerously-bypass-hook-trust" in new
    resumed = CodexHarness().argv(_request(tmp_path, resume_id="T-1", output_schema=schema), "c")
    assert resumed[-3:] == ["resume", "T-1", "-"]
    assert "--output-schema" not in resumed and "--sandbox" not in resumed
    assert CodexHarness().stdin(_request(tmp_path)) == b"Do it."


def test_the_hooks_override_is_the_toml_codex_reads(tmp_path: Path) -> None:
    command = "'/opt/dur bin/durability' snapshot-hook"
    key, _, value = hooks_override(command).partition("=")
    parsed = tomllib.loads(f"{key} = {value}")
    assert set(parsed["hooks"]) == {"PreToolUse", "PostToolUse", "Stop"}
    assert parsed["hooks"]["PostToolUse"] == [
        {"hooks": [{"type": "command", "command": command, "timeout": 15}]}]
    argv = CodexHarness().argv(_request(tmp_path), "codex")
    assert f"hooks={toml_inline(json.loads(json.dumps(parsed['hooks'])))}" in argv


def test_toml_inline_escapes_what_toml_needs() -> None:
    value = {"a b": ['q"uote\\back\nline', 1, True], "ok": "é"}
    assert tomllib.loads(f"x = {toml_inline(value)}")["x"] == value


def test_prepare_writes_the_schema_and_nothing_else(tmp_path: Path) -> None:
    adapter = CodexHarness()
    request = _request(tmp_path, output_schema={"type": "object"})
    adapter.env(request, {"HOME": str(tmp_path / "user-home")})
    adapter.prepare(request)
    assert [p.name for p in (tmp_path / "p").iterdir()] == ["codex-output-schema.json"]
    assert not (tmp_path / "user-home").exists()
    done = adapter.finish([Event("session", session_id="s"), Event("message", text='{"a": 1}')],
                          0, "")
    assert done.structured == {"a": 1}


def test_env_passes_the_hook_env_through(tmp_path: Path) -> None:
    request = AgentRequest(prompt="p", worktree=tmp_path, private_dir=tmp_path,
                           hook_env={"DURABILITY_RUN_ID": "r1"})
    assert CodexHarness().env(request, {"PATH": "/bin"}) == {
        "PATH": "/bin", "DURABILITY_RUN_ID": "r1"}


def test_the_registry_makes_a_fresh_adapter_each_time() -> None:
    first, second = harness("codex"), harness("codex")
    assert isinstance(first, CodexHarness) and first is not second
    assert harness("gemini").name == "gemini"
    with pytest.raises(InvalidInput, match="unknown harness"):
        harness("nope")
