"""docs/reference/ is what scripts/gen-reference.py makes of the code now: the
CLI's commands and options, the environment variables, the exit codes and the
gap reasons.  A change to any of them without regenerating fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference",
                                                  ROOT / "scripts" / "gen-reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_pages_are_what_the_code_generates() -> None:
    stale = _generator().stale()
    assert not stale, f"{stale} differ from the code: run .venv/bin/python scripts/gen-reference.py"


def test_a_stale_or_missing_page_is_named(tmp_path: Path) -> None:
    gen = _generator()
    for path, text in gen.pages().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert gen.stale(tmp_path) == []
    (tmp_path / "docs/reference/exit-codes.md").write_text("| 3 | `not-found` |\n")
    (tmp_path / "docs/reference/cli.md").unlink()
    assert gen.stale(tmp_path) == ["docs/reference/cli.md", "docs/reference/exit-codes.md"]


@pytest.mark.parametrize(("table", "page"), [
    ("ENV_DEFAULTS", "environment_page"), ("STATUS_MEANINGS", "exit_codes_page"),
    ("GAP_MEANINGS", "gap_reasons_page")])
def test_a_name_the_prose_does_not_cover_stops_the_generator(table: str, page: str) -> None:
    # A new variable, status or gap reason in the code, with no line of prose
    # in the script: the script refuses, naming what to add.
    gen = _generator()
    prose = getattr(gen, table)
    dropped = next(iter(prose))
    del prose[dropped]
    with pytest.raises(gen.Stale, match=rf"{table}: add \[.{dropped}.\]"):
        getattr(gen, page)()


def test_the_check_mode_exits_1_on_a_stale_page(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    gen = _generator()
    gen.ROOT = tmp_path
    assert gen.main(["gen-reference.py"]) == 0
    assert gen.main(["gen-reference.py", "--check"]) == 0
    (tmp_path / "docs/reference/gap-reasons.md").write_text("old\n")
    assert gen.main(["gen-reference.py", "--check"]) == 1
    assert capsys.readouterr().err == (
        "docs/reference/gap-reasons.md is stale: run scripts/gen-reference.py\n")
