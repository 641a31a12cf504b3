"""``durability browse`` reads a session's timeline in a Textual worker, as
it reads a diff: a session of thousands of checkpoints (each one's totals
against its base) must not hold the event loop.  Driven by Textual's pilot
on a real git repository and store; the only stand-in is a gate in front of
``model.timeline_rows`` (ours), which holds the read as a long one would."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from durability.backends.git import forget
from durability.browse import model
from durability.browse.app import BrowseApp, SessionsScreen, TimelineScreen
from durability.config import Settings
from durability.store import Store
from tests.helpers import cli_json, make_git_repo

RUN = "sess-slow"


class Gate:
    """``model.timeline_rows``, held until released (20 s at most: on code
    that reads on the event loop the test then fails instead of hanging; not
    less, or a loaded machine's slow key press lets the read go early)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()
        self.threads: list[int] = []
        self._real = model.timeline_rows

    def __call__(self, store: Store, run_id: str,
                 env: Mapping[str, str] = os.environ) -> list[model.Row]:
        self.threads.append(threading.get_ident())
        self.entered.set()
        self.release.wait(20)
        try:
            return self._real(store, run_id, env)
        finally:
            self.returned.set()


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gate:
    repo = make_git_repo(tmp_path / "repo").resolve()
    (repo / "a.txt").write_text("one\n")
    cli_json("snapshot", str(repo), "--run", RUN, "--node", "n", "--label", "only")
    forget(repo)
    held = Gate()
    monkeypatch.setattr(model, "timeline_rows", held)
    return held


def _drive(app: BrowseApp, scenario: object) -> None:
    async def run() -> None:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.pause()
            await scenario(pilot)  # type: ignore[operator]
            await pilot.app.workers.wait_for_complete()

    asyncio.run(run())


async def _entered(gate: Gate) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if gate.entered.is_set():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the timeline was never read")


def test_the_browser_answers_while_the_timeline_is_read(gate: Gate,
                                                        settings: Settings) -> None:
    app = BrowseApp(settings)

    async def scenario(pilot: Pilot[None]) -> None:
        loop_thread = threading.get_ident()
        await pilot.press("enter")
        await _entered(gate)
        await pilot.pause()
        # The read is still held, and the screen is drawn and says so.
        assert not gate.release.is_set()
        assert isinstance(app.screen, TimelineScreen)
        assert app.diff.startswith(f"reading the timeline of session {RUN}")
        assert app.screen.query_one("#timeline", DataTable).row_count == 0
        gate.release.set()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one("#timeline", DataTable)
        assert [str(table.get_row_at(i)[-1]) for i in range(table.row_count)] == ["only"]
        assert app.diff.startswith("seq 1 is the first checkpoint")
        assert gate.threads and loop_thread not in gate.threads

    _drive(app, scenario)


def test_leaving_while_the_timeline_is_read_goes_back_at_once(gate: Gate,
                                                               settings: Settings) -> None:
    app = BrowseApp(settings, RUN)

    async def scenario(pilot: Pilot[None]) -> None:
        await _entered(gate)
        await pilot.press("escape")
        await pilot.pause()
        assert not gate.returned.is_set()  # escape was answered while the read is held
        assert isinstance(app.screen, SessionsScreen)
        gate.release.set()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)  # the late rows went nowhere

    _drive(app, scenario)
