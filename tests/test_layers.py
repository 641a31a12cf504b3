"""The house's layer rules (docs/ARCHITECTURE.md, "Floors"), read from the
imports of every module under durability/ with ``ast``: module-level,
in-function and TYPE_CHECKING imports alike, relative ones resolved.

A room is a package directly under durability/ (``store``, ``runs``, ...) or a
top-level module (``config``, ``__main__``; ``__init__`` is the package
itself).  Each rule is a function from the import graph to its violations, so
a test can feed it a fake import and see it caught.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "durability"

#: The floors, from the top.  A room imports only rooms on floors below its
#: own (and itself); a new room fails ``test_every_room_is_on_a_floor`` until
#: it is placed here.  docs/ARCHITECTURE.md lists the same floors.
FLOORS: list[tuple[str, ...]] = [
    ("__main__",),
    ("cli",),
    ("doctor", "mcp", "worktree_ops"),
    ("service", "integrations", "install"),
    ("watch", "hook", "browse", "retention", "output"),
    ("rewind",),
    ("restore",),
    ("capture", "remote"),
    ("gaps", "inspect"),
    ("backends", "runs"),
    ("config", "store", "agents"),
    ("ground", "__init__"),
]

#: Imports that break a rule today, each with why it stands; a rule's check
#: skips exactly these, and ``test_known_exceptions_still_exist`` fails once
#: one is gone (so the list only shrinks).
KNOWN: dict[tuple[str, str], str] = {
    ("durability.ground.paths", "platformdirs"):
        "the platform's state folder when DURABILITY_HOME is unset: imported lazily, "
        "off the hook's fast path",
}

#: The standard library: CPython's list, plus the built-in SHA-256 module of
#: other versions (``_sha256`` up to 3.11, ``_sha2`` from 3.12; ground/ids.py).
STDLIB = frozenset(sys.stdlib_module_names) | {"_sha256", "_sha2"}

#: Third-party packages the state store and the runner must not know of.
WORKTREE_LIBRARIES = ("click", "pygit2", "watchdog", "textual")

Graph = Mapping[str, Iterable[str]]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every dotted name ``source`` imports, wherever the statement is: for
    ``from a import b`` both ``a`` and ``a.b`` (``b`` may be a module)."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def resolve(name: str, modules: set[str]) -> str:
    """The module a dotted name lands in: the longest known prefix of it, or
    its top-level package for anything outside durability."""
    if not (name == "durability" or name.startswith("durability.")):
        return name.split(".")[0]
    while name not in modules and "." in name:
        name = name.rpartition(".")[0]
    return name


def scan(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package and the modules it imports."""
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        names = imported_names(path.read_text(encoding="utf-8"), module,
                               is_package=path.name == "__init__.py")
        graph[module] = {resolve(n, modules) for n in names} - {module}
    return graph


def room(module: str) -> str | None:
    """The room of a durability module; None outside durability."""
    if module == "durability":
        return "__init__"
    if module.startswith("durability."):
        return module.split(".")[1]
    return None


def _edges(graph: Graph, known: Mapping[tuple[str, str], str]) -> Iterable[tuple[str, str]]:
    for importer, targets in graph.items():
        for target in targets:
            if (importer, target) not in known:
                yield importer, target


def _within(module: str, rooms: Iterable[str]) -> bool:
    return any(module == f"durability.{r}" or module.startswith(f"durability.{r}.")
               for r in rooms)


def only_from(graph: Graph, source: str, allowed: tuple[str, ...], *,
              stdlib_only: bool = False,
              known: Mapping[tuple[str, str], str] = KNOWN) -> list[str]:
    """Imports by room ``source`` of durability rooms outside ``allowed`` (and,
    with ``stdlib_only``, of anything outside the standard library)."""
    bad = []
    for importer, target in _edges(graph, known):
        if room(importer) != source:
            continue
        if room(target) is None:
            if stdlib_only and target not in STDLIB:
                bad.append(f"{importer} imports {target} (not the standard library)")
        elif not _within(target, allowed):
            bad.append(f"{importer} imports {target}")
    return sorted(bad)


def no_libraries(graph: Graph, source: str, libraries: tuple[str, ...] = WORKTREE_LIBRARIES,
                 known: Mapping[tuple[str, str], str] = KNOWN) -> list[str]:
    return sorted(f"{i} imports {t}" for i, t in _edges(graph, known)
                  if room(i) == source and t in libraries)


def cli_importers(graph: Graph, known: Mapping[tuple[str, str], str] = KNOWN) -> list[str]:
    """Imports of durability.cli from anywhere but the cli and __main__."""
    return sorted(f"{i} imports {t}" for i, t in _edges(graph, known)
                  if room(t) == "cli" and room(i) not in ("cli", "__main__"))


def room_graph(graph: Graph) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for importer, targets in graph.items():
        here = room(importer)
        if here is None:
            continue
        out = rooms.setdefault(here, set())
        out.update(r for t in targets if (r := room(t)) is not None and r != here)
    return rooms


def room_cycles(graph: Graph) -> list[list[str]]:
    """The circles between rooms (every import counts, known ones too): the
    strongly connected components of more than one room."""
    rooms = room_graph(graph)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(rooms.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(rooms):
        if node not in index:
            visit(node)
    return found


def floor_violations(graph: Graph, floors: list[tuple[str, ...]] = FLOORS,
                     known: Mapping[tuple[str, str], str] = KNOWN) -> list[str]:
    """Imports of a room on the same floor or one above (floors from the top)."""
    level = {r: n for n, rooms in enumerate(floors) for r in rooms}
    bad = []
    for importer, target in _edges(graph, known):
        a, b = room(importer), room(target)
        if a is None or b is None or a == b or a not in level or b not in level:
            continue
        if level[b] <= level[a]:
            bad.append(f"{importer} ({a}, floor {level[a] + 1}) imports {target} "
                       f"({b}, floor {level[b] + 1})")
    return sorted(bad)


def unplaced_rooms(graph: Graph, floors: list[tuple[str, ...]] = FLOORS) -> list[str]:
    """Rooms of the tree on no floor, on two, or on a floor but not in the tree."""
    placed = [r for rooms in floors for r in rooms]
    present = {r for m in graph if (r := room(m)) is not None}
    problems = [f"{r}: on no floor" for r in sorted(present - set(placed))]
    problems += [f"{r}: on a floor, not in durability/" for r in sorted(set(placed) - present)]
    problems += [f"{r}: on two floors" for r in sorted({r for r in placed if placed.count(r) > 1})]
    return problems


# The rules, each a check of the whole graph.
RULES = {
    "store": lambda g: only_from(g, "store", ("store", "ground")),
    "runs": lambda g: only_from(g, "runs", ("runs", "store", "agents", "ground")),
    "agents": lambda g: only_from(g, "agents", ("agents", "ground")),
    "ground": lambda g: only_from(g, "ground", ("ground",), stdlib_only=True),
    "store-libraries": lambda g: no_libraries(g, "store"),
    "runs-libraries": lambda g: no_libraries(g, "runs"),
    "agents-libraries": lambda g: no_libraries(g, "agents"),
    "cli": cli_importers,
    "cycles": room_cycles,
    "floors": floor_violations,
    "placed": unplaced_rooms,
}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return scan()


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_tree_keeps_the_rule(graph: dict[str, set[str]], rule: str) -> None:
    assert RULES[rule](graph) == []


def test_the_scan_sees_the_tree(graph: dict[str, set[str]]) -> None:
    # A scan that found nothing would pass every rule.
    assert "durability.ground.store_errors" in graph["durability.ground.errors"]  # in a function
    assert "durability.cli.main" in graph["durability.__main__"]
    assert "durability.store.database" in graph["durability.runs.run_rows"]
    assert len(graph) > 100


def test_known_exceptions_still_exist(graph: dict[str, set[str]]) -> None:
    for importer, target in KNOWN:
        assert target in graph.get(importer, set()), f"{importer} -> {target} is gone: drop it"


# Each rule caught: (the rule, the fake module, its source).
FAKES = [
    ("store", "durability.store.fake", "import durability.backends.jj\n"),
    ("store", "durability.store.fake", "def f():\n    from durability.config import Settings\n"),
    ("store", "durability.store.fake", "from ..runs import workflow\n"),
    ("runs", "durability.runs.fake", "from durability.capture import capturer\n"),
    ("runs", "durability.runs.fake", "def f():\n    import durability.config\n"),
    ("ground", "durability.ground.fake", "import click\n"),
    ("ground", "durability.ground.fake", "def f():\n    from durability.store import Store\n"),
    ("ground", "durability.ground.fake", "from .. import config\n"),
    ("store-libraries", "durability.store.fake", "import pygit2\n"),
    ("runs-libraries", "durability.runs.fake", "def f():\n    import click\n"),
    ("cli", "durability.service.fake", "from durability.cli.options import pass_settings\n"),
    ("cli", "durability.hook.fake", "def f():\n    import durability.cli.main\n"),
    ("cycles", "durability.ground.fake", "from durability.hook import entry\n"),
    ("cycles", "durability.backends.fake",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from durability.capture import x\n"),
    ("floors", "durability.capture.fake", "from durability.remote import transport\n"),
    ("floors", "durability.store.fake", "import durability.config\n"),
    ("floors", "durability.gaps.fake", "def f():\n    from durability.hook import entry\n"),
    ("placed", "durability.newroom.fake", "import os\n"),
]


@pytest.mark.parametrize(("rule", "module", "source"), FAKES)
def test_a_fake_violating_import_is_caught(graph: dict[str, set[str]], rule: str, module: str,
                                           source: str) -> None:
    modules = set(graph)
    fake = {k: set(v) for k, v in graph.items()}
    fake[module] = {resolve(n, modules) for n in imported_names(source, module)} - {module}
    assert RULES[rule](graph) == []
    assert RULES[rule](fake) != []


def test_a_floor_naming_a_room_that_is_gone_is_caught(graph: dict[str, set[str]]) -> None:
    assert unplaced_rooms(graph, [*FLOORS, ("engine",)]) == [
        "engine: on a floor, not in durability/"]
    assert unplaced_rooms(graph, [*FLOORS, ("store",)]) == ["store: on two floors"]


def test_a_known_exception_is_only_that_import(graph: dict[str, set[str]]) -> None:
    # Without its entry the known import is caught, by the ground rule and the floors.
    assert only_from(graph, "ground", ("ground",), stdlib_only=True, known={}) == [
        "durability.ground.paths imports platformdirs (not the standard library)"]
    assert floor_violations(graph, known={}) == []


def test_relative_imports_are_resolved() -> None:
    assert imported_names("from . import a\nfrom ..b import c\n", "durability.x.y") == {
        "durability.x", "durability.x.a", "durability.b", "durability.b.c"}
    assert imported_names("from . import a\n", "durability.x", is_package=True) == {
        "durability.x", "durability.x.a"}


def test_the_architecture_page_lists_these_floors() -> None:
    # docs/ARCHITECTURE.md's "Floors" is the reader's copy of FLOORS: the same
    # rooms on the same floors, in the same order.
    page = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    section = page.split("\n## Floors\n", 1)[1].split("\n## ", 1)[0]
    floors: list[tuple[str, ...]] = []
    for item in re.split(r"\n(?=\d+\. )", section):
        if not re.match(r"\d+\. ", item):
            continue
        names = re.findall(r"`([\w.]+)/?`", item.split("(")[0])
        rooms = tuple(n.removesuffix(".py") for n in names)
        floors.append((*rooms, "__init__") if "package's `__init__`" in item else rooms)
    assert floors == FLOORS
