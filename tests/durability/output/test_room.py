"""The output room's place in the house: the store never reaches it (the
store stands alone), importing it costs nothing until a model is used, and
a command loads the models only when it prints JSON."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import durability

STORE = Path(durability.__file__).parent / "store"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_store_imports_neither_the_room_nor_pydantic() -> None:
    sources = sorted(STORE.rglob("*.py"))
    assert sources
    for path in sources:
        bad = {m for m in _imports(path)
               if m.split(".")[0] == "pydantic" or m.startswith("durability.output")}
        assert not bad, (path.name, bad)


def _loaded_after(code: str) -> list[str]:
    probe = ("import sys; " + code + "; print(' '.join(m for m in ('pydantic', "
             "'durability.output.records', 'durability.output.answers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    return done.stdout.split()


def test_importing_the_room_loads_no_model_until_one_is_named() -> None:
    assert _loaded_after("import durability.output") == []
    assert _loaded_after("import durability.output as o; o.SessionOut") == [
        "pydantic", "durability.output.records"]
    assert _loaded_after("import durability.output as o; o.RestoredOut") == [
        "pydantic", "durability.output.records", "durability.output.answers"]


def test_a_command_loads_the_models_only_to_print_json(tmp_path: Path) -> None:
    run = ("from click.testing import CliRunner; from durability.cli.main import cli; "
           "r = CliRunner().invoke(cli, {args!r}); assert r.exit_code == 0, r.output")
    assert "durability.output.records" not in _loaded_after(run.format(args=["stop"]))
    assert "durability.output.records" in _loaded_after(run.format(args=["stop", "--json"]))
