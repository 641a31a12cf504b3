"""``durability browse`` driven headless by Textual's own pilot
(``App.run_test``) on real jj and git repositories with real checkpoints
(taken by the installed command): the sessions list, a session's timeline
with its gap marked, the diff of the highlighted checkpoint, a restore after
the confirmation (the tree changes, a pre-restore checkpoint is named as the
undo), a cancelled and a refused one (nothing changes), an empty store; and
the installed command itself on a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from durability.backends.git import forget
from durability.browse.app import BrowseApp, ConfirmRestore, SessionsScreen, TimelineScreen
from durability.config import Settings
from durability.store import Store
from tests.helpers import (
    cli,
    cli_json,
    durability_exe,
    make_git_repo,
    make_jj_repo,
    tree_manifest,
)

RUN = "sess-browse"


@pytest.fixture(params=["jj", "git"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A worktree with two checkpoints of RUN (seq 2 adds a line and a file)
    and a gap of RUN (a capture of a folder that is no repository)."""
    repo = (make_jj_repo(tmp_path / "repo") if request.param == "jj"
            else make_git_repo(tmp_path / "repo")).resolve()
    request.addfinalizer(lambda: forget(repo))
    (repo / "a.txt").write_text("one\n")
    cli_json("snapshot", str(repo), "--run", RUN, "--node", "n", "--label", "first")
    (tmp_path / "plain").mkdir()
    failed = cli("snapshot", str(tmp_path / "plain"), "--run", RUN, "--node", "n")
    assert failed.returncode != 0  # filed as a gap of RUN
    (repo / "a.txt").write_text("one\ntwo\n")
    (repo / "b.txt").write_text("new file\n")
    cli_json("snapshot", str(repo), "--run", RUN, "--node", "n", "--label", "second")
    return repo


def _drive(app: BrowseApp, scenario: Callable[[Pilot[None]], Awaitable[None]]) -> None:
    async def run() -> None:
        async with app.run_test(size=(160, 40)) as pilot:
            await _settled(pilot)  # a timeline opened at start is read in a worker
            await scenario(pilot)
            await pilot.app.workers.wait_for_complete()

    asyncio.run(run())


async def _settled(pilot: Pilot[None]) -> None:
    """Wait for the timeline and the diff being read in their threads to
    reach the panes (the timeline's rows then start the diff's worker)."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def _labels(app: BrowseApp) -> list[str]:
    """The LABEL column of the timeline, top to bottom."""
    table = app.screen.query_one("#timeline", DataTable)
    return [str(table.get_row_at(i)[-1]) for i in range(table.row_count)]


async def _go_to(pilot: Pilot[None], label: str) -> None:
    """Move the timeline's cursor down to the row labelled ``label``, by key."""
    for _ in range(_labels(pilot.app).index(label)):  # type: ignore[arg-type]
        await pilot.press("down")
    await pilot.pause()


def test_navigate_sessions_timeline_and_diff(session: Path, settings: Settings) -> None:
    app = BrowseApp(settings)

    async def scenario(pilot: Pilot[None]) -> None:
        assert isinstance(app.screen, SessionsScreen)
        sessions = app.screen.query_one("#sessions", DataTable)
        assert sessions.row_count == 1 and str(sessions.get_row_at(0)[0]) == RUN
        await pilot.press("enter")
        await _settled(pilot)
        assert isinstance(app.screen, TimelineScreen)
        table = app.screen.query_one("#timeline", DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [r[0] for r in rows] == ["2", "GAP", "1"]  # newest first, the gap marked
        assert rows[0][4] == "2 files +13 B" and rows[1][4] == "not captured"
        # The newest checkpoint is highlighted: its diff is shown.
        assert "+two" in app.diff and "+new file" in app.diff
        assert app.diff.startswith("seq 2: +2 -0, 2 files against seq 1")
        await pilot.press("down")
        await pilot.pause()
        assert app.diff.startswith("GAP: a capture that could not be taken")
        await pilot.press("down")
        await _settled(pilot)
        assert "seq 1 is the first checkpoint" in app.diff
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)

    _drive(app, scenario)


def _fits(table: DataTable[object]) -> None:
    """Every column of the table is at least as wide as its widest cell, as
    the table stands now (no idle pass of Textual's in between)."""
    assert table.row_count > 0
    widest = [max(len(str(table.get_row_at(r)[c])) for r in range(table.row_count))
              for c in range(len(table.columns))]
    drawn = [col.get_render_width(table) - 2 * table.cell_padding
             for col in table.ordered_columns]
    assert all(d >= w for d, w in zip(drawn, widest, strict=True)), (drawn, widest)


def test_every_cell_fits_its_column_the_moment_the_rows_arrive(
        session: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows reach the table from a worker; the columns must be wide enough
    for them right then, not after an idle pass of Textual's that can lose the
    race with the first paint (seen on a real terminal: "2026" for the time,
    "secon" for the label, for good)."""
    app = BrowseApp(settings, RUN)

    async def scenario(pilot: Pilot[None]) -> None:
        screen = app.screen
        assert isinstance(screen, TimelineScreen)
        rows = list(screen.rows.values())
        monkeypatch.setattr(screen, "_load_timeline", lambda: None)  # the worker, held back
        screen.reload()
        screen._fill(rows)  # what the worker's callback does, with no pause after it
        _fits(screen.query_one("#timeline", DataTable))
        await pilot.press("escape")
        sessions = app.screen
        assert isinstance(sessions, SessionsScreen)
        sessions.reload()
        _fits(sessions.query_one("#sessions", DataTable))

    _drive(app, scenario)


@pytest.mark.slow
def test_restore_after_confirming_changes_the_tree_and_names_the_undo(
        session: Path, settings: Settings) -> None:
    (session / "c.txt").write_text("not captured yet\n")  # only the pre-restore takes it
    before = tree_manifest(session)
    app = BrowseApp(settings, RUN)

    async def scenario(pilot: Pilot[None]) -> None:
        await _go_to(pilot, "first")
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmRestore) and app.screen.target.seq == 1
        await pilot.press("y")
        await _settled(pilot)  # the timeline is read again, in its worker
        assert isinstance(app.screen, TimelineScreen)
        assert "restored" in app.status and "Undo: restore seq 3" in app.status
        # The pre-restore checkpoint is listed at the top, the undo to pick.
        assert _labels(app)[0] == "before restore to seq 1"

    _drive(app, scenario)
    assert (session / "a.txt").read_text() == "one\n"
    assert not (session / "b.txt").exists() and not (session / "c.txt").exists()
    with Store(settings.database) as store:
        pre = store.checkpoints(RUN)[-1]
    assert (pre.seq, pre.source) == (3, "pre-restore")
    # Undo, as the browser said: the tree is back as it was.
    cli_json("restore", RUN, "--node", "n", "--seq", "3")
    assert tree_manifest(session) == before


@pytest.mark.parametrize("answer", ["n", "click-cancel"])
def test_a_cancelled_restore_changes_nothing(session: Path, settings: Settings,
                                             answer: str) -> None:
    before = tree_manifest(session)
    with Store(settings.database) as store:
        recorded = store.checkpoints(RUN)
    app = BrowseApp(settings, RUN)

    async def scenario(pilot: Pilot[None]) -> None:
        await _go_to(pilot, "first")
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmRestore)
        if answer == "click-cancel":
            await pilot.click("#no")
        else:
            await pilot.press(answer)
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen)
        assert app.status == "restore cancelled: nothing changed"

    _drive(app, scenario)
    assert tree_manifest(session) == before
    with Store(settings.database) as store:
        assert store.checkpoints(RUN) == recorded  # no pre-restore checkpoint either


def test_a_gap_cannot_be_restored(session: Path, settings: Settings) -> None:
    before = tree_manifest(session)
    app = BrowseApp(settings, RUN)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("down")  # the gap
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, TimelineScreen)
        assert app.status == "a gap is not a checkpoint: nothing to restore"

    _drive(app, scenario)
    assert tree_manifest(session) == before


def test_an_empty_store_says_so(settings: Settings) -> None:
    app = BrowseApp(settings)

    async def scenario(pilot: Pilot[None]) -> None:
        assert isinstance(app.screen, SessionsScreen)
        assert app.screen.query_one("#sessions", DataTable).row_count == 0
        assert app.note.startswith("No sessions recorded yet")
        await pilot.press("enter")  # nothing to open
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)

    _drive(app, scenario)


def test_without_textual_the_command_says_how_to_install_it(tmp_path: Path) -> None:
    # A module named textual that fails to import stands for a missing one.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "textual.py").write_text("raise ImportError('no textual here')\n")
    done = cli("browse", env={**os.environ, "PYTHONPATH": str(shadow)})
    assert done.returncode == 8, done.stderr
    assert done.stderr == ("durability: missing-extra: the browser needs Textual (the tui "
                           "extra): pip install 'worktree-durability[tui]'\n")
    assert done.stdout == ""


def test_an_unknown_run_is_not_found_before_anything_is_drawn(tmp_path: Path) -> None:
    done = cli("browse", "no-such-run")
    assert done.returncode == 3 and done.stderr.startswith("durability: not-found: ")
    assert done.stdout == ""
    repo = make_git_repo(tmp_path / "repo").resolve()
    here = cli("browse", "--latest", cwd=repo)  # no session has touched it
    assert here.returncode == 3 and here.stderr.startswith("durability: not-found: no session ")
    both = cli("browse", "r", "--latest")
    assert both.returncode == 2 and both.stderr.startswith("durability: invalid-value: ")


def test_a_refused_restore_says_why_and_changes_nothing(tmp_path: Path,
                                                       settings: Settings) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    try:
        (repo / ".gitignore").write_text("")
        (repo / "secret.env").write_text("recorded\n")
        cli_json("snapshot", str(repo), "--run", RUN, "--node", "n", "--label", "first")
        (repo / ".gitignore").write_text("*.env\n")
        (repo / "secret.env").unlink()
        cli_json("snapshot", str(repo), "--run", RUN, "--node", "n", "--label", "second")
        (repo / "secret.env").write_text("unrecorded\n")  # ignored: no checkpoint holds it
        before = tree_manifest(repo)
        app = BrowseApp(settings, RUN)

        async def scenario(pilot: Pilot[None]) -> None:
            await _go_to(pilot, "first")
            await pilot.press("r")
            await pilot.pause()
            await pilot.press("y")
            await pilot.pause()
            assert isinstance(app.screen, TimelineScreen)
            assert app.status.startswith("durability: restore-conflict: nothing restored: "
                                         "secret.env: content no checkpoint holds")

        _drive(app, scenario)
        assert tree_manifest(repo) == before
    finally:
        forget(repo)


@pytest.mark.slow
def test_the_installed_command_draws_on_a_terminal_and_quits_on_q(session: Path) -> None:
    """The command as a person runs it: on a real pseudo-terminal, the
    session's timeline drawn, then `q`."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "30"}
    proc = subprocess.Popen([durability_exe(), "browse", RUN], stdin=slave, stdout=slave,
                            stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        quit_sent = False
        while time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
            if not quit_sent and b"second" in seen:  # the newest checkpoint's label
                os.write(master, b"q")
                quit_sent = True
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert quit_sent and b"durability browse" in seen
