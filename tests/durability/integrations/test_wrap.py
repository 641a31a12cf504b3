"""The in-process wrapper: captures after every wrapped tool call, on the
ambient attempt of the thread or task that made it."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import durability
from durability.config import Settings
from durability.gaps.ingest import ingest_spool
from durability.ground.errors import InvalidInput, NotARepo
from durability.service.server import Service
from durability.store import Checkpoint, Store
from tests import pg
from tests.helpers import jj, make_jj_repo


def _rows(settings: Settings, run_id: str = "run-1") -> list[Checkpoint]:
    found = pg.existing_store()
    if found is None:
        return []
    with found as store:
        return store.checkpoints(run_id)


def _files(repo: Path, commit: str) -> set[str]:
    return set(jj(repo, "file", "list", "-r", commit).stdout.split())


@durability.durable_tool
def write_file(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    return name


class ToolFailed(Exception):
    pass


@durability.durable_tool(name="flaky")
def half_write(repo: Path) -> None:
    (repo / "half.txt").write_text("half\n")
    raise ToolFailed("boom")


@durability.durable_tool
async def async_write(repo: Path, name: str) -> str:
    await asyncio.sleep(0)
    (repo / name).write_text(name)
    return name


def test_a_call_is_captured_with_the_tool_name_and_a_call_id(
        service_inprocess: Service, settings: Settings, repo: Path) -> None:
    with durability.attempt("run-1", "task", worktree=repo, attempt=2):
        assert write_file(repo, "a.txt", "a") == "a.txt"
    [row] = _rows(settings)
    assert (row.node_id, row.attempt, row.source, row.label) == ("task", 2, "wrap", "write_file")
    assert row.tool_use_id and row.request_id == f"wrap-{row.tool_use_id}"
    assert "a.txt" in _files(repo, row.commit_id)
    assert service_inprocess.coalescer is not None and service_inprocess.coalescer.captures == 1


def test_a_raising_tool_is_captured_and_its_exception_propagates(
        settings: Settings, repo: Path) -> None:
    with durability.attempt("run-1", "task", worktree=repo), \
            pytest.raises(ToolFailed, match="boom") as raised:
        half_write(repo)
    assert raised.type is ToolFailed
    [row] = _rows(settings)  # no service here: captured in this process
    assert row.label == "flaky"
    assert "half.txt" in _files(repo, row.commit_id)


@pytest.mark.sqlite_file
def test_outside_an_attempt_the_tool_is_only_called(settings: Settings, repo: Path) -> None:
    assert durability.current_attempt() is None
    assert write_file(repo, "plain.txt", "x") == "plain.txt"
    assert asyncio.run(async_write(repo, "plain2.txt")) == "plain2.txt"
    assert not settings.db_path.exists()
    assert not settings.spool_dir.exists()


def test_threads_started_inside_capture_on_the_right_attempt(settings: Settings,
                                                             repo: Path) -> None:
    with durability.attempt("run-1", "threaded", worktree=repo):
        t = durability.Thread(target=write_file, args=(repo, "t1.txt", "1"))
        t.start()
        t.join()
        with ThreadPoolExecutor(max_workers=2) as pool:
            pool.submit(durability.bind_context(write_file), repo, "t2.txt", "2").result()
        # A plain thread does not copy the context (documented): no capture.
        plain = threading.Thread(target=write_file, args=(repo, "t3.txt", "3"))
        plain.start()
        plain.join()
    rows = _rows(settings)
    assert [r.node_id for r in rows] == ["threaded", "threaded"]
    assert {"t1.txt", "t2.txt"} <= _files(repo, rows[-1].commit_id)


def test_asyncio_tasks_keep_their_own_attempts(settings: Settings, tmp_path: Path) -> None:
    repos = [make_jj_repo(tmp_path / f"r{i}") for i in range(2)]

    async def agent(i: int) -> None:
        with durability.attempt("run-1", f"node{i}", worktree=repos[i]):
            await asyncio.gather(*(asyncio.create_task(async_write(repos[i], f"f{j}.txt"))
                                   for j in range(3)))

    async def main() -> None:
        await asyncio.gather(agent(0), agent(1))

    asyncio.run(main())
    rows = _rows(settings)
    for i in range(2):
        mine = [r for r in rows if r.node_id == f"node{i}"]
        assert mine and all(r.worktree == str(repos[i].resolve()) for r in mine)
        assert {"f0.txt", "f1.txt", "f2.txt"} <= _files(repos[i], mine[-1].commit_id)
        assert all(r.label == "async_write" for r in mine)


def test_a_failed_capture_is_a_gap_not_an_error(settings: Settings, tmp_path: Path) -> None:
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    with durability.attempt("run-1", "task", worktree=plain):
        assert write_file(plain, "x.txt", "x") == "x.txt"
    with Store(settings.database) as store:
        ingest_spool(store, settings.spool_dir)
        [gap] = store.gaps("run-1")
    assert (gap.reason, gap.source) == (NotARepo.code, "wrap")


def test_bad_ids_are_refused_at_once(repo: Path) -> None:
    with pytest.raises(InvalidInput), \
            durability.attempt("../etc", "n", worktree=repo):
        pass


class AsyncWriter:
    """A tool object (as frameworks define them) whose work happens when awaited."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    async def __call__(self, name: str) -> str:
        await asyncio.sleep(0)
        (self.repo / name).write_text(name)
        return name


def test_an_async_callable_object_is_captured_after_its_await(
        settings: Settings, repo: Path) -> None:
    tool = durability.durable_tool(AsyncWriter(repo))
    with durability.attempt("run-1", "task", worktree=repo):
        assert asyncio.run(tool("late.txt")) == "late.txt"
    [row] = _rows(settings)
    assert row.label == "AsyncWriter"
    assert "late.txt" in _files(repo, row.commit_id)
