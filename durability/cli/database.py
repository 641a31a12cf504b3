"""``migrate``: the state store's own moves between databases (docs/how-to/runs.md,
"PostgreSQL")."""

from __future__ import annotations

from pathlib import Path

import click

from durability.cli import options
from durability.config import Settings
from durability.ground.errors import InvalidInput

__all__ = ["COMMANDS"]


@click.command("migrate")
@click.option("--to", "target", required=True, metavar="URL",
              help="The PostgreSQL store to copy into (postgresql://...).")
@click.option("--from", "source", type=click.Path(dir_okay=False, path_type=Path),
              help="The SQLite store to copy (default: state.db under DURABILITY_HOME).")
@options.json_option
def migrate_command(target: str, source: Path | None, as_json: bool) -> None:
    """Copy the SQLite state store into PostgreSQL, every table, and verify it.

    Rows are upserted on their keys, so running it again copies what changed
    and adds nothing twice.  Afterwards set DURABILITY_DATABASE_URL to URL.

    \b
    Example:
      durability migrate --to postgresql://me@db.internal/durability
    """
    from durability.store.postgres import is_url, redact
    from durability.store.transfer import copy_store

    if not is_url(target):
        raise InvalidInput("--to must be a postgresql:// URL")
    settings = options.settings()
    copied = copy_store(source or settings.db_path, target)
    if source is None or source.resolve() == settings.db_path.resolve():
        _note_running_service(settings)
    if as_json:
        from durability import output

        options.emit({"to": redact(target),
                      "tables": [output.TableCopyOut.from_record(t).dump() for t in copied],
                      "verified": True})
        return
    for t in copied:
        click.echo(f"{t.table}: {t.target_rows} rows")
    total = sum(t.target_rows for t in copied)
    click.echo(f"copied {total} rows in {len(copied)} tables to {redact(target)} (verified: "
               "same rows and keys); use it with DURABILITY_DATABASE_URL")


def _note_running_service(settings: Settings) -> None:
    """The copy succeeded, but a running service keeps writing into the
    SQLite store: what it writes from now on is not in the copy."""
    from durability.ground.client import listener_pid

    pid = listener_pid(settings.socket_path)
    if pid is not None:
        click.echo(f"durability: note: the service (pid {pid}) on {settings.socket_path} still "
                   "writes to the SQLite store: `durability stop`, run migrate again, then set "
                   "DURABILITY_DATABASE_URL (and start it again)", err=True)


COMMANDS = [migrate_command]
