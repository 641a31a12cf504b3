"""The MCP twins of the commands that came after the server: ``logs``,
``gc_preview`` (gc's dry run only) and ``remotes``, through the SDK's stdio
client against the installed ``durability mcp``, on real repositories; each
answer is checked against the CLI's own output for the same state."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.remote.replicator import Replicator
from durability.store import AttemptKey, Store
from tests.durability.mcp.test_server import Mcp, serve
from tests.durability.remote.remotekit import bare_remote, remote_refs
from tests.helpers import cli, cli_json, make_git_repo, make_jj_repo

QUICK = """\
from __future__ import annotations

from durability.runs.workflow import Workflow

workflow = Workflow("quick")


@workflow.task(approval=True)
def gate(ctx):
    return {}
"""


def _snapshots(repo: Path, run_id: str, n: int) -> None:
    """``n`` checkpoints of ``repo``, in this process (as the hook takes them
    with no service): a CLI process each would only add start-up time."""
    for i in range(n):
        (repo / "README.md").write_text(f"version {i}\n")
        done = snapshot_now(Settings.from_env(), key=AttemptKey(run_id, "session", 0, 1),
                            path=repo, request_id=str(uuid.uuid4()))
        assert done.commit_id is not None and not done.deduped


def _projects(tmp_path: Path) -> tuple[Path, Path]:
    """``ours`` (jj, session ra, three checkpoints) and ``theirs`` (git,
    session rb, two)."""
    ours = make_jj_repo(tmp_path / "ours").resolve()
    theirs = make_git_repo(tmp_path / "theirs").resolve()
    _snapshots(ours, "ra", 3)
    _snapshots(theirs, "rb", 2)
    return ours, theirs


def test_logs_answers_the_newest_events_with_the_total(tmp_path: Path) -> None:
    ours, theirs = _projects(tmp_path)
    flow = tmp_path / "quick.py"
    flow.write_text(QUICK)
    done = cli("run", str(flow), "--run-id", "q0", "--worktree", str(theirs))
    assert done.returncode == 0, done.stderr
    everything = [json.loads(line) for line in cli("logs", "ra", "--json").stdout.splitlines()]
    engine_run = [json.loads(line) for line in cli("logs", "q0", "--json").stdout.splitlines()]
    assert [e["kind"] for e in everything] == ["checkpoint"] * 3

    async def body(mcp: Mcp) -> None:
        # Default: the newest session of the served worktree, every event.
        whole = await mcp.call("logs")
        assert (whole["run_id"], whole["total"], whole["events"]) == ("ra", 3, everything)
        # Bounded: the newest N, oldest first, and the total.
        tail = await mcp.call("logs", run_id="ra", limit=2)
        assert (tail["total"], tail["events"]) == (3, everything[1:])
        assert [e["seq"] for e in tail["events"]] == [2, 3]
        # An engine run is served as run_status serves it (not bound to a worktree).
        run = await mcp.call("logs", run_id="q0")
        assert (run["total"], run["events"]) == (len(engine_run), engine_run)
        assert "run-started" in {e["kind"] for e in run["events"]}
        # Bad inputs are answered with codes, not a broken server.
        assert await mcp.error("logs", run_id="rb") == "invalid-value"  # another project
        assert await mcp.error("logs", worktree=str(theirs)) == "invalid-value"
        assert await mcp.error("logs", run_id="nope") == "not-found"
        assert await mcp.error("logs", run_id="../x") == "invalid-value"
        assert await mcp.error("logs", limit=0) == "invalid-value"
        assert await mcp.error("logs", limit="2") == "invalid-value"
        assert await mcp.error("logs", follow=True) == "invalid-value"  # unknown field

    serve(ours, body)


def test_gc_preview_says_what_gc_would_drop_and_drops_nothing(tmp_path: Path) -> None:
    ours, theirs = _projects(tmp_path)
    windows = {"keep_all_days": 0, "hourly_days": 0, "daily_days": 0}
    flags = ["--keep-all-days", "0", "--hourly-days", "0", "--daily-days", "0"]
    seen: dict[str, object] = {}

    async def body(mcp: Mcp) -> None:
        # The default policy keeps a week of everything.
        assert (await mcp.call("gc_preview"))["would_drop_total"] == 0
        seen.update(await mcp.call("gc_preview", limit=1, **windows))
        assert await mcp.error("gc_preview", keep_all_days=-1) == "invalid-value"
        assert await mcp.error("gc_preview", keep_all_days="0") == "invalid-value"
        assert await mcp.error("gc_preview", dry_run=False) == "invalid-value"  # no real gc
        assert await mcp.error("gc_preview", worktree=str(theirs)) == "invalid-value"

    serve(ours, body)
    # Every checkpoint but its attempt's newest expires, in our repository only.
    assert seen["dry_run"] is True and seen["worktree"] == str(ours)
    assert seen["checkpoints"] == {"before": 3, "dropped": 2, "kept": 1,
                                   "kept_by": {"newest": 1}}
    assert seen["would_drop_total"] == 2
    assert [c["seq"] for c in seen["would_drop"]] == [2]  # limit=1: the newest of them
    assert [r["worktrees"] for r in seen["repositories"]] == [[str(ours)]]  # type: ignore[attr-defined]
    # The same figures as the CLI's dry run over this repository...
    cli_report = cli_json("gc", "--dry-run", *flags)
    ours_cli = [r for r in cli_report["repositories"] if r["worktrees"] == [str(ours)]]
    assert ours_cli[0]["dropped"] == 2 and cli_report["checkpoints"]["dropped"] == 3
    # ...and nothing was dropped by the preview.
    assert [c["seq"] for c in cli_json("snapshots", "ra")] == [1, 2, 3]
    assert [c["seq"] for c in cli_json("snapshots", "rb")] == [1, 2]


def test_remotes_summarise_what_each_remote_holds(tmp_path: Path) -> None:
    ours = make_git_repo(tmp_path / "ours").resolve()
    theirs = make_git_repo(tmp_path / "theirs").resolve()
    backup = bare_remote(tmp_path / "backup.git")
    _snapshots(ours, "ra", 2)
    for where, name in ((ours, "backup"), (theirs, "elsewhere")):
        added = cli("remote", "add", name, backup.as_uri(), "--worktree", str(where))
        assert added.returncode == 0, added.stderr
    settings = Settings.from_env()
    with Store(settings.database) as store:  # the service's replicator, run once here
        assert Replicator(settings, lambda: store, os.environ).run_once() == 2
    assert remote_refs(backup)
    _snapshots(ours, "ra", 1)  # the third is not pushed yet
    seen: dict[str, object] = {}

    async def body(mcp: Mcp) -> None:
        seen.update(await mcp.call("remotes"))
        assert (await mcp.call("remotes", worktree="."))["remotes"] == seen["remotes"]
        assert await mcp.error("remotes", worktree=str(theirs)) == "invalid-value"
        assert await mcp.error("remotes", worktree=str(tmp_path / "gone")) in {
            "worktree-missing", "invalid-value"}
        assert await mcp.error("remotes", name="backup") == "invalid-value"

    serve(ours, body)
    listed = cli_json("remote", "list", "--worktree", str(ours))
    assert seen["worktree"] == str(ours) and seen["checkpoints"] == 3
    assert seen["remotes"] == [{**listed[0], "pushed": 2, "pending": 1, "failed": 0}]
    # Each checkpoint's state, as `snapshots --json` reports it, adds up the same.
    states = [c["replicated"] for c in cli_json("snapshots", "ra")]
    assert states == [{"backup": "pushed"}, {"backup": "pushed"}, {"backup": "pending"}]
