"""The README's command tables name every command `durability --help` lists,
and every option each command and subcommand takes, so a new command or
option cannot land without its line."""

from __future__ import annotations

import re
from pathlib import Path

import click

from durability.cli.main import cli

README = Path(__file__).resolve().parents[3] / "README.md"


def command_rows(readme: str) -> dict[str, str]:
    """Command name -> the text of the README table rows that start with it."""
    rows: dict[str, str] = {}
    for line in readme.splitlines():
        for name in re.findall(r"`durability ([a-z-]+)", line.split("|")[1] if
                               line.startswith("| `durability ") else ""):
            rows[name] = rows.get(name, "") + line
    return rows


def options(command: click.Command) -> set[str]:
    """The long options of a command and of its subcommands (not --help, and
    not hidden ones: those are the toolkit's own, passed to its child processes)."""
    found = {flag for param in command.params for flag in param.opts
             if flag.startswith("--") and flag != "--help"
             and not getattr(param, "hidden", False)}
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            found |= options(sub)
    return found


def undocumented(readme: str) -> dict[str, set[str]]:
    rows = command_rows(readme)
    missing: dict[str, set[str]] = {}
    for name, command in cli.commands.items():
        if command.hidden:
            continue
        row = rows.get(name)
        left_out = {"(no row)"} if row is None else {
            flag for flag in options(command) if not re.search(rf"{flag}(?![\w-])", row)}
        if left_out:
            missing[name] = left_out
    return missing


def test_every_command_and_option_has_its_readme_row() -> None:
    assert undocumented(README.read_text()) == {}


def test_a_missing_command_or_option_is_named() -> None:
    readme = ("| `durability status [--json]` | x |\n"
              "| `durability stop [--socket PATH] [--timeout S] [--kill] [--json]` | x |\n")
    missing = undocumented(readme)
    assert missing["status"] == {"--socket"}
    assert "stop" not in missing
    assert missing["serve"] == {"(no row)"}
