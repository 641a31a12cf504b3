"""What the command families share: id validation, the options several
commands take, settings and store built at the entry point, and output.

Imported by every command module; imports none of them (the CLI's ground)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from durability.config import Settings
from durability.ground import ids
from durability.ground.errors import InvalidInput
from durability.store import NotFound, Store

__all__ = ["anchor", "attempt_options", "emit", "json_option", "listing", "only_node",
           "resolve_run", "run_argument", "run_id", "settings", "store"]

if TYPE_CHECKING:
    from durability.output import Out

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def run_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: an id from the command line, validated like every id
    that comes from outside."""
    if value is None:
        return None
    try:
        return ids.validate_id(value, param.name.replace("_", " ") if param.name else "id")
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(f)


def attempt_options(*, node_required: bool, defaults: bool) -> Callable[[F], F]:
    """--node, --iteration and --attempt, shared by the commands that name an attempt."""

    def decorate(f: F) -> F:
        f = click.option("--attempt", type=click.IntRange(1), default=1 if defaults else None,
                         help="Attempt number (from 1).")(f)
        f = click.option("--iteration", type=click.IntRange(0), default=0 if defaults else None,
                         help="Iteration number (from 0).")(f)
        f = click.option("--node", "node_id", required=node_required, callback=run_id,
                         help="Node (task) id.")(f)
        return f

    return decorate


def run_argument(f: F) -> F:
    """RUN, or ``--latest`` for the newest session of the current worktree;
    resolved with ``resolve_run``."""
    f = click.option("--latest", is_flag=True,
                     help="The newest session of the worktree here (instead of RUN).")(f)
    return click.argument("run_id", required=False, callback=run_id)(f)


def resolve_run(s: Store, run: str | None, latest: bool, *,
                cwd: Path | None = None) -> str:
    """The run a command names: RUN (which must have records: an unknown id
    is ``not-found``, never an empty success), or with ``--latest`` the
    newest session that touched the worktree containing ``cwd``."""
    if (run is None) == (not latest):
        raise InvalidInput("name a RUN or give --latest (not both)")
    if run is not None:
        if not s.has_records(run) and not _spooled(run):
            raise NotFound(f"no run or session {run!r}: `durability sessions` lists them")
        return run
    from durability.backends import resolve_worktree

    here = cwd or Path.cwd()
    root = str(resolve_worktree(here))
    found = s.sessions(worktree=root)
    if not found:
        raise NotFound(f"no session has touched {root} yet")
    return found[0].run_id


def _spooled(run: str) -> bool:
    """Whether ``run`` has gaps in a spool not ingested yet (the plugin's
    launcher files them when it finds no toolkit): a session all the same."""
    from durability.gaps.spool import has_spool_file

    return has_spool_file(settings().spool_dirs, run)


def settings() -> Settings:
    return Settings.from_env()


def store(s: Settings) -> Store:
    return Store(s.database)


def emit(data: Any) -> None:
    # A path that is not UTF-8 (lone surrogates, see durability.store.text) is written
    # as \udcXX escapes: valid JSON that reads back to the same path.
    text = json.dumps(data, indent=2, ensure_ascii=False)
    click.echo(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def listing(rows: Sequence[T], as_json: bool, table: Callable[[], str], empty: str,
            out: Callable[[T], Out]) -> None:
    """A listing command's output: JSON rows (``out``: a row's answer model,
    built only for JSON), a table, or a note on stderr."""
    if as_json:
        emit([out(row).dump() for row in rows])
    elif rows:
        click.echo("\n".join(ids.printable(line) for line in table().splitlines()))
    else:
        click.echo(empty, err=True)


def only_node(s: Store, run_id: str) -> str:
    """The node of a run that has one (a hook session's is ``session``): what
    --node defaults to; a run with several nodes must name one."""
    nodes = sorted({c.node_id for c in s.checkpoints(run_id)})
    if len(nodes) == 1:
        return nodes[0]
    if not nodes:
        raise NotFound(f"run {run_id!r} has no checkpoints")
    raise InvalidInput(f"run {run_id!r} has nodes {', '.join(nodes)}: pick one with --node")


def anchor(root: Path) -> Path:
    """Where a command's relative paths inside worktree ``root`` start, as
    in git: the current folder when it is inside the worktree, else the
    worktree's root (``diff -- PATHS`` and ``restore --path`` alike)."""
    here = Path.cwd()
    return here if here == root or root in here.parents else root
