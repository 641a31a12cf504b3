"""The ``remote`` commands: the git remotes a worktree's checkpoints are
replicated to (docs/how-to/remote.md)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from durability import output
from durability.cli import options
from durability.cli.table import remotes_table
from durability.ground import ids
from durability.ground.errors import CredentialRefused, InvalidInput
from durability.ground.redact import redact

if TYPE_CHECKING:
    from durability.store.remote_rows import Remote

_WORKTREE = click.option(
    "--worktree", type=click.Path(path_type=Path, file_okay=False),
    help="The worktree (or empty folder) the remote is for (default: here).")


def worktree_key(folder: Path | None) -> str:
    """The worktree a remote is stored for: the root of the worktree at
    ``folder``, or an empty folder as it is (``restore --from-remote`` turns
    it into a repository first)."""
    from durability.backends import resolve_worktree
    from durability.ground.errors import CaptureError

    where = Path(os.path.abspath(folder or Path.cwd()))
    try:
        return str(resolve_worktree(where))
    except CaptureError:
        if where.is_dir() and not any(where.iterdir()):
            return str(where)
        raise


@click.group("remote")
def remote_group() -> None:
    """Name the git remotes this worktree's checkpoints are pushed to.

    The running service pushes every new checkpoint (and the earlier ones)
    to each remote named here, in the background; nothing goes to a remote
    you did not name, origin included.  Checkpoints can hold files you never
    committed: see docs/how-to/remote.md.

    \b
    Example:
      durability remote add backup file:///srv/backups/project.git
      durability remote list --json
      durability remote remove backup
    """


@remote_group.command("add")
@click.argument("name")
@click.argument("url")
@_WORKTREE
@options.json_option
def remote_add(name: str, url: str, worktree: Path | None, as_json: bool) -> None:
    """Replicate this worktree's checkpoints to the git remote URL, as NAME.

    URL is a file://, ssh:// or https:// URL, user@host:path, or a path.

    \b
    Example:
      durability remote add backup ssh://git@example.com/me/project-checkpoints.git
    """
    from durability.store.remote_rows import Remotes

    try:
        name = ids.remote_name(name)
        url = ids.remote_url(url, os.getcwd())
    except ids.CredentialInURL as exc:
        raise CredentialRefused(str(exc)) from None
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    key = worktree_key(worktree)
    added = _shown(Remotes(options.settings().database).add(key, name, url))
    if as_json:
        return options.emit(output.RemoteRowOut.from_record(added).dump())
    click.echo(f"remote {name} added for {ids.printable(key)}: {added.url}")


def _shown(remote: Remote) -> Remote:
    """``remote`` as it may be shown: its URL without a credential (one
    stored by an older toolkit, which did not refuse them all)."""
    return dataclasses.replace(remote, url=redact(remote.url))


@remote_group.command("list")
@_WORKTREE
@click.option("--all", "every", is_flag=True, help="The remotes of every worktree.")
@options.json_option
def remote_list(worktree: Path | None, every: bool, as_json: bool) -> None:
    """List the remotes of this worktree.

    \b
    Example:
      durability remote list --json
    """
    from durability.store.remote_rows import Remotes

    key = None if every else worktree_key(worktree)
    rows = [_shown(r) for r in Remotes(options.settings().database).all(key)]
    options.listing(rows, as_json, lambda: remotes_table(rows),
                    "no remotes" + (f" for {key}" if key else ""),
                    lambda r: output.RemoteRowOut.from_record(r))


@remote_group.command("remove")
@click.argument("name")
@_WORKTREE
@options.json_option
def remote_remove(name: str, worktree: Path | None, as_json: bool) -> None:
    """Stop replicating to NAME (what is on it stays there).

    \b
    Example:
      durability remote remove backup
    """
    from durability.store.remote_rows import Remotes

    try:
        name = ids.remote_name(name)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    key = worktree_key(worktree)
    gone = _shown(Remotes(options.settings().database).remove(key, name))
    if as_json:
        return options.emit(output.RemoteRowOut.from_record(gone).dump())
    click.echo(f"remote {name} removed for {ids.printable(key)}")


COMMANDS = [remote_group]
