"""``durability logs``: a run's event log (docs/how-to/runs.md, "Event log").

The log is for people and tools; the engine never reads it.  ``--follow``
keeps printing new events until the run parks (finished, failed, waiting,
paused, cancelled), or until interrupted for a run the engine does not own
(a hook session).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import click

from durability.cli import options
from durability.ground import ids
from durability.runs.run_rows import PARKED, Runs
from durability.store.events import Event

__all__ = ["COMMANDS"]

# How often --follow looks for new events: well under a heartbeat (1 s).
_FOLLOW_POLL_S = 0.2


def _line(event: Event) -> str:
    when = datetime.fromtimestamp(event.ts_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    who = ""
    if event.node_id is not None:
        who = event.node_id
        if event.iteration is not None:
            who += f" it {event.iteration}"
        if event.attempt is not None:
            who += f" att {event.attempt}"
        if event.seq is not None:
            who += f" seq {event.seq}"
    detail = json.dumps(event.detail, sort_keys=True) if event.detail else ""
    return ids.printable(f"{when[:-3]}Z {event.id:>6} {event.kind:<17} {who:<28} {detail}"
                         .rstrip())


def _emit(events: list[Event], as_json: bool) -> None:
    for event in events:
        if as_json:  # one object a line: a tool can read it as it comes
            from durability import output

            click.echo(json.dumps(output.EventOut.from_record(event).dump(), sort_keys=True))
        else:
            click.echo(_line(event))


def _parked(runs: Runs, run_id: str) -> bool:
    """Whether an engine run is parked (a hook session never is)."""
    from durability.store import NotFound

    try:
        return runs.get_run(run_id).state in PARKED
    except NotFound:
        return False


@click.command("logs")
@click.argument("run_id", callback=options.run_id)
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing new events until the run parks (or Ctrl-C).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line.")
def logs_command(run_id: str, follow: bool, as_json: bool) -> None:
    """Print RUN_ID's event log, oldest first.

    \b
    Example:
      durability logs RUN_ID
      durability logs RUN_ID --follow --json | jq -c 'select(.kind=="checkpoint")'
    """
    from durability.store import NotFound

    with Runs(options.settings().database) as runs:
        if not runs.run_exists(run_id) and not runs.events(run_id, limit=1):
            raise NotFound(f"no run {run_id!r}")
        after = 0
        while True:
            # Parked is read before the events: the park and its run-parked
            # event are one transaction, so nothing logged before it is missed.
            parked = follow and _parked(runs, run_id)
            events = runs.events(run_id, after_id=after)
            _emit(events, as_json)
            if events:
                after = events[-1].id
                continue
            if not follow or parked:
                return
            time.sleep(_FOLLOW_POLL_S)


COMMANDS = [logs_command]
