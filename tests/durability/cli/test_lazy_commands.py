"""The lazy top group: ``durability.cli.main.TABLE`` names every command
the families define (same module, attribute and short help, nothing more), the
``--help`` listing built from it is the one the commands themselves make, and a
command imports only its own family (``--version`` none at all)."""

from __future__ import annotations

import os
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import click
import pytest
from click.testing import CliRunner

import durability.cli
from durability.cli import main
from tests.helpers import cli, cli_json

#: Long enough that click never shortens a short help: its whole first sentence.
WHOLE = 10**6


def families() -> dict[str, ModuleType]:
    """Every module of ``durability.cli`` that defines commands (``COMMANDS``)."""
    found = {}
    for info in pkgutil.iter_modules(durability.cli.__path__):
        module = __import__(f"durability.cli.{info.name}", fromlist=["COMMANDS"])
        if hasattr(module, "COMMANDS"):
            found[module.__name__] = module
    return found


def defined() -> dict[str, tuple[str, click.Command]]:
    """Command name -> (its family module, the command), as the families define them."""
    out: dict[str, tuple[str, click.Command]] = {}
    for name, module in families().items():
        for command in module.COMMANDS:
            assert command.name not in out, f"{command.name} defined twice"
            out[str(command.name)] = (name, command)
    return out


def test_the_table_names_every_command_the_families_define_and_no_other() -> None:
    real = defined()
    # A new command goes in its family's COMMANDS and in main.TABLE.
    assert set(main.TABLE) == set(real), "durability/cli/main.py TABLE differs from the families"
    for name, (module, command) in real.items():
        entry = main.TABLE[name]
        assert entry.module == module, name
        assert getattr(families()[module], entry.attr) is command, name
        assert entry.short_help == command.get_short_help_str(WHOLE), name
        assert not command.hidden and not command.deprecated, name  # the table has neither


def test_a_drifted_short_help_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a table entry whose short help differs from
    the command's is told apart (and the listing then differs too)."""
    entry = main.TABLE["log"]
    monkeypatch.setitem(main.TABLE, "log", entry._replace(short_help="Something else."))
    _, command = defined()["log"]
    assert main.TABLE["log"].short_help != command.get_short_help_str(WHOLE)
    lazy = main._Group(name="durability", help=main.cli.help)
    assert "Something else." in _help(lazy, 100)


def _eager() -> click.Group:
    """The group as it was before it was lazy: every command added up front."""
    group = click.Group(name="durability", help=main.cli.help, params=list(main.cli.params),
                        context_settings=dict(main.cli.context_settings))
    for _, command in defined().values():
        group.add_command(command)
    return group


def _help(group: click.Group, width: int) -> str:
    done = CliRunner().invoke(group, ["--help"], prog_name="durability", terminal_width=width)
    assert done.exit_code == 0, done.output
    return done.output


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
def test_the_help_listing_is_the_one_the_commands_make(width: int) -> None:
    lazy = main._Group(name="durability", help=main.cli.help, params=list(main.cli.params),
                       context_settings=dict(main.cli.context_settings))
    text = _help(lazy, width)
    assert text == _help(_eager(), width)
    assert set(re.findall(r"^  ([a-z-]+) ", text, re.M)) >= set(main.TABLE)


def test_commands_resolve_on_demand_and_unknown_names_fail_as_before() -> None:
    group = main._Group(name="durability")
    assert group.list_commands(click.Context(group)) == sorted(main.TABLE)
    assert "log" in group.commands and "nosuch" not in group.commands
    assert group.get_command(click.Context(group), "nosuch") is None
    assert group.get_command(click.Context(group), "log") is defined()["log"][1]
    done = CliRunner().invoke(main.cli, ["lg"], prog_name="durability")
    assert done.exit_code == 2
    assert done.output.strip() == ("durability: invalid-value: No such command 'lg'. "
                                   "(Did you mean one of: 'log', 'logs'?)")


def test_commands_given_up_front_are_kept_beside_the_table() -> None:
    extra = click.Command("extra", help="An extra command.", callback=lambda: click.echo("ran"))
    group = main._Group(name="durability", commands={"extra": extra})
    assert "extra" in group.list_commands(click.Context(group))
    assert set(group.list_commands(click.Context(group))) == set(main.TABLE) | {"extra"}
    assert "An extra command." in _help(group, 100)
    assert CliRunner().invoke(group, ["extra"]).output == "ran\n"


def _imported(stderr: str) -> set[str]:
    """The ``durability`` modules a ``-X importtime`` run reports."""
    return set(re.findall(r"^import time:.*\|\s*(durability(?:\.[\w]+)*)\s*$", stderr, re.M))


def _profiled(*args: str, cwd: Path | None = None) -> tuple[str, set[str]]:
    done = cli(*args, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout, _imported(done.stderr)


def test_version_imports_no_family_and_not_the_store() -> None:
    out, loaded = _profiled("--version")
    assert out.startswith("durability, version ")
    assert "durability.cli.main" in loaded  # the profile is read: the check can fail
    assert not loaded & set(families()), loaded & set(families())
    assert not {m for m in loaded if m.startswith(("durability.store", "durability.config"))}


def test_log_imports_its_own_family_only(repo: Path) -> None:
    cli_json("snapshot", str(repo), "--run", "run-lazy", "--node", "n")
    (repo / "more.txt").write_text("more\n")
    cli_json("snapshot", str(repo), "--run", "run-lazy", "--node", "n")
    out, loaded = _profiled("log", cwd=repo)
    assert "run-lazy" in out
    assert loaded & set(families()) == {"durability.cli.inspect"}
