"""The ``claim-lost`` event: a takeover records, in the claim's own
transaction, whose claim it ended."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from durability.ground.store_errors import ClaimLost
from durability.runs.execute import EngineConfig, start_run
from durability.runs.fence import Owner
from durability.runs.resume import claim_run
from durability.runs.run_rows import Runs
from tests.durability.runs import wfkit
from tests.helpers import wait_for

GATED = """
workflow = Workflow("gated")

@workflow.task()
def first(ctx):
    wfkit.GATES["first-started"].set()
    while not wfkit.GATES["release"].is_set():
        ctx.sleep(0.01)
    return {"n": 1}
"""


def _kinds(runs: Runs, run_id: str) -> list[tuple[str, dict[str, object] | None]]:
    return [(e.kind, e.detail) for e in runs.events(run_id)
            if e.kind in ("claim-won", "claim-lost")]


def test_a_takeover_of_a_running_run_logs_whose_claim_was_lost(
        runs: Runs, db_location: Path | str, tmp_path: Path) -> None:
    """Two claimants on one database: the first runs the workflow, a second
    store (its own connections) forces a resume claim; the log says the first
    lost its claim, and the first stops with ``ClaimLost``."""
    path = wfkit.write(tmp_path, GATED)
    ended: list[BaseException] = []

    def drive() -> None:
        try:
            start_run(runs, path, config=EngineConfig(heartbeat_s=0.02), run_id="cl1")
        except BaseException as exc:
            ended.append(exc)

    owner = threading.Thread(target=drive)
    owner.start()
    wait_for(lambda: wfkit.GATES["first-started"].is_set())
    first_owner = runs.get_run("cl1").owner
    with Runs(db_location) as other:
        row = other.get_run("cl1")
        thief = Owner("thief", os.getpid(), "elsewhere")
        claim = claim_run(other, row, owner=thief, now=time.time_ns() // 1_000_000,
                          stale_after_ms=60_000, force=True)
    wfkit.GATES["release"].set()
    owner.join(60)
    assert len(ended) == 1 and isinstance(ended[0], ClaimLost)
    assert _kinds(runs, "cl1") == [
        ("claim-lost", {"owner": first_owner, "epoch": row.claim_epoch, "by": "thief"}),
        ("claim-won", {"owner": "thief", "epoch": claim.epoch}),
    ]


def test_claiming_a_parked_run_loses_nobody_a_claim(runs: Runs, tmp_path: Path) -> None:
    path = wfkit.write(tmp_path, GATED)
    claim = runs.create_run("cl2", owner=Owner("first", os.getpid(), "h"),
                            workflow_path=str(path), repo_root=str(tmp_path), worktree=None,
                            metadata_json="{}", plan_json="[]", limits_json="{}")
    runs.park(claim, "paused")
    row = runs.get_run("cl2")
    assert runs.claim("cl2", expected_epoch=row.claim_epoch, owner=Owner("next", 1, "h"))
    assert [k for k, _ in _kinds(runs, "cl2")] == ["claim-won"]


def test_a_claim_that_loses_the_race_logs_nothing(runs: Runs, tmp_path: Path) -> None:
    path = wfkit.write(tmp_path, GATED)
    runs.create_run("cl3", owner=Owner("first", 1, "elsewhere"), workflow_path=str(path),
                    repo_root=str(tmp_path), worktree=None, metadata_json="{}",
                    plan_json="[]", limits_json="{}")
    row = runs.get_run("cl3")
    assert runs.claim("cl3", expected_epoch=row.claim_epoch, owner=Owner("a", 1, "h"))
    assert runs.claim("cl3", expected_epoch=row.claim_epoch, owner=Owner("b", 1, "h")) is None
    assert _kinds(runs, "cl3") == [
        ("claim-lost", {"owner": "first", "epoch": row.claim_epoch, "by": "a"}),
        ("claim-won", {"owner": "a", "epoch": row.claim_epoch + 1}),
    ]



def test_cancelling_a_run_whose_owner_looks_dead_ends_that_owners_claim(
        runs: Runs, tmp_path: Path) -> None:
    """A pause or cancel of a run whose owner's heartbeat is stale parks it at
    once; an owner that was only asleep (a suspended laptop) and wakes up
    afterwards must not go on writing to the run as if it still held it."""
    path = wfkit.write(tmp_path, GATED)
    claim = runs.create_run("cl4", owner=Owner("sleeper", os.getpid(), "h"),
                            workflow_path=str(path), repo_root=str(tmp_path), worktree=None,
                            metadata_json="{}", plan_json="[]", limits_json="{}")
    assert runs.request("cl4", "cancel", live_within_ms=0) == "cancelled"
    try:
        runs.beat(claim)
    except ClaimLost:
        pass
    else:
        raise AssertionError("the woken owner still held the cancelled run")
    assert runs.get_run("cl4").state == "cancelled"
    assert _kinds(runs, "cl4")[-1] == (
        "claim-lost", {"owner": "sleeper", "epoch": claim.epoch, "by": "cancel"})
