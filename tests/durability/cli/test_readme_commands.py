"""The command reference (docs/reference/cli.md) has a section for every
command `durability --help` lists, naming every option each command and
subcommand takes, so a new command or option cannot land without its text.
(The page is generated: tests/test_reference_docs.py checks it is current.)"""

from __future__ import annotations

import re
from pathlib import Path

import click

from durability.cli.main import cli

REFERENCE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "cli.md"


def command_rows(page: str) -> dict[str, str]:
    """Command name -> the text of its section and of its subcommands' sections."""
    rows: dict[str, str] = {}
    for section in re.split(r"^(?=## durability )", page, flags=re.M)[1:]:
        name = section.split()[2]
        rows[name] = rows.get(name, "") + section
    return rows


def options(command: click.Command, ctx: click.Context) -> set[str]:
    """The long options of a command and of its subcommands (not --help, and
    not hidden ones: those are the toolkit's own, passed to its child processes)."""
    found = {flag for param in command.params for flag in param.opts
             if flag.startswith("--") and flag != "--help"
             and not getattr(param, "hidden", False)}
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                found |= options(sub, ctx)
    return found


def undocumented(page: str) -> dict[str, set[str]]:
    rows = command_rows(page)
    missing: dict[str, set[str]] = {}
    ctx = click.Context(cli, info_name="durability")
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        row = rows.get(name)
        left_out = {"(no row)"} if row is None else {
            flag for flag in options(command, ctx) if not re.search(rf"{flag}(?![\w-])", row)}
        if left_out:
            missing[name] = left_out
    return missing


def test_every_command_and_option_has_its_reference_section() -> None:
    assert undocumented(REFERENCE.read_text()) == {}


def test_a_missing_command_or_option_is_named() -> None:
    page = ("## durability status\n\n```text\n  --json  Print JSON.\n```\n"
            "## durability stop\n\n--socket PATH --timeout S --kill --json\n"
            "## durability remote add\n\n--worktree --json\n")
    missing = undocumented(page)
    assert missing["status"] == {"--socket"}
    assert "stop" not in missing
    assert missing["serve"] == {"(no row)"}
    assert missing["remote"] == {"--all"}  # `remote list`'s option, in no remote section
