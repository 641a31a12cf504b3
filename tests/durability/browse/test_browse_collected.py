"""``durability browse`` lists the tool calls whose checkpoint gc collected
(decision 0061) where they happened, on real git and jj repositories with
boundaries recorded by the real hook and a real gc: marked ``GC``, no diff,
no restore (``r`` says why, nothing changes), and ``w`` rewinds the
conversation alone, after a confirmation that says the files stay."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from durability.browse.app import BrowseApp, ConfirmRewind, TimelineScreen
from durability.browse.model import timeline_rows
from durability.config import Settings
from durability.store import Store
from tests.durability.rewind.test_rewind_after_gc import SESSION, _gc, _session
from tests.helpers import tree_manifest


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_the_model_lists_collected_calls_without_a_restore(tmp_path: Path, kind: str) -> None:
    _session(tmp_path, kind)
    settings = Settings.from_env()
    with Store(settings.database) as store:
        _gc(settings, store)
        rows = timeline_rows(store, SESSION)
    assert [(r.cells[0], r.checkpoint is not None, r.collected is not None) for r in rows] == [
        ("4", True, False), *(("GC", False, True),) * 4]
    [kept, *calls] = rows
    assert [b.seq for b in kept.boundaries] == [5] and kept.collected is None
    # Nothing to restore or diff: no checkpoint, no boundary standing in for one.
    assert all(r.checkpoint is None and r.boundaries == () for r in calls)
    assert [(r.collected.seq, r.collected.tool_use_id, r.collected.checkpoint_seq)
            for r in calls if r.collected] == [(4, "t4", 3), (3, "t3", 2), (2, "t2", 1),
                                              (1, "t1", 1)]
    assert [r.cells[3:] for r in calls] == [
        ("call", "collected",
         f"{tool} {call}: checkpoint collected by gc, files not restorable [calls {seq}]")
        for seq, call, tool in ((4, "t4", "Write"), (3, "t3", "Write"), (2, "t2", "Read"),
                                (1, "t1", "Write"))]
    assert len({r.key for r in rows}) == len(rows)


def test_r_refuses_and_w_rewinds_the_conversation_only(tmp_path: Path) -> None:
    repo, path = _session(tmp_path, "git")
    settings = Settings.from_env()
    with Store(settings.database) as store:
        _gc(settings, store)
        recorded = store.checkpoints(SESSION)
    (repo / "f4.txt").write_text("changed since\n")
    before = tree_manifest(repo)
    app = BrowseApp(settings, SESSION)

    async def run() -> None:
        async with app.run_test(size=(200, 40)) as pilot:
            await _settled(pilot)
            table = app.screen.query_one("#timeline", DataTable)
            cells = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
            assert [r[0] for r in cells] == ["4", "GC", "GC", "GC", "GC"]
            await pilot.press("down", "down", "down")  # t2, the Read
            await _settled(pilot)
            assert app.diff.startswith(f"GC: boundary seq 2 of session {SESSION}, tool call "
                                       "t2 (Read): gc collected its checkpoint (seq 1 of "
                                       "session/0/1)"), app.diff
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, TimelineScreen)
            assert app.status == ("gc collected the checkpoint of call seq 2: its files "
                                  "cannot be restored (w rewinds its conversation only)")
            await pilot.press("w")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmRewind) and app.screen.conversation_only
            assert app.screen.target.seq == 2
            assert "the files stay as they are" in app.screen.question()
            await pilot.press("y")
            await _settled(pilot)
            assert isinstance(app.screen, TimelineScreen)
            assert app.status.startswith("rewound the conversation to boundary 2 (t2); the "
                                         "files are unchanged"), app.status
            assert "claude --resume" in app.status

    asyncio.run(run())
    assert tree_manifest(repo) == before  # no restore, no pre-restore write either
    with Store(settings.database) as store:
        assert store.checkpoints(SESSION) == recorded
    new = [p for p in path.parent.iterdir() if p != path]
    assert len(new) == 1  # the new session, ending with t2's result
    last = json.loads(new[0].read_text().splitlines()[-1])
    assert last["message"]["content"][0]["tool_use_id"] == "t2"


async def _settled(pilot: Pilot[None]) -> None:
    """The timeline and the diff pane are read in workers: wait for both."""
    for _ in range(3):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
