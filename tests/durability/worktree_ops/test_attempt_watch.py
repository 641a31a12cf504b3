"""An attempt's watch (issue 25): armed without a baseline capture (the
attempt's start capture is that), ended without a final capture (the
attempt's end capture, taken after the watch ended, answers everything it
heard), through the service and in process; what the watch hears while the
attempt runs is still captured in the attempt's name, and nothing is left
behind: no watch, no open settle window, no gap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.config import Settings
from durability.ground import client
from durability.store import AttemptKey, Store
from durability.worktree_ops.attempt_watch import AttemptWatches
from tests.helpers import make_git_repo, make_jj_repo, wait_for


def _labels(settings: Settings, key: AttemptKey) -> list[tuple[str, str | None]]:
    with Store(settings.database) as store:
        return [(c.source, c.label) for c in store.checkpoints(key.run_id)]


def _files(settings: Settings, key: AttemptKey, worktree: Path) -> set[str]:
    """The files of the attempt's last checkpoint."""
    import pygit2

    from durability.inspect.repository import open_checkpoints

    with Store(settings.database) as store:
        last = store.checkpoints(key.run_id)[-1]
    tree = open_checkpoints(worktree)[last.commit_id].peel(pygit2.Commit).tree
    return {e.name for e in tree}


def _nothing_left(settings: Settings, key: AttemptKey) -> None:
    windows = settings.window_dir
    assert not windows.exists() or os.listdir(windows) == []
    with Store(settings.database) as store:
        assert store.gaps(key.run_id) == []


def _attempt(settings: Settings, repo: Path, key: AttemptKey) -> None:
    watches = AttemptWatches(settings)
    with watches.around(key, str(repo)):
        (repo / "during.txt").write_text("written while the attempt runs\n")
        # The watch records it in the attempt's name (a settle capture) ...
        wait_for(lambda: ("watch", "watch settle") in _labels(settings, key), timeout=60)
        # ... and what comes after its last capture is the end capture's.
        (repo / "last.txt").write_text("written just before the attempt ends\n")
    watches.close_run(key.run_id)  # the run's drive is over: its parked watch ends


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_through_the_service_the_start_and_end_captures_stand_for_the_watch_s_own(
        tmp_path: Path, settings: Settings, service_inprocess: object, kind: str) -> None:
    repo = (make_git_repo(tmp_path / "repo") if kind == "git"
            else make_jj_repo(tmp_path / "repo")).resolve()
    key = AttemptKey("served", "task", 0, 1)
    _attempt(settings, repo, key)
    # No "watch baseline" before the watch's settle capture, no "watch final" after the end.
    assert _labels(settings, key) == [("attempt", "attempt start"), ("watch", "watch settle"),
                                      ("attempt", "attempt end")]
    assert {"during.txt", "last.txt"} <= _files(settings, key, repo)
    answer = client.call(settings.socket_path, {"v": 1, "op": "watches"}, timeout_s=30)
    assert answer["watches"] == []
    _nothing_left(settings, key)


def test_without_a_service_the_watch_in_process_does_the_same(
        tmp_path: Path, settings: Settings) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    key = AttemptKey("local", "task", 0, 1)
    _attempt(settings, repo, key)
    assert _labels(settings, key) == [("attempt", "attempt start"), ("watch", "watch settle"),
                                      ("attempt", "attempt end")]
    assert {"during.txt", "last.txt"} <= _files(settings, key, repo)
    _nothing_left(settings, key)


def test_a_plain_unwatch_still_takes_its_final_capture(
        tmp_path: Path, settings: Settings, service_inprocess: object) -> None:
    """The engine's shortcut is asked for; a user's `unwatch` is unchanged."""
    from durability.watch.foreground import request_unwatch, request_watch
    from durability.watch.watch import WatchSpec

    repo = make_git_repo(tmp_path / "repo").resolve()
    key = AttemptKey("user", "watch", 0, 1)
    request_watch(settings, WatchSpec(repo, key, settle_ms=5_000, max_delay_ms=5_000))
    wait_for(lambda: ("watch", "watch settle") in _labels(settings, key), timeout=60)
    (repo / "unsettled.txt").write_text("not settled when the watch ends\n")
    answer = request_unwatch(settings, repo)
    assert answer["final"] is not None
    assert _labels(settings, key)[-1] == ("watch", "watch final")
    assert "unsettled.txt" in _files(settings, key, repo)


def _two_attempts(settings: Settings, repo: Path, watches: AttemptWatches,
                  between: list[object]) -> tuple[AttemptKey, AttemptKey]:
    """Two attempts of one run in ``repo``, one after the other; a file
    written between them (no attempt runs), and what ``watches_now`` sees
    then appended to ``between``."""
    first, second = AttemptKey("kept", "one", 0, 1), AttemptKey("kept", "two", 0, 1)
    for key in (first, second):
        with watches.around(key, str(repo)):
            (repo / f"{key.node_id}.txt").write_text("written while the attempt runs\n")
            wait_for(lambda k=key: _settles(settings, k) == 1, timeout=60)
        if key == first:
            (repo / "between.txt").write_text("written between the two attempts\n")
            between.append(_watches_now(settings))
            # Longer than the settle time: a parked watch captures for nobody.
            import time

            time.sleep(0.6)
    return first, second


def _settles(settings: Settings, key: AttemptKey) -> int:
    with Store(settings.database) as store:
        return sum(1 for c in store.checkpoints(key.run_id)
                   if (c.node_id, c.label) == (key.node_id, "watch settle"))


def _watches_now(settings: Settings) -> list[dict[str, object]]:
    try:
        return client.call(settings.socket_path, {"v": 1, "op": "watches"},  # type: ignore[no-any-return]
                           timeout_s=30)["watches"]
    except Exception:
        return []


def _by_node(settings: Settings, run_id: str) -> list[tuple[str, str | None]]:
    with Store(settings.database) as store:
        return [(c.node_id, c.label) for c in store.checkpoints(run_id)]


def _tree(settings: Settings, worktree: Path, node_id: str, label: str) -> set[str]:
    import pygit2

    from durability.inspect.repository import open_checkpoints

    with Store(settings.database) as store:
        found = [c for c in store.checkpoints("kept") if (c.node_id, c.label) == (node_id, label)]
    tree = open_checkpoints(worktree)[found[-1].commit_id].peel(pygit2.Commit).tree
    return {e.name for e in tree}


@pytest.mark.parametrize("carried", [True, False], ids=["carried", "older-service"])
def test_through_the_service_one_watch_serves_the_attempts_of_a_run(
        tmp_path: Path, settings: Settings, service_inprocess: object, carried: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``carried``: the watch steps ride on the start and end captures (no
    request of their own); ``older-service``: a service that ignores the
    capture's ``watch`` field, where the engine asks for each step itself."""
    import json

    from durability.service import watch_ops
    from durability.service.server import Service

    service = service_inprocess
    assert isinstance(service, Service) and service.watcher is not None
    if not carried:
        monkeypatch.setattr(watch_ops, "around_capture", lambda _m, _r, capture: capture())
    repo = make_git_repo(tmp_path / "repo").resolve()
    watches = AttemptWatches(settings)
    armed: list[object] = []
    real_add = service.watcher.add

    def counting_add(spec: object, **kw: object) -> object:
        watch = real_add(spec, **kw)  # type: ignore[arg-type]
        armed.append(watch)
        return watch

    service.watcher.add = counting_add  # type: ignore[method-assign]
    ops: list[str] = []
    real_handle = service.handle

    def recording_handle(line: bytes) -> dict[str, object]:
        ops.append(json.loads(line)["op"])
        return real_handle(line)

    service.handle = recording_handle  # type: ignore[method-assign]
    between: list[object] = []
    first, second = _two_attempts(settings, repo, watches, between)
    asked = [op for op in ops if op in ("watch", "unwatch")]
    # Carried: no watch request of their own (the extra captures of a
    # service that carries none are the end captures taken again).
    assert asked == ([] if carried else ["watch", "unwatch", "watch", "unwatch"])
    # Between the attempts the service kept the watch, parked, for the first.
    assert [(w["node_id"], w["parked"]) for w in between[0]] == [("one", True)]  # type: ignore[index, union-attr]
    during = _watches_now(settings)
    watches.close_run("kept")
    # One watch, armed once, taken over by the second attempt.
    assert len({id(w) for w in armed}) == 1 and len(armed) == 2
    assert [(w["node_id"], w["parked"]) for w in during] == [("two", True)]
    # Each attempt: start and its own settle capture (the end captures find
    # the tree the settle capture took); nothing of the watch's between them.
    assert _by_node(settings, "kept") == [
        ("one", "attempt start"), ("one", "watch settle"),
        ("two", "attempt start"), ("two", "watch settle")]  # the end captures dedup
    # The file written between them is the second attempt's starting tree,
    # and not in the first's last checkpoint.
    assert "between.txt" not in _tree(settings, repo, "one", "watch settle")
    assert "between.txt" in _tree(settings, repo, "two", "attempt start")
    assert _watches_now(settings) == []
    _nothing_left(settings, first)
    _nothing_left(settings, second)


def test_without_a_service_one_watch_in_process_serves_the_attempts_of_a_run(
        tmp_path: Path, settings: Settings) -> None:
    from durability.worktree_ops import attempt_watch

    repo = make_git_repo(tmp_path / "repo").resolve()
    watches = AttemptWatches(settings)
    made: list[object] = []
    real = attempt_watch._LocalWatcher

    def counting(*args: object) -> object:
        made.append(real(*args))  # type: ignore[arg-type]
        return made[-1]

    attempt_watch._LocalWatcher = counting  # type: ignore[assignment, misc]
    try:
        first, second = _two_attempts(settings, repo, watches, [])
    finally:
        attempt_watch._LocalWatcher = real  # type: ignore[misc]
    local = made[0]
    assert len(made) == 1 and isinstance(local, real)
    assert [w["node_id"] for w in local.manager.list()] == ["two"]
    watches.close_run("kept")
    assert local.manager.list() == []
    assert _by_node(settings, "kept") == [
        ("one", "attempt start"), ("one", "watch settle"),
        ("two", "attempt start"), ("two", "watch settle")]  # the end captures dedup
    assert "between.txt" not in _tree(settings, repo, "one", "watch settle")
    assert "between.txt" in _tree(settings, repo, "two", "attempt start")
    _nothing_left(settings, first)
    _nothing_left(settings, second)


def test_a_run_s_end_leaves_another_run_s_watch_alone(
        tmp_path: Path, settings: Settings, service_inprocess: object) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    watches = AttemptWatches(settings)
    with watches.around(AttemptKey("ours", "task", 0, 1), str(repo)):
        pass
    watches.close_run("theirs")
    assert [w["run_id"] for w in _watches_now(settings)] == ["ours"]
    watches.close_run("ours")
    assert _watches_now(settings) == []


def test_an_attempt_ends_or_parks_only_its_own_watch(
        tmp_path: Path, settings: Settings, service_inprocess: object) -> None:
    """Another owner of the run (a forced resume) took the watch over: the
    old owner's park and end leave it as it is."""
    from durability.watch.foreground import request_unwatch, request_watch
    from durability.watch.watch import WatchSpec

    repo = make_git_repo(tmp_path / "repo").resolve()
    old, new = AttemptKey("taken", "task", 0, 1), AttemptKey("taken", "task", 0, 2)
    request_watch(settings, WatchSpec(repo, old), baseline=False)
    assert request_watch(settings, WatchSpec(repo, new), baseline=False,
                         reuse=True)["reused"] is True
    parked = request_unwatch(settings, repo, final=False, keep=True, key=old)
    ended = request_unwatch(settings, repo, final=False, key=old)
    assert (parked["parked"], parked["left"], ended["left"]) == (False, True, True)
    assert [(w["attempt"], w["parked"]) for w in _watches_now(settings)] == [(2, False)]
    assert request_unwatch(settings, repo, final=False, keep=True, key=new)["parked"] is True
    assert request_unwatch(settings, repo, final=False, key=new)["final"] is None
    assert _watches_now(settings) == []
    _nothing_left(settings, new)


def test_a_service_restarted_while_the_watch_is_parked_records_nothing_for_the_ended_attempt(
        tmp_path: Path, settings: Settings) -> None:
    """The parked watch's row still names the attempt that ended: a
    restarted service takes it up, the owner sweep ends it (that attempt is
    finished), and the run's next attempt arms a watch of its own."""
    from durability.runs.fence import Owner
    from durability.runs.run_rows import Runs
    from durability.service.server import Service

    repo = make_git_repo(tmp_path / "repo").resolve()
    with Runs(settings.database) as runs:
        claim = runs.create_run("rs", owner=Owner.this_process(), workflow_path="wf.py",
                                repo_root="/x", worktree=str(repo), metadata_json="{}",
                                plan_json="[]", limits_json="{}")
        first = runs.begin_attempt(claim, "one", 0, str(repo))
    watches = AttemptWatches(settings)
    with Service(settings):
        with watches.around(first, str(repo)):
            (repo / "one.txt").write_text("the first attempt's\n")
        with Runs(settings.database) as runs:
            runs.complete_attempt(claim, first, "{}")
        assert [w["parked"] for w in _watches_now(settings)] == [True]
    (repo / "meanwhile.txt").write_text("while no service runs\n")
    with Service(settings):
        with Runs(settings.database) as runs:
            wait_for(lambda: [e for e in runs.events("rs") if e.kind == "watch-ended"])
            ended = [e for e in runs.events("rs") if e.kind == "watch-ended"]
            second = runs.begin_attempt(claim, "two", 0, str(repo))
        with watches.around(second, str(repo)):
            assert [(w["node_id"], w["parked"]) for w in _watches_now(settings)] == [
                ("two", False)]
        watches.close_run("rs")
        assert _watches_now(settings) == []
    assert [(e.node_id, e.detail["reason"]) for e in ended] == [
        ("one", "the attempt is succeeded")]
    # Nothing in the ended attempt's name after its end; the file written
    # meanwhile is the next attempt's starting tree.
    assert [label for node, label in _by_node(settings, "rs") if node == "one"] == [
        "attempt start", "attempt end"]
    with Store(settings.database) as store:
        start = next(c for c in store.checkpoints("rs") if c.node_id == "two")
    import pygit2

    from durability.inspect.repository import open_checkpoints

    tree = open_checkpoints(repo)[start.commit_id].peel(pygit2.Commit).tree
    assert "meanwhile.txt" in {e.name for e in tree}
