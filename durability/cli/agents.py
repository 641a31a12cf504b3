"""``durability agent run``: one agent task as a run (docs/how-to/agents.md).

The run is an engine run like any other: ``durability resume RUN`` continues
it (the agent's session, on the tree of its last completed tool call),
``run-status``, ``logs`` and ``snapshots`` show it, and the exit status is
``durability run``'s (0 finished or parked, the failure's code otherwise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from durability.cli import options
from durability.cli.runs import _config, _report, _runs, _worktree
from durability.ground.errors import InvalidInput

__all__ = ["COMMANDS"]

_HARNESS_NAMES = ("claude", "codex", "gemini")


def _harnesses(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    chain = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in chain if n not in _HARNESS_NAMES]
    if not chain or unknown:
        raise InvalidInput(f"--harness: a comma-separated chain of {', '.join(_HARNESS_NAMES)}"
                           f"{'; not ' + ', '.join(unknown) if unknown else ''}")
    if len(set(chain)) != len(chain):
        raise InvalidInput("--harness: a harness named twice")
    return chain


def _schema(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"--output-schema {path}: {exc}") from None
    if not isinstance(schema, dict):
        raise InvalidInput(f"--output-schema {path}: a JSON schema is an object")
    return schema


@click.group("agent")
def agent_group() -> None:
    """Run agent CLIs (Claude Code, Codex, Gemini) headless as durable runs.

    \b
    Example:
      durability agent run "Fix the failing test" --worktree . --harness claude,codex
    """


@agent_group.command("run")
@click.argument("prompt")
@click.option("--worktree", type=click.Path(path_type=Path, file_okay=False, exists=True),
              required=True, help="The jj or git worktree the agent works in.")
@click.option("--harness", "chain", default="claude", show_default=True, callback=_harnesses,
              help="The harness chain: the next one takes over on a quota.")
@click.option("--run-id", callback=options.run_id, help="Your own run id (default: a new one).")
@click.option("--model", help="The model to ask the harness for.")
@click.option("--max-turns", type=click.IntRange(0), help="Abort past this many turns.")
@click.option("--max-tokens", type=click.IntRange(0), help="Abort past this many tokens.")
@click.option("--max-cost", type=click.FloatRange(0), help="Abort past this cost (USD).")
@click.option("--output-schema", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="A JSON schema the final answer must satisfy.")
@options.json_option
def agent_run(prompt: str, worktree: Path, chain: tuple[str, ...], run_id: str | None,
              model: str | None, max_turns: int | None, max_tokens: int | None,
              max_cost: float | None, output_schema: Path | None, as_json: bool) -> None:
    """Run PROMPT with an agent CLI in WORKTREE as a one-task run.

    \b
    Example:
      durability agent run "Fix the failing test" --worktree . --max-cost 2
    """
    from durability.runs.agent import agents_folder
    from durability.runs.agent_run import run_agent

    if not prompt.strip():
        raise InvalidInput("the prompt is empty")
    settings = options.settings()
    schema = _schema(output_schema)
    where = _worktree(worktree)
    assert where is not None
    with _runs(settings) as runs:
        outcome = run_agent(runs, prompt, worktree=where,
                            folder=agents_folder({"DURABILITY_HOME": str(settings.state_dir)}),
                            config=_config(settings), harness=chain, run_id=run_id,
                            model=model, max_turns=max_turns, max_tokens=max_tokens,
                            max_cost=max_cost, output_schema=schema)
    _report(outcome, as_json)


COMMANDS = [agent_group]
