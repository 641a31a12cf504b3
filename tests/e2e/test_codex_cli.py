"""End to end with the real Codex CLI (the pinned 0.171.0 that
scripts/install-agent-clis.sh installs) driven through its adapter
(durability/agents/codex.py), offline against the Responses API stand-in
(tests/e2e/fake_openai.py).

Codex's CODEX_HOME here plays the user's own: its config.toml names the
stand-in as model provider (as a user's names their provider) and must be
byte for byte the same afterwards, with no hooks.json written anywhere: the
adapter gives the hook as a ``-c hooks=...`` layer of this process only.
The toolkit's variables reach the hook only through the adapter's
``hook_env``, so a checkpoint in this test's store proves they did.

A missing CLI fails the test (run `make .venv/agent-clis-ready`); it never skips.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from durability.agents.codex import CodexHarness
from durability.agents.protocol import AgentRequest, Usage
from tests.e2e import fake_openai
from tests.e2e.agent_driver import CODEX, Invocation, base_env, cli_path, run, toolkit_env
from tests.e2e.fake_openai import FakeOpenAI, Script, add_file_patch
from tests.helpers import cli_json, durability_exe, make_git_repo, store_git

pytestmark = pytest.mark.slow


def _homes(tmp_path: Path, fake: FakeOpenAI, retries: int = 0) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "user-home"
    codex_home = home / ".codex"
    fake_openai.codex_config(codex_home, fake.base_url, retries=retries)
    env = base_env(home, CODEX_HOME=str(codex_home), **{fake_openai.API_KEY_ENV: "sk-e2e"})
    return codex_home, env


def _invoke(repo: Path, tmp_path: Path, env: dict[str, str], prompt: str,
            resume_id: str | None = None, tag: str = "a") -> tuple[CodexHarness, Invocation]:
    adapter = CodexHarness()
    request = AgentRequest(prompt=prompt, worktree=repo, private_dir=tmp_path / f"private-{tag}",
                           hook_command=(durability_exe(), "snapshot-hook"),
                           hook_env=toolkit_env(), resume_id=resume_id)
    return adapter, run(adapter, request, cli_path(CODEX), env)


def _plan(steps: list[tuple[str, dict[str, Any] | str]]) -> fake_openai.Plan:
    def plan(outputs: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | str] | None:
        return steps[len(outputs)] if len(outputs) < len(steps) else None
    return plan


def _total(usages: list[Usage]) -> tuple[int, int, int]:
    return (sum(u.input_tokens for u in usages), sum(u.cache_read_tokens for u in usages),
            sum(u.output_tokens for u in usages))


def test_every_codex_tool_call_is_a_checkpoint_and_the_user_config_is_untouched(
        tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    steps: list[tuple[str, dict[str, Any] | str]] = [
        ("apply_patch", add_file_patch("notes.md", "one\ntwo")),
        ("exec_command", {"cmd": "echo hello > made-by-codex.txt"}),
        ("exec_command", {"cmd": "cat notes.md"}),
        ("exec_command", {"cmd": "echo three >> notes.md; exit 3"}),
    ]
    with FakeOpenAI(Script(plan=_plan(steps))) as fake:
        codex_home, env = _homes(tmp_path, fake)
        config_before = (codex_home / "config.toml").read_bytes()
        _, done = _invoke(repo, tmp_path, env, "Write the notes and a file.")
        seen = [f"{r.method} {r.path}" for r in fake.requests]
        call_ids = [o["call_id"] for o in fake.tool_outputs()]

    final = done.final
    assert final.ok, (final, done.stderr[-2000:], seen)
    assert final.text == fake_openai.FINAL_TEXT
    session = final.session_id
    assert session and [e.session_id for e in done.events if e.kind == "session"] == [session]
    # Four calls, each announced then completed in the stream.
    calls = [e.tool for e in done.events if e.kind == "tool_call"]
    results = [e.tool for e in done.events if e.kind == "tool_result"]
    assert [c.name for c in calls if c] == ["apply_patch", "Bash", "Bash", "Bash"]
    assert [r.completed for r in results if r] == [True, True, True, True]
    # Usage: five responses of 100 input (20 cached) and 7 output tokens.
    assert _total([e.usage for e in done.events if e.usage]) == (400, 100, 35)

    # Every call that changed the tree is a checkpoint row of this session,
    # keyed by the model's call id (the failed one too); the read-only `cat`
    # left the tree as the row before it, so it has no row of its own
    # (contract 3 dedups rows; issue 24 makes such a call a boundary).
    rows = cli_json("snapshots", session)
    by_call = {r["tool_use_id"]: r for r in rows if r["tool_use_id"]}
    assert call_ids == ["call_e2e_0001", "call_e2e_0002", "call_e2e_0003", "call_e2e_0004"]
    assert set(by_call) == {"call_e2e_0001", "call_e2e_0002", "call_e2e_0004"}, \
        [(r["label"], r["tool_use_id"]) for r in rows]
    assert {r["harness"] for r in rows} == {"codex"}
    assert by_call["call_e2e_0001"]["label"] == "apply_patch notes.md"
    assert by_call["call_e2e_0002"]["label"] == "Bash echo hello > made-by-codex.txt"
    patched = by_call["call_e2e_0001"]["commit_id"]
    assert store_git(repo, "show", f"{patched}:notes.md").stdout == "one\ntwo\n"
    assert "made-by-codex.txt" not in store_git(repo, "ls-tree", "--name-only", patched).stdout
    echoed = by_call["call_e2e_0002"]["commit_id"]
    assert store_git(repo, "show", f"{echoed}:made-by-codex.txt").stdout == "hello\n"
    failed = by_call["call_e2e_0004"]["commit_id"]
    assert store_git(repo, "show", f"{failed}:notes.md").stdout == "one\ntwo\nthree\n"
    assert cli_json("gaps", session) == []

    # Nothing of the user's was written: config.toml as it was, no hooks file
    # in CODEX_HOME or the project, no trust recorded.
    assert (codex_home / "config.toml").read_bytes() == config_before
    assert not (codex_home / "hooks.json").exists()
    assert not (repo / ".codex").exists()
    assert "--dangerously-bypass-hook-trust" in done.argv
    # The session is Codex's own rollout, in the user's CODEX_HOME.
    [rollout] = (codex_home / "sessions").glob(f"*/*/*/rollout-*-{session}.jsonl")
    assert all(cid in rollout.read_text() for cid in call_ids)


def test_a_resumed_codex_session_carries_the_earlier_results_and_counts_only_new_tokens(
        tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    with FakeOpenAI(Script(plan=_plan([("exec_command", {"cmd": "echo one > one.txt"})]))) as fake:
        _, env = _homes(tmp_path, fake)
        _, first = _invoke(repo, tmp_path, env, "Write one.")
        assert first.final.ok, first.stderr[-2000:]
        session = first.final.session_id
        assert session is not None
        before = len(fake.responses())
        # The resumed turn: one more call, then done.
        fake.script.plan = lambda outputs: (
            ("exec_command", {"cmd": "echo two > two.txt"}) if len(outputs) < 2 else None)
        _, second = _invoke(repo, tmp_path, env, "Go on.", resume_id=session, tag="b")
        resumed = [r.body for r in fake.responses()[before:]]

    assert second.final.ok, second.stderr[-2000:]
    assert second.final.session_id == session
    # The first request of the resumed turn carries the first call and its output.
    history = resumed[0]
    assert [c["call_id"] for c in fake_openai.calls_in(history)] == ["call_e2e_0001"]
    assert [o["call_id"] for o in fake_openai.outputs_in(history)] == ["call_e2e_0001"]
    assert fake_openai.user_texts(history)[-1] == "Go on."
    # Codex reports the thread's running total; the adapter counts only the
    # two responses of this invocation.
    assert _total([e.usage for e in second.events if e.usage]) == (160, 40, 14)
    rows = cli_json("snapshots", session)
    assert {r["tool_use_id"] for r in rows if r["tool_use_id"]} >= {"call_e2e_0001",
                                                                     "call_e2e_0003"}
    assert (repo / "two.txt").read_text() == "two\n"


def test_resuming_an_unknown_codex_thread_is_a_lost_session(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    with FakeOpenAI() as fake:
        _, env = _homes(tmp_path, fake)
        _, done = _invoke(repo, tmp_path, env, "Go on.",
                          resume_id="01a2347b-0000-7000-8000-000000000000")
        assert fake.responses() == []
    assert done.returncode == 1
    assert done.final.session_lost and not done.final.ok
    assert "no rollout found for thread id" in (done.final.error or "")


def test_a_codex_usage_limit_is_a_quota_with_its_reset_time(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    resets = int(time.time()) + 2 * 3600
    with FakeOpenAI(Script(failures=[fake_openai.usage_limit(resets)])) as fake:
        _, env = _homes(tmp_path, fake)
        _, done = _invoke(repo, tmp_path, env, "Write one.")
    final = done.final
    assert done.returncode == 1 and not final.ok and not final.session_lost
    assert final.quota is not None, done.lines
    assert "hit your usage limit" in final.quota.message
    # Codex prints the reset as a wall-clock minute: within a minute of it.
    assert final.quota.reset_at_ms is not None
    assert abs(final.quota.reset_at_ms / 1000 - resets) <= 60, (final.quota, resets)


def test_a_429_codex_retries_is_a_retry_not_a_quota(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    with FakeOpenAI(Script(failures=[fake_openai.rate_limited(1)])) as fake:
        _, env = _homes(tmp_path, fake, retries=2)
        _, done = _invoke(repo, tmp_path, env, "Write one.")
        assert len(fake.responses()) == 3  # the 429, then the call and the answer
    retries = [e.text for e in done.events if e.kind == "retry"]
    assert len(retries) == 1 and "429" in (retries[0] or ""), done.lines
    assert done.final.ok and done.final.quota is None
    assert (repo / "made-by-codex.txt").read_text() == "hello\n"
