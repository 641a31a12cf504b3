"""The Textual application behind ``durability browse``.

Two screens and a dialog: the sessions (every run id with records, newest
first), one session's timeline (checkpoints newest first with what each
changed, gaps and tool calls whose checkpoint gc collected marked where they
happened) beside the diff of the highlighted checkpoint, and a confirmation
before a restore or a rewind.  A collected call offers no restore: its
rewind is of the conversation only (decision 0061).  A restore is
``capture.restore.restore``, exactly as the command runs it: a pre-restore
checkpoint is taken first, and the browser then names it as the undo.

Keys are listed in docs/how-to/inspect.md and in the footer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Header, Static
from textual.worker import get_current_worker

from durability.browse import model
from durability.config import Settings
from durability.ground import ids
from durability.ground.errors import DurabilityError
from durability.store import Checkpoint, EngineError, Store
from durability.store.boundaries import Boundary

__all__ = ["BrowseApp", "ConfirmRestore", "SessionsScreen", "TimelineScreen"]

_STYLES = {"+": "green", "-": "red", "@": "cyan"}


def _fill_table(table: DataTable[Text], labels: tuple[str, ...],
                rows: list[tuple[str, list[Text]]]) -> None:
    """Replace the table's columns and rows, each column as wide as its widest
    cell.  Textual's auto-width columns settle their width on an idle pass
    that can lose the race with the first paint, which then leaves a column
    as narrow as its heading ("2026" for a whole time, "secon" for a label)
    until something else makes the table measure again."""
    table.clear(columns=True)
    for i, label in enumerate(labels):
        width = max([len(label), *(cells[i].cell_len for _, cells in rows)])
        table.add_column(label, width=width)
    for key, cells in rows:
        table.add_row(*cells, key=key)


def _row_style(row: model.Row) -> str:
    """A gap in bold yellow, a collected call in italic magenta."""
    if row.gap_reason:
        return "bold yellow"
    return "italic magenta" if row.collected is not None else ""


class SessionsScreen(Screen[None]):
    """Every session with records; enter opens its timeline."""

    DEFAULT_CSS = """
    #sessions { height: 1fr; }
    #note { padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "app.quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="note")
        yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        app = self._browse
        rows = model.session_rows(app.store)
        table: DataTable[Text] = self.query_one("#sessions", DataTable)
        # Text, not str: the table reads a str as markup, and a worktree's
        # path may hold brackets ("[/x]" stops the browser).
        _fill_table(table, model.SESSION_COLUMNS,
                    [(run_id, [Text(c) for c in cells]) for run_id, cells in rows])
        note = ("Enter: a session's checkpoints.  q: quit." if rows else
                "No sessions recorded yet: a session appears here once a hook, a watch or "
                "`durability snapshot` has taken a checkpoint (or filed a gap).")
        self.query_one("#note", Static).update(note)
        app.note = note
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.push_screen(TimelineScreen(event.row_key.value))

    @property
    def _browse(self) -> BrowseApp:
        assert isinstance(self.app, BrowseApp)
        return self.app


class TimelineScreen(Screen[None]):
    """One session's checkpoints and gaps, and the diff of the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "restore", "Restore"), Binding("w", "rewind", "Rewind"),
        Binding("escape", "back", "Sessions"), Binding("q", "app.quit", "Quit")]
    DEFAULT_CSS = """
    #timeline { width: 3fr; height: 1fr; }
    #diff-scroll { width: 2fr; border-left: solid $accent; }
    #status { height: auto; max-height: 4; }
    """

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.rows: dict[str, model.Row] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield DataTable(id="timeline", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="diff-scroll"):
                yield Static("", id="diff")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"session {self.run_id}"
        self.reload()

    def reload(self) -> None:
        """Read the timeline again, in a thread: a session of thousands of
        checkpoints takes seconds (each one's totals against its base), and
        the browser must keep answering meanwhile (escape, quit)."""
        self.rows = {}
        table = self.query_one("#timeline", DataTable)
        table.clear(columns=True)
        table.add_columns(*model.TIMELINE_COLUMNS)
        self.workers.cancel_group(self, "diff")
        self._show_diff(f"reading the timeline of session {ids.printable(self.run_id)}...")
        table.focus()
        self._load_timeline()

    @work(thread=True, exclusive=True, group="timeline")
    def _load_timeline(self) -> None:
        try:
            rows: list[model.Row] | str = model.timeline_rows(
                self._browse.store, self.run_id, self._browse.env)
        except (DurabilityError, EngineError) as exc:
            rows = f"durability: {exc.code}: {exc}"
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._fill, rows)

    def _fill(self, rows: list[model.Row] | str) -> None:
        if not self.is_attached:  # left (escape) while it was read
            return
        if isinstance(rows, str):
            self._show_diff(rows)
            return
        self.rows = {r.key: r for r in rows}
        table: DataTable[Text] = self.query_one("#timeline", DataTable)
        _fill_table(table, model.TIMELINE_COLUMNS, [
            (r.key, [Text(c, style=_row_style(r)) for c in r.cells]) for r in rows])
        if not rows:
            self._show_diff(f"session {self.run_id} has no checkpoints or gaps")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = self.rows.get(event.row_key.value or "")
        if row is None:
            return
        if row.collected is not None:
            self.workers.cancel_group(self, "diff")
            self._show_diff(model.collected_text(row.collected))
            return
        if row.checkpoint is None:
            self.workers.cancel_group(self, "diff")
            self._show_diff(f"GAP: a capture that could not be taken ({row.cells[-1]}); "
                            "nothing to show or restore.")
            return
        self._show_diff(f"seq {row.checkpoint.seq}: reading the diff...")
        self._load_diff(row.checkpoint)

    @work(thread=True, exclusive=True, group="diff")
    def _load_diff(self, checkpoint: Checkpoint) -> None:
        """The diff, off the event loop: a checkpoint of thousands of files
        takes a second, and moving on starts the next one instead
        (``exclusive``: the one still running is cancelled)."""
        try:
            text = model.diff_text(self._browse.store, checkpoint, env=self._browse.env)
        except (DurabilityError, EngineError) as exc:
            text = f"durability: {exc.code}: {exc}"
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show_diff, text)

    def _show_diff(self, text: str) -> None:
        self._browse.diff = text
        shown = Text()
        for line in text.splitlines():
            style = _STYLES.get(line[:1], "") if not line.startswith(("+++", "---")) else "bold"
            shown.append(line + "\n", style=style)
        self.query_one("#diff", Static).update(shown)

    def _status(self, text: str) -> None:
        text = ids.printable(text)  # it names paths and refusals from outside
        self._browse.status = text
        self.query_one("#status", Static).update(Text(text))

    def selected(self) -> model.Row | None:
        table = self.query_one("#timeline", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.rows.get(key or "")

    def action_back(self) -> None:
        self.app.pop_screen()
        screen = self.app.screen
        if isinstance(screen, SessionsScreen):
            screen.reload()

    def action_restore(self) -> None:
        row = self.selected()
        if row is None:
            return
        if row.collected is not None:
            self._status(f"gc collected the checkpoint of call seq {row.collected.seq}: its "
                         "files cannot be restored (w rewinds its conversation only)")
            return
        if row.checkpoint is None:
            self._status("a gap is not a checkpoint: nothing to restore")
            return
        target = row.checkpoint
        self.app.push_screen(ConfirmRestore(target),
                             lambda yes: self._restore(target) if yes else self._cancelled())

    def _cancelled(self) -> None:
        self._status("restore cancelled: nothing changed")

    def _restore(self, target: Checkpoint) -> None:
        from durability.restore.apply import restore

        try:
            done = restore(self._browse.settings, run_id=target.run_id, node_id=target.node_id,
                           iteration=target.iteration, attempt=target.attempt, seq=target.seq,
                           env=self._browse.env)
        except (DurabilityError, EngineError) as exc:
            self._status(f"durability: {exc.code}: {exc}")
            return
        self.reload()
        undo = done.undo_key
        self._status(
            f"restored {done.worktree} to seq {target.seq}: {len(done.changes.write)} written, "
            f"{len(done.changes.delete)} deleted.  Undo: restore seq {done.pre_restore_seq} "
            f"(the tree as it was just before), or run: durability restore "
            f"{undo.run_id} --node {undo.node_id} --iteration {undo.iteration} "
            f"--attempt {undo.attempt} --seq {done.pre_restore_seq}")

    def action_rewind(self) -> None:
        """Rewind the session to the newest tool call whose boundary is the
        highlighted checkpoint: its files and a new session (``rewind``); to
        a highlighted collected call: its conversation only."""
        row = self.selected()
        if row is None:
            return
        if row.collected is not None:
            call = row.collected
            self.app.push_screen(ConfirmRewind(call, conversation_only=True),
                                 lambda yes: self._rewind(call, conversation_only=True)
                                 if yes else self._cancelled())
            return
        if not row.boundaries:
            self._status("no tool call's boundary is this checkpoint: nothing to rewind to "
                         "(r restores its files)")
            return
        target = row.boundaries[-1]
        self.app.push_screen(ConfirmRewind(target),
                             lambda yes: self._rewind(target) if yes else self._cancelled())

    def _rewind(self, target: Boundary, *, conversation_only: bool = False) -> None:
        from durability.rewind.apply import rewind

        try:
            done = rewind(self._browse.settings, self._browse.store, target.run_id,
                          seq=target.seq, code=not conversation_only, env=self._browse.env)
        except (DurabilityError, EngineError) as exc:
            self._status(f"durability: {exc.code}: {exc}")
            return
        self.reload()
        assert done.written is not None
        if conversation_only:
            self._status(
                f"rewound the conversation to boundary {target.seq} ({target.tool_use_id}); "
                f"the files are unchanged (gc collected that call's checkpoint); new session "
                f"{done.written.session_id}: {' '.join(done.written.resume)}")
            return
        assert done.restored is not None
        undo = done.restored.undo_key
        self._status(
            f"rewound to boundary {target.seq} ({target.tool_use_id}): files at seq "
            f"{target.checkpoint_seq}; new session {done.written.session_id}: "
            f"{' '.join(done.written.resume)}.  Undo the files: durability restore "
            f"{undo.run_id} --node {undo.node_id} --iteration {undo.iteration} "
            f"--attempt {undo.attempt} --seq {done.restored.pre_restore_seq}")

    @property
    def _browse(self) -> BrowseApp:
        assert isinstance(self.app, BrowseApp)
        return self.app


class _Confirm(ModalScreen[bool]):
    """Do it or not: y on the action's button, n / escape / Cancel; Cancel
    has the focus (the safe answer is the default)."""

    #: The action, on its button.
    VERB = ""

    def question(self) -> str:
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self.question()), id="question")
            with Horizontal(id="buttons"):
                yield Button(f"{self.VERB} (y)", id="yes", variant="error")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


def _bindings(verb: str) -> list[BindingType]:
    return [Binding("y", "answer(True)", verb), Binding("n", "answer(False)", "Cancel"),
            Binding("escape", "answer(False)", "Cancel")]


def _css(screen: str) -> str:
    return f"""
    {screen} {{ align: center middle; }}
    #dialog {{ width: 80; height: auto; border: thick $error; padding: 1 2;
              background: $surface; }}
    #buttons {{ height: auto; margin-top: 1; }}
    """


class ConfirmRewind(_Confirm):
    """Rewind or not."""

    VERB = "Rewind"
    BINDINGS: ClassVar[list[BindingType]] = _bindings(VERB)
    DEFAULT_CSS = _css("ConfirmRewind")

    def __init__(self, target: Boundary, *, conversation_only: bool = False) -> None:
        super().__init__()
        self.target = target
        self.conversation_only = conversation_only

    def question(self) -> str:
        t = self.target
        if self.conversation_only:
            return (f"Rewind the conversation of session {ids.printable(t.run_id)} to "
                    f"boundary {t.seq}, right after tool call "
                    f"{ids.printable(t.tool_use_id or '-')} ({ids.printable(t.tool_name or '?')})?"
                    "\n\ngc collected that call's checkpoint: the files stay as they are.  A "
                    "new session of the agent holds the conversation up to that call's "
                    "result; the original is unchanged.")
        return (f"Rewind session {ids.printable(t.run_id)} to boundary {t.seq}, right after "
                f"tool call {ids.printable(t.tool_use_id or '-')} "
                f"({ids.printable(t.tool_name or '?')})?\n\n"
                f"The files become checkpoint seq {t.checkpoint_seq}'s (a pre-restore "
                "checkpoint is taken first: the undo), and a new session of the agent holds "
                "the conversation up to that call's result; the original is unchanged.")


class ConfirmRestore(_Confirm):
    """Restore or not."""

    VERB = "Restore"
    BINDINGS: ClassVar[list[BindingType]] = _bindings(VERB)
    DEFAULT_CSS = _css("ConfirmRestore")

    def __init__(self, target: Checkpoint) -> None:
        super().__init__()
        self.target = target

    def question(self) -> str:
        t = self.target
        # Escaped as in the timeline: a label is the agent's words, and an
        # ESC in it would drive the terminal.
        return (f"Restore {ids.printable(t.worktree)} to seq {t.seq} ({t.commit_id[:12]}"
                f"{', ' + ids.printable(t.label or '') if t.label else ''})?\n\n"
                "Every file the checkpoints record becomes as it was then; ignored files "
                "are left alone.  A pre-restore checkpoint of the tree as it is now is "
                "taken first: to undo, restore that one (its seq is shown after).")


class BrowseApp(App[None]):
    """Sessions, then one session's checkpoints and their diffs; restore."""

    TITLE = "durability browse"

    def __init__(self, settings: Settings, run_id: str | None = None, *,
                 env: Mapping[str, str] = os.environ) -> None:
        super().__init__()
        self.settings = settings
        self.run_id = run_id
        self.env = env
        self.store = Store(settings.database)
        #: What the panes show now, as plain text (for tests and scripts).
        self.note = ""
        self.diff = ""
        self.status = ""

    def on_unmount(self) -> None:
        self.store.close()

    def on_mount(self) -> None:
        self.push_screen(SessionsScreen())
        if self.run_id is not None:
            self.push_screen(TimelineScreen(self.run_id))
