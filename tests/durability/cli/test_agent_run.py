"""``durability agent run`` in process, over a scripted harness registered
as ``claude`` (the adapter protocol is the boundary): a finished run
prints its state and records its output and the agent's tool-call
checkpoints on the attempt (with the session id); a failed one exits with
its code; ``run-status`` and ``resume`` work on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.config import Settings
from durability.runs.agent import _REGISTRY, register_harness
from durability.runs.run_rows import Runs
from durability.store.store import Store
from tests.durability.runs.agentkit import Scripted, answer, session, tool, usage
from tests.helpers import run_cli


def _scripted(*programs: list[object]) -> Scripted:
    flat = [[s for part in p for s in (part if isinstance(part, list) else [part])]
            for p in programs]
    found = Scripted(name="claude", programs=flat)  # type: ignore[arg-type]
    register_harness("claude", lambda: found)
    return found


def test_agent_run_finishes_with_checkpoints_of_each_call_and_the_session(repo: Path,
                                                                           tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["n"],
                                  "properties": {"n": {"type": "integer"}}}))
    h = _scripted([session(), usage(10, 5), tool("call-1", "one.txt", "1", hook=True),
                   tool("call-2", "two.txt", "2", hook=True), answer({"n": 2})])
    try:
        done = run_cli("agent", "run", "write two files", "--worktree", str(repo),
                       "--run-id", "ag1", "--output-schema", str(schema), "--json")
    finally:
        _REGISTRY.pop("claude", None)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state"] == "finished"
    settings = Settings.from_env()
    with Runs(settings.database) as runs:
        assert runs.outputs("ag1")[0]["output"] == {"n": 2}
        sid = h.seen[0].session_id
        # Each call's tree is a checkpoint naming the call and its session
        # (the hook's row, or the watch's that caught the same tree first).
        calls = [c for c in Store(settings.database).checkpoints("ag1") if c.tool_use_id]
        assert [(c.tool_use_id, c.session_id, c.attempt) for c in calls] == [
            ("call-1", sid, 1), ("call-2", sid, 1)]
    status = run_cli("run-status", "ag1", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["state"] == "finished"


def test_agent_run_that_fails_exits_with_its_code(repo: Path, tmp_path: Path) -> None:
    _scripted([session(), usage(1000, 1000, cost=0.4), usage(1000, 1000, cost=0.4),
               answer({"n": 1})])
    try:
        done = run_cli("agent", "run", "spend", "--worktree", str(repo), "--run-id", "ag2",
                       "--max-cost", "0.5")
    finally:
        _REGISTRY.pop("claude", None)
    assert done.returncode != 0
    assert done.stderr.startswith("durability: BUDGET_COST_EXCEEDED: ")
    assert "cost used 0.8 of 0.5" in done.stderr


def test_agent_run_refuses_an_unknown_harness(repo: Path) -> None:
    done = run_cli("agent", "run", "x", "--worktree", str(repo), "--harness", "claude,cursor")
    assert done.returncode != 0 and "cursor" in done.stderr
    assert done.stderr.startswith("durability: ")


def test_the_config_files_prices_override_the_table(repo: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[agents.prices."my-model"]\ninput = 1000000.0\noutput = 0.0\n'
                      'cache_read = 0.0\ncache_write = 0.0\n')
    monkeypatch.setenv("DURABILITY_CONFIG", str(config))
    _scripted([session(), usage(3, 0, model="my-model"), answer({"n": 1})])
    try:
        done = run_cli("agent", "run", "price it", "--worktree", str(repo), "--run-id", "ag3")
    finally:
        _REGISTRY.pop("claude", None)
    assert done.returncode == 0, done.stderr
    with Runs(Settings.from_env().database) as runs:
        assert runs.usage("ag3").cost == pytest.approx(3.0)  # 3 tokens at $1 each
