"""``durability browse``: the terminal browser (``durability/browse/``,
Textual, the ``tui`` extra).  Without Textual it says, in one line with the
code ``missing-extra``, how to install it."""

from __future__ import annotations

import click

from durability.cli import options


@click.command()
@click.argument("run_id", required=False, metavar="[RUN]", callback=options.run_id)
def browse(run_id: str | None) -> None:
    """Browse sessions, their checkpoints and diffs; restore one after a confirmation.

    With RUN, open that session's checkpoints.  Keys: up/down move, enter
    opens a session, r restores the highlighted checkpoint (asks first; a
    pre-restore checkpoint is taken, so it can be undone), escape goes back,
    q quits.  Needs the tui extra (Textual).

    \b
    Examples:
      durability browse
      durability browse 4f1c0d2e-session-id
    """
    from durability.browse import load_app

    app_class = load_app()
    settings = options.settings()
    if run_id is not None:
        options.resolve_run(options.store(settings), run_id, False)  # not-found before drawing
    app_class(settings, run_id).run()


COMMANDS = [browse]
