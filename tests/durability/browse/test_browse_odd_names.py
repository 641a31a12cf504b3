"""``durability browse`` with what comes from outside: a worktree's path
holding Rich markup (``[/x]``, ``[red]``) is text, never markup that hides
part of it or stops the browser; a label's control characters are escaped in
the restore question; a diff line of megabytes is cut in the pane."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from durability.backends.git import forget
from durability.browse.app import BrowseApp, ConfirmRestore, SessionsScreen
from durability.config import Settings
from tests.helpers import cli_json, make_git_repo

RUN = "sess-odd"


@pytest.mark.parametrize("folder", ["wip [/x] proj", "[red]proj"])
def test_a_worktree_path_with_markup_is_shown_as_it_is(tmp_path: Path, settings: Settings,
                                                        folder: str) -> None:
    repo = make_git_repo(tmp_path / folder).resolve()
    try:
        (repo / "a.txt").write_text("one\n")
        cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
        app = BrowseApp(settings)
        shown: list[str] = []

        async def run() -> None:
            async with app.run_test(size=(200, 30)) as pilot:
                await pilot.pause()
                assert isinstance(app.screen, SessionsScreen)
                table = app.screen.query_one("#sessions", DataTable)
                row = table.get_row_at(0)
                # What the table draws for the cell, not only what it holds.
                shown.append(table._get_row_renderables(0).cells[-1].plain)  # type: ignore[union-attr]
                shown.append(str(row[-1]))

        asyncio.run(run())
        assert shown == [str(repo), str(repo)]
    finally:
        forget(repo)


def test_the_restore_question_escapes_control_characters(tmp_path: Path,
                                                         settings: Settings) -> None:
    """A label (a hook's, the agent's words) holding ESC is shown escaped in
    the confirmation, as in the timeline: it never reaches the terminal."""
    repo = make_git_repo(tmp_path / "repo").resolve()
    try:
        (repo / "a.txt").write_text("one\n")
        cli_json("snapshot", str(repo), "--run", RUN, "--node", "n", "--label",
                 "evil\x1b[2J\x1b]0;owned\x07")
        app = BrowseApp(settings, RUN)
        asked: list[str] = []

        async def run() -> None:
            async with app.run_test(size=(200, 30)) as pilot:
                await pilot.pause()
                await app.workers.wait_for_complete()  # the timeline is read in a worker
                await pilot.pause()
                await pilot.press("r")
                await pilot.pause()
                assert isinstance(app.screen, ConfirmRestore)
                asked.append(str(app.screen.query_one("#question", Static).content))
                await pilot.press("n")
                await pilot.pause()
                await app.workers.wait_for_complete()

        asyncio.run(run())
        assert "\x1b" not in asked[0] and "\x07" not in asked[0], asked
        assert "evil\\x1b[2J\\x1b]0;owned\\x07" in asked[0], asked
    finally:
        forget(repo)


def test_a_diff_line_of_megabytes_is_cut_in_the_pane(tmp_path: Path, settings: Settings) -> None:
    """A minified bundle is one line of megabytes: the pane shows its first
    DIFF_LINE_CHARS characters and says how many more there are (laying out
    2 MB in one line held the browser for seconds each time it was shown)."""
    from durability.browse import model
    from durability.store import Store

    repo = make_git_repo(tmp_path / "repo").resolve()
    try:
        (repo / "a.txt").write_text("one\n")
        cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
        (repo / "bundle.js").write_text("var a=1;" * 250_000 + "\n")
        cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
        with Store(settings.database) as store:
            shown = model.diff_text(store, store.checkpoints(RUN)[-1])
    finally:
        forget(repo)
    long = [ln for ln in shown.splitlines() if ln.startswith("+var a=1;")]
    assert len(long) == 1
    assert len(long[0]) < model.DIFF_LINE_CHARS + 100
    assert long[0].endswith(f"... {2_000_001 - model.DIFF_LINE_CHARS:,} more characters")
