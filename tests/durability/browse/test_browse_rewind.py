"""``browse``'s rewind key (w): each checkpoint's label ends with its
boundaries' seqs (``[calls 1 2]``); w on a checkpoint rewinds to the newest tool call whose
boundary it is, after a confirmation (durability/browse/app.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable

from durability.browse.app import BrowseApp, ConfirmRewind, TimelineScreen
from durability.config import Settings
from tests.durability.rewind.test_rewind import SESSION, _session


def test_rewind_from_the_timeline(tmp_path: Path) -> None:
    repo, path = _session(tmp_path)
    app = BrowseApp(Settings.from_env(), SESSION)

    async def run() -> None:
        async with app.run_test(size=(160, 40)) as pilot:
            for _ in range(3):
                await pilot.pause()
                await pilot.app.workers.wait_for_complete()
            table = app.screen.query_one("#timeline", DataTable)
            rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
            # Newest first: the Bash's checkpoint is call 3's, the Write's calls 1 and 2's.
            assert [(r[0], r[-1]) for r in rows] == [("2", "Bash true [calls 3]"),
                                                     ("1", "Write [calls 1 2]")]
            await pilot.press("down")
            await pilot.press("w")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmRewind)
            assert (app.screen.target.seq, app.screen.target.tool_use_id) == (2, "t2")
            await pilot.press("y")
            for _ in range(3):
                await pilot.pause()
                await pilot.app.workers.wait_for_complete()
            assert isinstance(app.screen, TimelineScreen)
            assert "rewound to boundary 2 (t2)" in app.status, app.status
            assert "claude --resume" in app.status and "Undo the files" in app.status

    asyncio.run(run())
    assert (repo / "a.txt").read_text() == "a\n"
    assert len(list(path.parent.iterdir())) == 2  # the original and the new session
