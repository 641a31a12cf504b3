"""The Claude Code adapter: argv, env, private settings, and parse/finish on
streams the real pinned CLI printed (fixtures/claude/, recorded by
record_claude.py; the subscriber-only shapes are written by hand and say so)."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from durability.agents.claude import ARG_LIMIT, ClaudeCode
from durability.agents.protocol import AgentRequest, Event, Final, Usage
from durability.agents.registry import harness
from durability.ground.errors import InvalidInput

FIXTURES = Path(__file__).parent / "fixtures" / "claude"
SESSION = "6b0e8c1e-6a43-4c8e-9d0e-6f3a2b1c0d01"
# 2026-12-02 03:00 UTC, 04:00 in Berlin: before the fixtures' 6:20am and 9am resets.
NOW_MS = int(datetime(2026, 12, 2, 3, 0, tzinfo=UTC).timestamp() * 1000)


def replay(name: str, adapter: ClaudeCode | None = None) -> tuple[list[Event], Final]:
    adapter = adapter or ClaudeCode(now_ms=lambda: NOW_MS)
    meta_path = FIXTURES / f"{name}.meta.json"
    meta: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.exists() else {
        "returncode": 1, "stderr_head": ""}
    events = [e for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()
              for e in adapter.parse(line)]
    return events, adapter.finish(events, meta["returncode"], meta["stderr_head"])


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def total(events: list[Event]) -> tuple[int, int, int, int]:
    usages = [e.usage for e in events if e.usage is not None]
    return (sum(u.input_tokens for u in usages), sum(u.output_tokens for u in usages),
            sum(u.cache_read_tokens for u in usages), sum(u.cache_write_tokens for u in usages))


def request(tmp_path: Path, **kw: Any) -> AgentRequest:
    return AgentRequest(prompt=kw.pop("prompt", "do it"), worktree=tmp_path / "wt",
                        private_dir=tmp_path / "private", **kw)


# -- parse and finish on recorded streams --------------------------------


def test_two_calls_give_session_calls_results_and_the_result() -> None:
    events, final = replay("two_calls")
    calls = [(e.tool.id, e.tool.name, e.tool.completed) for e in events if e.tool]
    assert calls == [("toolu_e2e_0002", "Write", False), ("toolu_e2e_0002", "Write", True),
                     ("toolu_e2e_0003", "Bash", False), ("toolu_e2e_0003", "Bash", True)]
    assert kinds(events)[0] == "session" and events[0].session_id == SESSION
    assert kinds(events)[-1] == "result"
    assert [e.text for e in events if e.kind == "message"] == ["Both written."]
    assert final == Final(True, SESSION, text="Both written.", num_turns=3,
                          reported_cost_usd=pytest.approx(0.022725))


def test_usage_is_counted_per_message_before_its_call_runs() -> None:
    # --include-partial-messages: a message's start gives its input and cache
    # tokens, its closing delta its output tokens, both before the call runs.
    events, _ = replay("two_calls")
    first = [e for e in events if e.kind in ("usage", "tool_result")][:3]
    assert [(e.kind, e.usage) for e in first] == [
        ("usage", Usage("claude-sonnet-4-5", 1200, 1, 3000, 500)),
        ("usage", Usage("claude-sonnet-4-5", 0, 79, 0, 0)),
        ("tool_result", None)]
    # 3 x (1200, 80, 3000, 500), what the stand-in reported, all counted
    # before the result: the result adds nothing.
    before_result = events[:kinds(events).index("result")]
    assert total(before_result) == total(events) == (3600, 240, 9000, 1500)
    # (The result's own additions carry no line of their own.)
    assert all(e.raw is not None for e in events if e.kind == "usage")


def test_without_partial_messages_the_result_brings_the_output_tokens() -> None:
    events, final = replay("two_calls_plain", ClaudeCode(partial_messages=False))
    usage_events = [e for e in events if e.kind == "usage"]
    # Each line shows the usage of its message's start (output: 1) ...
    assert [u.usage for u in usage_events[:3]] == [
        Usage("claude-sonnet-4-5", 1200, 1, 3000, 500)] * 3
    # ... and the result's modelUsage adds the output tokens the lines lacked.
    assert usage_events[3].usage == Usage("claude-sonnet-4-5", 0, 237, 0, 0)
    assert total(events) == (3600, 240, 9000, 1500) and final.ok


def test_two_blocks_of_one_message_fold_its_usage_once() -> None:
    lines = (FIXTURES / "two_blocks.jsonl").read_text().splitlines()
    first = [json.loads(x) for x in lines if '"msg_e2e_0002"' in x and '"assistant"' in x[:20]]
    assert len(first) == 2 and first[0]["message"]["usage"] == first[1]["message"]["usage"]
    events, final = replay("two_blocks")
    assert next(e.text for e in events if e.kind == "message") == "Writing the file now."
    assert total(events) == (2400, 160, 6000, 1000)
    assert final.ok


def test_resumed_session_keeps_its_id() -> None:
    events, final = replay("resumed")
    assert {e.session_id for e in events if e.session_id} == {SESSION}
    assert final.ok and final.session_id == SESSION and final.text == "Carried on."


def test_resuming_an_unknown_session_is_session_lost() -> None:
    _, final = replay("resume_unknown")
    assert (final.ok, final.session_lost, final.quota) == (False, True, None)
    assert "No conversation found" in (final.error or "")


def test_no_result_with_the_lost_session_on_stderr_is_session_lost() -> None:
    final = ClaudeCode().finish([], 1, "No conversation found with session ID: x\n")
    assert final.session_lost and not final.ok


def test_max_turns_fails_with_its_subtype() -> None:
    _, final = replay("max_turns")
    assert not final.ok and not final.session_lost and final.quota is None
    assert (final.error or "").startswith("error_max_turns")
    assert final.num_turns == 2


def test_max_turns_after_a_rejected_limit_notice_is_still_max_turns() -> None:
    adapter = ClaudeCode()
    notice = json.dumps({"type": "rate_limit_event", "session_id": SESSION, "rate_limit_info": {
        "status": "rejected", "resetsAt": 1796191200}})
    lines = [notice, *(FIXTURES / "max_turns.jsonl").read_text().splitlines()]
    events = [e for line in lines for e in adapter.parse(line)]
    assert "quota" in kinds(events)
    final = adapter.finish(events, 1, "")
    assert final.quota is None and (final.error or "").startswith("error_max_turns")


def test_structured_output_is_the_answer() -> None:
    _, final = replay("structured")
    assert final.ok and final.structured == {"answer": 42, "files": ["a.txt"]}


def test_a_429_that_outlives_the_retries_is_quota_without_a_reset() -> None:
    events, final = replay("rate_limited")
    retries = [e for e in events if e.kind == "retry"]
    assert len(retries) == 1 and "429" in (retries[0].text or "")
    quota = [e.quota for e in events if e.kind == "quota"]
    assert len(quota) == 1 and quota[0] is not None and quota[0].reset_at_ms is None
    assert not final.ok and final.quota == quota[0]
    assert "Request rejected (429)" in final.quota.message


def test_a_529_retried_is_a_retry_not_a_quota() -> None:
    events, final = replay("overloaded_then_ok")
    assert [e.text and "529" in e.text for e in events if e.kind == "retry"] == [True]
    assert "quota" not in kinds(events) and final.ok and final.quota is None


def test_a_usage_limit_429_carries_its_reset_in_the_named_zone() -> None:
    events, final = replay("usage_limit")
    quota = final.quota
    assert quota is not None and "resets 6:20am (Europe/Berlin)" in quota.message
    # 06:20 in Berlin (UTC+1 in December) that day.
    assert quota.reset_at_ms == int(datetime(2026, 12, 2, 5, 20, tzinfo=UTC).timestamp() * 1000)
    assert kinds(events).count("quota") == 1


def test_subscriber_limit_events_only_rejected_is_quota() -> None:
    # Hand-written fixture (its first line says why): an allowed_warning
    # rate-limit event is no limit; the rejected one and the notice are.
    events, final = replay("subscriber_limit")
    quotas = [e.quota for e in events if e.quota is not None]
    assert [q.reset_at_ms for q in quotas] == [
        1796191200 * 1000, int(datetime(2026, 12, 2, 8, 0, tzinfo=UTC).timestamp() * 1000)]
    assert final.quota == quotas[-1] and not final.ok


@pytest.mark.parametrize("info", [
    {"status": "allowed", "resetsAt": 1796191200},
    {"status": "allowed_warning", "resetsAt": 1796191200, "utilization": 0.9},
    # The plan's limit is hit but usage credits carry the work on.
    {"status": "rejected", "resetsAt": 1796191200, "overageStatus": "allowed"},
    {"status": "rejected", "resetsAt": 1796191200, "isUsingOverage": True},
])
def test_a_rate_limit_event_that_does_not_stop_the_agent_is_nothing(info: dict[str, Any]) -> None:
    line = json.dumps({"type": "rate_limit_event", "rate_limit_info": info,
                       "session_id": SESSION})
    assert ClaudeCode().parse(line) == []


def test_long_prompt_went_through_stdin() -> None:
    meta = json.loads((FIXTURES / "long_prompt.meta.json").read_text())
    assert meta["argv"][-2:] == ["--input-format", "stream-json"] and meta["returncode"] == 0
    _, final = replay("long_prompt")
    assert final.ok and final.text == "Read it all."


def test_a_huge_line_keeps_a_capped_raw_but_finish_sees_it_whole() -> None:
    adapter = ClaudeCode()
    big = {"type": "result", "subtype": "success", "is_error": False, "result": "x" * 50_000,
           "session_id": SESSION, "num_turns": 1, "total_cost_usd": 0.5}
    events = adapter.parse(json.dumps(big))
    assert events[-1].raw is not None and "result" not in events[-1].raw
    assert adapter.finish(events, 0, "").text == "x" * 50_000


def test_lines_that_are_not_events_give_nothing() -> None:
    adapter = ClaudeCode()
    assert [adapter.parse(x) for x in ("", "not json", "[1]", '{"type": "stream_event"}')] == \
        [[], [], [], []]


def test_no_result_and_no_lost_session_is_an_error() -> None:
    final = ClaudeCode().finish([], -9, "")
    assert not final.ok and not final.session_lost and "no-result" in (final.error or "")


# -- argv, stdin, env, prepare ----------------------------------------


def test_argv_of_a_new_session(tmp_path: Path) -> None:
    req = request(tmp_path, session_id=SESSION, model="claude-opus-4-8", max_turns=7,
                  output_schema={"type": "object"}, prompt="-v is a prompt")
    argv = ClaudeCode().argv(req, "/opt/claude")
    assert argv == ["/opt/claude", "-p", "--output-format", "stream-json", "--verbose",
                    "--permission-mode", "bypassPermissions",
                    "--settings", str(tmp_path / "private" / "claude-settings.json"),
                    "--setting-sources", "user,project,local", "--include-partial-messages",
                    "--session-id", SESSION,
                    "--model", "claude-opus-4-8", "--max-turns", "7",
                    "--json-schema", '{"type":"object"}', "--", "-v is a prompt"]


def test_argv_of_a_resume_names_the_session_not_a_new_id(tmp_path: Path) -> None:
    argv = ClaudeCode().argv(request(tmp_path, resume_id=SESSION, session_id=SESSION,
                                     prompt="Continue."), "claude")
    assert argv[argv.index("--resume") + 1] == SESSION and "--session-id" not in argv
    assert argv[-2:] == ["--", "Continue."]


@pytest.mark.parametrize("bad", ["--dangerously-skip-permissions", "abc", "../x"])
def test_a_session_id_that_is_not_a_uuid_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidInput):
        ClaudeCode().argv(request(tmp_path, resume_id=bad), "claude")


def test_a_long_prompt_goes_on_stdin_as_one_stream_json_message(tmp_path: Path) -> None:
    adapter = ClaudeCode()
    long = request(tmp_path, prompt="é" * (ARG_LIMIT // 2 + 1))
    assert adapter.argv(long, "claude")[-2:] == ["--input-format", "stream-json"]
    data = adapter.stdin(long)
    assert data is not None and data.endswith(b"\n") and data.count(b"\n") == 1
    message = json.loads(data)
    assert message["type"] == "user"
    assert message["message"]["content"] == [{"type": "text", "text": long.prompt}]
    short = request(tmp_path)
    assert adapter.stdin(short) == b"" and "--input-format" not in adapter.argv(short, "c")


def test_env_drops_the_enclosing_claude_and_merges_the_hook_env(tmp_path: Path) -> None:
    req = request(tmp_path, hook_env={"DURABILITY_RUN_ID": "r1", "PATH": "/hook/bin"})
    base = {"CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": "cli", "PATH": "/bin", "HOME": "/h"}
    as_user = ClaudeCode(euid=lambda: 1000).env(req, base)
    assert as_user == {"PATH": "/hook/bin", "HOME": "/h", "DURABILITY_RUN_ID": "r1"}
    assert base["CLAUDECODE"] == "1"  # the caller's mapping is not changed
    assert ClaudeCode(euid=lambda: 0).env(req, base)["IS_SANDBOX"] == "1"
    assert "IS_SANDBOX" not in ClaudeCode(euid=lambda: 0, permission_mode="acceptEdits").env(
        req, base)


def test_prepare_writes_one_private_settings_file_with_our_hooks(tmp_path: Path) -> None:
    req = request(tmp_path, hook_command=("/opt/my tools/run-hook.sh", "/v/bin/durability"))
    ClaudeCode().prepare(req)
    path = tmp_path / "private" / "claude-settings.json"
    assert sorted(p.name for p in (tmp_path / "private").iterdir()) == ["claude-settings.json"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    settings = json.loads(path.read_text())
    command = "'/opt/my tools/run-hook.sh' /v/bin/durability"
    assert set(settings) == {"hooks"}
    assert settings["hooks"] == {event: [{"matcher": "*", "hooks": [
        {"type": "command", "command": command, "timeout": 15}]}]
        for event in ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied")}


def test_prepare_without_a_hook_command_writes_no_hooks(tmp_path: Path) -> None:
    ClaudeCode().prepare(request(tmp_path))
    assert json.loads((tmp_path / "private" / "claude-settings.json").read_text()) == {}


def test_the_registry_gives_a_fresh_adapter_per_invocation() -> None:
    one, two = harness("claude"), harness("claude")
    assert isinstance(one, ClaudeCode) and one is not two and one.name == "claude"
    with pytest.raises(InvalidInput, match="unknown harness"):
        harness("nope")


# -- the transcript: which calls the session completed ---------------------


def put_transcript(config: Path, folder_key: str) -> Path:
    target = config / "projects" / folder_key / f"{SESSION}.jsonl"
    target.parent.mkdir(parents=True)
    target.write_bytes((FIXTURES / "two_calls.transcript.jsonl").read_bytes())
    return target


def test_completed_calls_are_the_transcripts_tool_results(tmp_path: Path) -> None:
    worktree = tmp_path / "my repo.x"
    put_transcript(tmp_path / "home" / ".claude", str(worktree).replace("/", "-")
                   .replace(" ", "-").replace(".", "-"))
    env = {"HOME": str(tmp_path / "home")}
    assert ClaudeCode().completed_calls(SESSION, worktree, env) == {"toolu_e2e_0002",
                                                                    "toolu_e2e_0003"}


def test_completed_calls_under_claude_config_dir_and_any_project_key(tmp_path: Path) -> None:
    target = put_transcript(tmp_path / "conf", "-a-shortened-key")
    env = {"HOME": str(tmp_path / "elsewhere"), "CLAUDE_CONFIG_DIR": str(tmp_path / "conf")}
    adapter = ClaudeCode()
    assert adapter.transcript(SESSION, tmp_path / "wt", env) == target
    # A crash mid-write leaves a cut last line: the calls before it still count.
    target.write_bytes(target.read_bytes() + b'{"type":"user","message":{"content":[{"tool_r')
    assert adapter.completed_calls(SESSION, tmp_path / "wt", env) == {"toolu_e2e_0002",
                                                                      "toolu_e2e_0003"}


def test_no_transcript_is_none_and_a_bad_id_is_refused(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert ClaudeCode().completed_calls(SESSION, tmp_path, env) is None
    with pytest.raises(InvalidInput):
        ClaudeCode().completed_calls("../../etc/passwd", tmp_path, env)


@pytest.mark.parametrize("subtype", ["error_max_budget_usd", "error_max_structured_output_retries",
                                     "error_during_execution"])
def test_other_error_results_fail_with_their_subtype(subtype: str) -> None:
    # Shaped as the recorded max_turns result (these subtypes need a real
    # budget or a model that keeps refusing the schema to appear).
    adapter = ClaudeCode()
    line = json.dumps({"type": "result", "subtype": subtype, "is_error": True, "num_turns": 4,
                       "session_id": SESSION, "total_cost_usd": 1.25, "errors": []})
    final = adapter.finish(adapter.parse(line), 1, "")
    assert (final.ok, final.session_lost, final.quota) == (False, False, None)
    assert (final.error or "").startswith(subtype)
    assert (final.num_turns, final.reported_cost_usd) == (4, 1.25)
