"""A rewind to a tool call whose checkpoint gc dropped (decision 0057), on
real git and jj repositories with boundaries recorded by the real hook (in
process) and a real gc: the files half refuses with ``checkpoint-collected``
before anything changes, the conversation half still runs, a kept boundary
names its row's commit after gc rewrote a git chain, and ``log``,
``browse``'s model and MCP's ``rewind`` neither crash nor restore a tree
(how ``log`` and ``browse`` list the collected calls: decision 0061,
tests/durability/cli/test_log_collected_calls.py and
tests/durability/browse/test_browse_collected.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest

from durability.browse.model import timeline_rows
from durability.config import Settings
from durability.retention.gc import run_gc
from durability.retention.policy import DAY_MS, Policy
from durability.store import Store
from durability.store.boundaries import boundaries
from tests.helpers import (
    hook_payload,
    make_git_repo,
    make_jj_repo,
    run_cli,
    run_cli_json,
    tree_manifest,
)
from tests.transcripts import transcript

SESSION = "9d7c1c4e-0000-4000-8000-000000000057"
CALLS = [("t1", "Write"), ("t2", "Read"), ("t3", "Write"), ("t4", "Write"), ("t5", "Write")]
#: Nothing kept but each attempt's newest checkpoint.
THIN = Policy(keep_all_days=0, hourly_days=0, daily_days=0, pre_restore_days=0,
              jj_op_log_days=0, prune_grace_s=0)


def _session(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """Five calls; the Read (t2) changed nothing, so it names t1's checkpoint."""
    repo = (make_git_repo(tmp_path / "repo") if kind == "git"
            else make_jj_repo(tmp_path / "repo"))
    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    path = transcript(folder / f"{SESSION}.jsonl", SESSION, CALLS, cwd=str(repo))
    for n, (call, tool) in enumerate(CALLS):
        if tool == "Write":
            (repo / f"f{n}.txt").write_text(f"{n}\n")
        payload = hook_payload(repo, session_id=SESSION, tool_use_id=call, tool_name=tool,
                               transcript_path=str(path))
        done = run_cli("snapshot-hook", input=json.dumps(payload))
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    return repo, path


def _gc(settings: Settings, store: Store) -> None:
    report = run_gc(settings, store, THIN, now_ms=int(time.time() * 1000) + DAY_MS)
    assert report.to_dict()["checkpoints"]["dropped"] == 3


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_collected_boundary_refuses_its_files_and_keeps_its_conversation(
        tmp_path: Path, kind: str) -> None:
    repo, path = _session(tmp_path, kind)
    settings = Settings.from_env()
    with Store(settings.database) as store:
        assert [b.checkpoint_seq for b in boundaries(store, SESSION)] == [1, 1, 2, 3, 4]
        _gc(settings, store)
        [kept] = store.checkpoints(SESSION)
        # Every boundary names its row's commit (git: the chain was written
        # again, so seq 4's commit changed) or none: no freed commit.
        assert [(b.seq, b.collected, b.commit_id) for b in boundaries(store, SESSION)] == [
            (1, True, ""), (2, True, ""), (3, True, ""), (4, True, ""),
            (5, False, kept.commit_id)]
    (repo / "f4.txt").write_text("later\n")
    before, files = tree_manifest(repo), sorted(path.parent.iterdir())
    for args in (["--call", "t2"], ["--seq", "3", "--code-only"], ["--call", "t1", "--dry-run"]):
        refused = run_cli("rewind", SESSION, *args)
        assert refused.returncode == 3, refused.stderr
        assert refused.stderr.count("\n") == 1 and refused.stdout == ""
        assert refused.stderr.startswith("durability: checkpoint-collected: boundary seq ")
        assert "the nearest boundaries with files: seq 5" in refused.stderr
        assert tree_manifest(repo) == before and sorted(path.parent.iterdir()) == files
    # The conversation needs no checkpoint.
    talk = run_cli_json("rewind", SESSION, "--call", "t2", "--conversation-only")
    assert talk["code"] is None and tree_manifest(repo) == before
    assert json.loads(Path(talk["conversation"]["path"]).read_text().splitlines()[-1])[
        "message"]["content"][0]["tool_use_id"] == "t2"
    # A kept boundary still rewinds, to its row's tree, naming its commit.
    done = run_cli_json("rewind", SESSION, "--call", "t5", "--code-only")
    assert done["boundary"]["commit_id"] == kept.commit_id
    assert (repo / "f4.txt").read_text() == "4\n"
    # The kept checkpoint names its own call only: the collected ones are
    # entries of their own (decision 0061).
    [entry] = [e for e in run_cli_json("log", str(repo)) if e["kind"] == "checkpoint"
               and e["source"] == "hook"]
    assert [b["seq"] for b in entry["boundaries"]] == [5]
    with Store(settings.database) as store:
        shown = [r.boundaries for r in timeline_rows(store, SESSION) if r.checkpoint
                 and r.checkpoint.seq == kept.seq]
        assert [[b.seq for b in row] for row in shown] == [[5]]


def test_mcp_rewind_answers_the_same_code(tmp_path: Path) -> None:
    from durability.mcp.stdio import call
    from durability.mcp.tools import TOOLS, Here

    repo, _ = _session(tmp_path, "git")
    settings = Settings.from_env()
    with Store(settings.database) as store:
        _gc(settings, store)
    before = tree_manifest(repo)
    [tool] = [t for t in TOOLS if t.name == "rewind"]
    here = Here(settings=settings, cwd=repo)
    answer = anyio.run(call, here, tool, {"run_id": SESSION, "call": "t3", "dry_run": True})
    assert answer.is_error is True
    assert isinstance(answer.structured_content, dict)
    error = answer.structured_content["error"]
    assert error["code"] == "checkpoint-collected"
    assert error["message"].startswith("boundary seq 3 of session ")
    assert tree_manifest(repo) == before
