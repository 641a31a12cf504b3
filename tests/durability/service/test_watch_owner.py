"""A watch lives only as long as its owner: the service's watch of an engine
attempt ends when the attempt's owner stops (its process gone, its heartbeat
stale, the attempt over), with a ``watch-ended`` event, and nothing is
recorded in the dead attempt's name after that."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pygit2

from durability.config import Settings
from durability.ground import client
from durability.runs.fence import Owner
from durability.runs.run_rows import Runs
from durability.service.owners import Owners
from durability.store import AttemptKey
from tests.durability.runs.test_attempt_checkpoints import run_killed
from tests.helpers import checkpoints, cli, hook_payload, make_git_repo, start_service, wait_for


def _dead_rows(settings: Settings) -> list[str]:
    with Runs(settings.database) as runs:
        return [c.commit_id for c in runs.checkpoints("kw", "dies_once") if c.attempt == 1]


def test_a_killed_runs_watch_records_nothing_of_another_sessions_edits(
        tmp_path: Path, settings: Settings) -> None:
    repo = make_git_repo(tmp_path / "repo")
    service = start_service(tmp_path)
    try:
        run_killed(tmp_path, repo)
        at_death = _dead_rows(settings)
        assert at_death  # its start checkpoint
        # Another session edits the worktree at once, 20 times, its hooks
        # captured by the same service.
        for i in range(20):
            (repo / f"b{i}.txt").write_text(f"other session {i}\n")
            payload = hook_payload(repo, session_id="other", tool_use_id=f"o{i}",
                                   file_path=str(repo / f"b{i}.txt"))
            done = cli("snapshot-hook", input=json.dumps(payload))
            assert done.returncode == 0, done.stderr

        def ended() -> list[object]:
            with Runs(settings.database) as runs:
                return [e for e in runs.events("kw") if e.kind == "watch-ended"]

        event = wait_for(ended, timeout=30)[0]
        left = client.call(settings.socket_path, {"v": 1, "op": "watches"}, timeout_s=30)
    finally:
        service.stop()
    assert left["watches"] == []
    assert (event.node_id, event.detail["attempt"], event.detail["worktree"]) == (
        "dies_once", 1, str(repo))
    assert "is gone" in event.detail["reason"]
    assert _dead_rows(settings) == at_death  # 0 rows for the dead attempt after its death
    repo_git = checkpoints(repo)
    for commit in at_death:
        names = {e.name for e in repo_git[commit].peel(pygit2.Commit).tree}
        assert not any(n.startswith("b") for n in names), names
    with Runs(settings.database) as runs:
        assert len(runs.checkpoints("other")) == 20  # the other session's own record
    assert "watch of" in service.log() and "ended: its owner" in service.log()


def _run(settings: Settings, owner: Owner, clock: list[int]) -> AttemptKey:
    with Runs(settings.database, clock=lambda: clock[0]) as runs:
        claim = runs.create_run("r1", owner=owner, workflow_path="wf.py", repo_root="/x",
                                worktree=None, metadata_json="{}", plan_json="[]",
                                limits_json="{}")
        return runs.begin_attempt(claim, "task", 0, None)


def test_an_owner_elsewhere_is_gone_once_its_heartbeat_is_stale(settings: Settings) -> None:
    clock = [1_000_000]
    key = _run(settings, Owner("them", 4242, "another-host"), clock)
    owners = Owners(settings.database, clock=lambda: clock[0], stale_after_ms=60_000)
    try:
        assert owners.gone(key) is None
        clock[0] += 59_999
        assert owners.gone(key) is None
        clock[0] += 1
        assert "stopped beating 60s ago" in (owners.gone(key) or "")
        # a run the engine does not know (a `durability watch --run` of the
        # user's) is never ended here
        assert owners.gone(AttemptKey("not-an-engine-run", "n", 0, 1)) is None
    finally:
        owners.close()


def test_an_owner_on_this_machine_is_gone_with_its_process(settings: Settings) -> None:
    clock = [1_000_000]
    alive = _run(settings, Owner.this_process(), clock)
    owners = Owners(settings.database, clock=lambda: clock[0])
    try:
        assert owners.gone(alive) is None  # this test process: alive
        with Runs(settings.database) as runs:
            row = runs.get_run("r1")
        dead_pid = _a_dead_pid()
        from tests.helpers import state_write

        with state_write() as conn:
            conn.execute("UPDATE runs SET owner_pid=$1 WHERE run_id='r1'", (dead_pid,))
        assert f"(pid {dead_pid}) is gone" in (owners.gone(alive) or "")
        assert row.owner_pid == os.getpid()
    finally:
        owners.close()


def _a_dead_pid() -> int:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(30)
    return child.pid


def test_an_owner_on_this_machine_whose_process_lives_is_not_gone_on_a_stale_heartbeat(
        settings: Settings) -> None:
    # A laptop suspend or a long busy wait leaves the heartbeat old while the
    # owner still runs: on this machine its live process is the better answer.
    clock = [1_000_000]
    alive = _run(settings, Owner.this_process(), clock)
    owners = Owners(settings.database, clock=lambda: clock[0], stale_after_ms=60_000)
    try:
        clock[0] += 3_600_000
        assert owners.gone(alive) is None
        from tests.helpers import state_write

        # the same stale heartbeat from an owner on another machine is gone
        with state_write() as conn:
            conn.execute("UPDATE runs SET owner_host='another-host' WHERE run_id='r1'")
        assert "stopped beating 3600s ago" in (owners.gone(alive) or "")
    finally:
        owners.close()


def test_a_watch_parked_between_attempts_lives_with_its_run_and_ends_with_its_owner(
        tmp_path: Path, settings: Settings) -> None:
    """Decision 0056: a run's watch waits between two attempts, parked; the
    sweep leaves it while the run's owner lives (the attempt it last served
    is over), it records nothing in anyone's name while parked, the next
    attempt takes it over, and it ends once the run's owner is gone."""
    import threading
    import time

    from durability.capture.capturer import CaptureRequest, Outcome
    from durability.service.owners import WatchOwners
    from durability.watch.manager import WatchManager
    from durability.watch.watch import WatchSpec
    from tests.helpers import make_git_repo, state_write

    repo = make_git_repo(tmp_path / "repo").resolve()
    with Runs(settings.database) as runs:
        claim = runs.create_run("pk", owner=Owner.this_process(), workflow_path="wf.py",
                                repo_root="/x", worktree=str(repo), metadata_json="{}",
                                plan_json="[]", limits_json="{}")
        first = runs.begin_attempt(claim, "one", 0, str(repo))
    seen: list[CaptureRequest] = []

    def capture(request: CaptureRequest) -> Outcome:
        seen.append(request)
        return Outcome(request.request_id, len(seen), "0" * 40)

    owners = WatchOwners(Owners(settings.database), threading.Event())
    manager = WatchManager(capture=owners.capture(capture), settings=settings)
    owners.manager = manager
    try:
        watch = manager.add(WatchSpec(repo, first, settle_ms=50, max_delay_ms=1000),
                            record=False, baseline=False)
        (repo / "a.txt").write_text("the first attempt's\n")
        wait_for(lambda: len(seen) == 1)
        with Runs(settings.database) as runs:
            runs.complete_attempt(claim, first, "{}")
        read = manager.attempts()  # the sweep reads the watch as the first's ...
        manager.park(repo)
        # ... and must not end it once it is parked since.
        assert not manager.end_for(repo, first, read[0][3])
        assert owners.sweep() == 0 and manager.get(repo) is watch
        (repo / "parked.txt").write_text("between the attempts\n")
        time.sleep(0.5)  # ten settle times: nothing is captured for anyone
        assert len(seen) == 1
        with Runs(settings.database) as runs:
            second = runs.begin_attempt(claim, "two", 0, str(repo))
        assert manager.add(WatchSpec(repo, second, settle_ms=50, max_delay_ms=1000),
                           record=False, baseline=False, reuse=True) is watch
        (repo / "b.txt").write_text("the second attempt's\n")
        wait_for(lambda: len(seen) == 2)
        assert seen[1].key == second
        # What changed while parked is still staged (a superset is safe).
        assert seen[1].changed_paths is not None
        assert {"parked.txt", "b.txt"} <= set(seen[1].changed_paths)
        with Runs(settings.database) as runs:
            runs.complete_attempt(claim, second, "{}")
        manager.park(repo)
        with state_write() as conn:
            conn.execute("UPDATE runs SET owner_pid=$1 WHERE run_id='pk'", (_a_dead_pid(),))
        assert owners.sweep() == 1 and manager.get(repo) is None
    finally:
        manager.close(final=False)
        owners.owners.close()
    with Runs(settings.database) as runs:
        ended = [e for e in runs.events("pk") if e.kind == "watch-ended"]
    assert [(e.node_id, e.detail["attempt"]) for e in ended] == [("two", 1)]
    assert "is gone (parked between attempts)" in ended[0].detail["reason"]
    assert len(seen) == 2
