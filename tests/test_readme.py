"""README.md stays a front page: at most 8,000 characters, and its first
screen holds exactly the two commands that set up and prove the project,
`make demo` and `make test`, before anything else to type."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 8000
FIRST_SCREEN = 25  # lines


def first_screen_commands(readme: str) -> list[str]:
    """The commands of the first screen: each line of a fenced block (less
    its comment), and any `make ...` or `durability ...` span in the prose."""
    commands: list[str] = []
    fenced = False
    for line in readme.splitlines()[:FIRST_SCREEN]:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            command = line.split("#", 1)[0].strip()
            if command:
                commands.append(command)
        else:
            commands += re.findall(r"`((?:make|durability|pip|jj|git|claude)(?: [^`]*)?)`", line)
    return commands


def test_the_readme_is_at_most_8000_characters() -> None:
    size = len((ROOT / "README.md").read_text())
    assert size <= LIMIT, f"README.md has {size} characters; move detail into docs/"


def test_the_first_screen_holds_exactly_make_demo_and_make_test() -> None:
    assert first_screen_commands((ROOT / "README.md").read_text()) == ["make demo", "make test"]


def test_another_command_on_the_first_screen_is_caught() -> None:
    readme = ("# x\n\n```sh\nmake demo   # the demo\n            # more comment\nmake test\n"
              "```\n\nThen run `durability doctor`.\n")
    assert first_screen_commands(readme) == ["make demo", "make test", "durability doctor"]
    assert first_screen_commands("```sh\nmake test\nmake demo\n```\n") == ["make test", "make demo"]
    late = "\n" * FIRST_SCREEN + "```sh\nmake setup\n```\n"
    assert first_screen_commands("```sh\nmake demo\nmake test\n```\n" + late) == [
        "make demo", "make test"]
