"""``durability browse``: the terminal browser (``durability/browse/``,
Textual, the ``tui`` extra).  Without Textual it says, in one line with the
code ``missing-extra``, how to install it."""

from __future__ import annotations

import click

from durability.cli import options


@click.command()
@click.argument("run_id", required=False, metavar="[RUN]", callback=options.run_id)
@click.option("--latest", is_flag=True,
              help="Open the newest session of the worktree here (instead of RUN).")
def browse(run_id: str | None, latest: bool) -> None:
    """Browse sessions, their checkpoints and diffs; restore one after a confirmation.

    With RUN (or --latest), open that session's checkpoints.  Keys: up/down move, enter
    opens a session, r restores the highlighted checkpoint (asks first; a
    pre-restore checkpoint is taken, so it can be undone), escape goes back,
    q quits.  Needs the tui extra (Textual).

    \b
    Examples:
      durability browse
      durability browse 4f1c0d2e-session-id
      durability browse --latest
    """
    from durability.browse import load_app

    app_class = load_app()
    settings = options.settings()
    if run_id is not None or latest:
        # An unknown RUN, or no session here, is not-found before anything is drawn.
        with options.store(settings) as store:
            run_id = options.resolve_run(store, run_id, latest)
    app_class(settings, run_id).run()


COMMANDS = [browse]
