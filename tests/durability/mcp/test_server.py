"""``durability mcp`` through a real MCP client session: the SDK's stdio
client starts the installed command as a subprocess, as a harness does, and
calls its tools on real jj and git repositories."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.helpers import cli, cli_json, durability_exe, make_git_repo, make_jj_repo, tree_manifest

TOOLS = {"sessions", "snapshots", "show", "diff", "log", "gaps", "attempts", "restore",
         "snapshot_now", "runs", "run_status", "service_status", "deny", "logs", "gc_preview",
         "remotes", "run", "resume", "pause", "cancel", "fork", "rewind",
         "agent_run"}

Body = Callable[["Mcp"], Awaitable[None]]


class Mcp:
    """One client session: ``call`` returns the structured answer, and
    ``error`` the error answer's code (failing the test on the other kind)."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def answer(self, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
        done = await self.session.call_tool(tool, arguments)
        assert isinstance(done.structured_content, dict)
        # The text is the same answer for a client that reads only text.
        text = done.content[0].text  # type: ignore[union-attr]
        if done.is_error:
            error = done.structured_content["error"]
            assert text == f"durability: {error['code']}: {error['message']}"
        else:
            assert json.loads(text) == done.structured_content
        return done.is_error, done.structured_content

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        failed, data = await self.answer(tool, **arguments)
        assert not failed, data
        return data

    async def error(self, tool: str, **arguments: Any) -> str:
        failed, data = await self.answer(tool, **arguments)
        assert failed, data
        assert "\n" not in data["error"]["message"]
        return str(data["error"]["code"])


def serve(cwd: Path, body: Body, *args: str) -> None:
    """Run ``body`` against ``durability mcp`` started in ``cwd``."""

    async def main() -> None:
        params = StdioServerParameters(command=durability_exe(), args=["mcp", *args],
                                       env=dict(os.environ), cwd=str(cwd))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(Mcp(session))

    asyncio.run(main())


def _repo(kind: str, path: Path) -> Path:
    repo = make_jj_repo(path) if kind == "jj" else make_git_repo(path)
    (repo / "README.md").write_text("hello\n")
    return repo


def test_lists_every_tool_with_typed_inputs_and_outputs(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def body(mcp: Mcp) -> None:
        seen.update({t.name: t for t in (await mcp.session.list_tools()).tools})

    serve(tmp_path, body)
    assert set(seen) == TOOLS  # approve only when a person allows it
    for tool in seen.values():
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object"
        assert tool.input_schema.get("additionalProperties") is False, tool.name
    assert seen["restore"].annotations.read_only_hint is False
    assert seen["show"].annotations.read_only_hint is True
    assert {"dry_run", "paths", "seq", "run_id"} <= set(seen["restore"].input_schema["properties"])
    assert "undo" in seen["restore"].output_schema["properties"]

    async def with_approve(mcp: Mcp) -> None:
        names = {t.name for t in (await mcp.session.list_tools()).tools}
        assert names == TOOLS | {"approve"}

    serve(tmp_path, with_approve, "--allow-approve")


@pytest.mark.parametrize("kind", ["jj", "git"])
def test_snapshot_dry_run_restore_and_undo(kind: str, tmp_path: Path) -> None:
    repo = _repo(kind, tmp_path / "repo")

    async def body(mcp: Mcp) -> None:
        # No session has touched the worktree yet: a snapshot must name its run.
        assert await mcp.error("snapshot_now") == "invalid-value"
        first = await mcp.call("snapshot_now", run_id="agent-run", label="before")
        assert (first["run_id"], first["node_id"], first["seq"]) == ("agent-run", "session", 1)
        (repo / "README.md").write_text("edited by the agent\n")
        (repo / "new.txt").write_text("new\n")
        # Later calls default to the newest session of the server's worktree.
        assert (await mcp.call("snapshot_now"))["seq"] == 2
        (repo / "README.md").write_text("edited again\n")
        before = tree_manifest(repo)

        seen = await mcp.call("restore", seq=1, dry_run=True)
        assert seen["dry_run"] is True and seen["undo"] is None
        assert seen["written"] == ["README.md"] and seen["deleted"] == ["new.txt"]
        assert tree_manifest(repo) == before  # a dry run changes nothing...
        listed = await mcp.call("snapshots")
        assert [c["seq"] for c in listed["checkpoints"]] == [1, 2]  # ...and records nothing

        last = await mcp.call("snapshots", limit=1)
        assert ([c["seq"] for c in last["checkpoints"]], last["total"]) == ([2], 2)
        done = await mcp.call("restore", seq=1)
        assert (repo / "README.md").read_text() == "hello\n"
        assert not (repo / "new.txt").exists()
        assert done["pre_restore"]["seq"] == 3 and done["undo"]["arguments"]["seq"] == 3
        assert done["undo"]["command"].startswith("durability restore agent-run --node session")

        await mcp.call(done["undo"]["tool"], **done["undo"]["arguments"])
        assert tree_manifest(repo) == before  # the undo put the agent's edits back

        shown = await mcp.call("show", seq=2)
        assert {f["path"] for f in shown["files"]} == {"README.md", "new.txt"}
        changed = await mcp.call("diff", seq=1, to_seq=2, patch=True, paths=["README.md"])
        assert [f["path"] for f in changed["files"]] == ["README.md"]
        assert "+edited by the agent" in changed["patch"]
        assert (await mcp.call("sessions"))["sessions"][0]["run_id"] == "agent-run"
        entries = (await mcp.call("log"))["entries"]
        assert [e["seq"] for e in entries][:2] == [4, 3]  # the undo's own pre-restore first
        assert (await mcp.call("attempts"))["attempts"][0]["node_id"] == "session"
        assert (await mcp.call("gaps"))["gaps"] == []
        assert (await mcp.call("service_status"))["running"] is False  # captured in process
        # Only some paths: the rest of the tree stays as the agent left it.
        some = await mcp.call("restore", seq=1, paths=["new.txt"])
        assert (some["paths"], some["deleted"], some["written"]) == (["new.txt"], ["new.txt"], [])
        assert not (repo / "new.txt").exists()
        assert (repo / "README.md").read_text() == "edited again\n"

    serve(repo, body)
    # The CLI reads the same records the tools wrote.
    rows = cli_json("snapshots", "agent-run")
    assert [r["source"] for r in rows] == ["manual", "manual"] + ["pre-restore"] * 3


def test_bad_inputs_answer_with_codes_and_the_server_lives_on(tmp_path: Path) -> None:
    repo = _repo("jj", tmp_path / "repo")
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    assert cli("snapshot", str(repo), "--run", "r1", "--node", "session").returncode == 0
    (repo / "README.md").write_text("changed\n")
    for _ in range(3):  # three captures that could not be taken: gaps of r1 (in the
        # served worktree: a gap naming a folder outside it is not the server's to show)
        assert cli("snapshot", str(repo / "gone"), "--run", "r1", "--node", "session"
                   ).returncode == 5

    async def body(mcp: Mcp) -> None:
        assert await mcp.error("snapshots", run_id="no-such-run") == "not-found"
        assert await mcp.error("run_status", run_id="no-such-run") == "not-found"
        for bad in ("../etc", "a/b", "", "x" * 300, ".hidden"):
            assert await mcp.error("restore", run_id=bad, seq=1) == "invalid-value", bad
        assert await mcp.error("restore", seq="1") == "invalid-value"  # wrong types
        assert await mcp.error("restore", seq=1.5) == "invalid-value"
        assert await mcp.error("restore", seq=0) == "invalid-value"
        assert await mcp.error("restore", dry_run="yes") == "invalid-value"
        assert await mcp.error("restore", paths="README.md") == "invalid-value"
        assert await mcp.error("restore", sequence=1) == "invalid-value"  # a misspelt field
        for path in ("../outside.txt", str(outside), ".git/config", "a\0b"):
            assert await mcp.error("restore", seq=1, paths=[path]) == "invalid-value", path
        assert await mcp.error("diff", seq=1, to_worktree=True, paths=["../x"]) == \
            "invalid-value"
        assert await mcp.error("sessions", worktree=str(tmp_path / "gone")) == \
            "worktree-missing"
        assert await mcp.error("log", worktree=str(tmp_path)) == "not-a-repo"
        assert await mcp.error("restore", seq=99) == "not-found"
        assert await mcp.error("deny", run_id="r1", node_id="session") == "not-found"
        with pytest.raises(MCPError) as raised:
            await mcp.session.call_tool("approve", {"run_id": "r1", "node_id": "session"})
        assert raised.value.error.data == {"code": "not-found"}
        found = await mcp.call("gaps", limit=2)
        assert (len(found["gaps"]), found["total"]) == (2, 3)
        assert {g["reason"] for g in found["gaps"]} == {"worktree-missing"}
        listed = await mcp.call("sessions", limit=1)
        assert (len(listed["sessions"]), listed["total"]) == (1, 1)
        # Still serving, and nothing was restored by any of the above.
        assert (await mcp.call("snapshots"))["run_id"] == "r1"

    serve(repo, body)
    assert outside.read_text() == "not yours\n"
    assert (repo / "README.md").read_text() == "changed\n"


def test_without_the_sdk_one_line_with_a_code_says_how_to_install(tmp_path: Path) -> None:
    # What `import mcp` does where the SDK is not installed.
    (tmp_path / "mcp.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n")
    done = cli("mcp", env={**os.environ, "PYTHONPATH": str(tmp_path)}, input="")
    assert done.returncode == 8 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("durability: missing-extra: ") and "[mcp]" in line
