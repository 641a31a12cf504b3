"""The Claude Agent SDK integration, with the real ``claude-agent-sdk``
package: the callback is called with the SDK's own hook input types."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookContext,
    HookMatcher,
    PostToolUseFailureHookInput,
    PostToolUseHookInput,
    Transport,
)

import durability
from durability.config import Settings
from durability.integrations.sdk import hook_matchers, post_tool_use
from durability.store import Checkpoint
from tests import pg
from tests.helpers import cli, jj

CTX = HookContext(signal=None)


def _rows(settings: Settings, run_id: str) -> list[Checkpoint]:
    found = pg.existing_store()
    if found is None:
        return []
    with found as store:
        return store.checkpoints(run_id)


def _post(repo: Path, *, session: str = "sess-sdk", tool_use_id: str = "toolu_01") -> (
        PostToolUseHookInput):
    return PostToolUseHookInput(
        session_id=session, transcript_path=str(repo / "t.jsonl"), cwd=str(repo),
        hook_event_name="PostToolUse", tool_name="Write",
        tool_input={"file_path": str(repo / "notes.md"), "content": "hi"},
        tool_response={"success": True}, tool_use_id=tool_use_id)


def test_post_tool_use_is_captured_on_the_session(settings: Settings, repo: Path) -> None:
    (repo / "notes.md").write_text("hi\n")
    answer = asyncio.run(post_tool_use(_post(repo), "toolu_01", CTX))
    assert answer == {}
    [row] = _rows(settings, "sess-sdk")
    assert (row.node_id, row.source, row.tool_use_id, row.label) == (
        "session", "hook", "toolu_01", "Write notes.md")
    assert "notes.md" in jj(repo, "file", "list", "-r", row.commit_id).stdout


def test_a_failed_tool_is_captured_on_the_ambient_attempt(settings: Settings,
                                                          repo: Path) -> None:
    (repo / "partial.txt").write_text("written before the command failed\n")
    failure = PostToolUseFailureHookInput(
        session_id="sess-sdk", transcript_path="/dev/null", cwd=str(repo),
        hook_event_name="PostToolUseFailure", tool_name="Bash",
        tool_input={"command": "make"}, tool_use_id="toolu_02", error="exit 2")

    async def agent() -> dict[str, object]:
        with durability.attempt("engine-run", "build", worktree=repo, attempt=3):
            return dict(await post_tool_use(failure, "toolu_02", CTX))

    assert asyncio.run(agent()) == {}
    [row] = _rows(settings, "engine-run")
    assert (row.node_id, row.attempt, row.label, row.tool_use_id) == (
        "build", 3, "Bash make", "toolu_02")


def test_the_same_call_from_the_sdk_and_the_plugin_hook_is_one_row(
        settings: Settings, repo: Path) -> None:
    (repo / "notes.md").write_text("once\n")
    payload = _post(repo, tool_use_id="toolu_dup")
    asyncio.run(post_tool_use(payload, "toolu_dup", CTX))
    # A changed tree: only a replay of the same request id keeps it one row
    # (an unchanged tree would dedup whatever the id).
    (repo / "notes.md").write_text("changed before the plugin's report\n")
    done = cli("snapshot-hook", input=json.dumps(payload))
    assert done.returncode == 0 and done.stdout == ""
    rows = _rows(settings, "sess-sdk")
    assert len(rows) == 1


@pytest.mark.sqlite_file
def test_unusable_input_never_reaches_the_agent(settings: Settings) -> None:
    bad = {"session_id": "../x", "cwd": "relative", "hook_event_name": "PostToolUse"}
    assert asyncio.run(post_tool_use(bad, None, CTX)) == {}  # type: ignore[arg-type]
    assert not settings.db_path.exists()


def test_hook_matchers_plug_into_claude_agent_options(repo: Path) -> None:
    hooks = hook_matchers(timeout_s=12)
    options = ClaudeAgentOptions(cwd=str(repo), hooks=hooks)  # type: ignore[arg-type]
    assert options.hooks is not None
    assert set(options.hooks) == {"PostToolUse", "PostToolUseFailure"}
    for matchers in options.hooks.values():
        [matcher] = matchers
        assert isinstance(matcher, HookMatcher)
        assert matcher.matcher is None and matcher.timeout == 12
        assert matcher.hooks == [post_tool_use]


@pytest.mark.parametrize("event", ["PostToolUse", "PostToolUseFailure"])
def test_callbacks_are_coroutines_the_sdk_can_await(event: str) -> None:
    [matcher] = hook_matchers()[event]  # type: ignore[index]
    assert asyncio.iscoroutinefunction(matcher.hooks[0])


class FakeCLI(Transport):
    """The Claude Code side of the SDK's control protocol, in memory: it
    answers ``initialize`` and then reports one tool call to the hooks the SDK
    registered, as the CLI does after running a tool."""

    def __init__(self) -> None:
        self.to_sdk: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.hooks: dict[str, Any] = {}
        self.answers: dict[str, dict[str, Any]] = {}
        self.answered = asyncio.Event()

    async def connect(self) -> None:
        return None

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            if message.get("type") == "control_request" and \
                    message["request"]["subtype"] == "initialize":
                self.hooks = message["request"]["hooks"] or {}
                await self.to_sdk.put({"type": "control_response", "response": {
                    "subtype": "success", "request_id": message["request_id"], "response": {}}})
            elif message.get("type") == "control_response":
                self.answers[message["response"]["request_id"]] = message["response"]
                self.answered.set()

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override]
        while (message := await self.to_sdk.get()) is not None:
            yield message

    async def report_tool_call(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        callback_id = self.hooks[event][0]["hookCallbackIds"][0]
        await self.to_sdk.put({"type": "control_request", "request_id": "cli-1", "request": {
            "subtype": "hook_callback", "callback_id": callback_id, "input": payload,
            "tool_use_id": payload["tool_use_id"]}})
        await asyncio.wait_for(self.answered.wait(), 60)
        return self.answers["cli-1"]

    async def end_input(self) -> None:
        return None

    async def close(self) -> None:
        await self.to_sdk.put(None)

    def is_ready(self) -> bool:
        return True


def test_the_sdk_dispatches_a_tool_call_to_the_callback(settings: Settings, repo: Path) -> None:
    (repo / "notes.md").write_text("via the control protocol\n")
    payload = dict(_post(repo, tool_use_id="toolu_wire"))

    async def session() -> dict[str, Any]:
        cli_side = FakeCLI()
        options = ClaudeAgentOptions(cwd=str(repo), hooks=hook_matchers())  # type: ignore[arg-type]
        async with ClaudeSDKClient(options=options, transport=cli_side):
            assert set(cli_side.hooks) == {"PostToolUse", "PostToolUseFailure"}
            return await cli_side.report_tool_call("PostToolUse", payload)

    answer = asyncio.run(session())
    assert answer == {"subtype": "success", "request_id": "cli-1", "response": {}}
    [row] = _rows(settings, "sess-sdk")
    assert (row.tool_use_id, row.label) == ("toolu_wire", "Write notes.md")


def test_a_sub_agents_call_carries_its_identity(settings: Settings, repo: Path) -> None:
    (repo / "notes.md").write_text("from a sub-agent\n")
    payload = dict(_post(repo, session="sess-sub", tool_use_id="toolu_sub"))
    payload.update(agent_id="a1b2", agent_type="code-reviewer")
    asyncio.run(post_tool_use(payload, "toolu_sub", CTX))  # type: ignore[arg-type]
    [row] = _rows(settings, "sess-sub")
    assert (row.harness, row.agent_id, row.agent_type) == ("claude", "a1b2", "code-reviewer")
