"""The engine tests' shared ``runs`` store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durability.runs.run_rows import Runs
from tests.durability.runs import wfkit


@pytest.fixture
def runs(db_location: Path | str) -> Iterator[Runs]:
    """A fresh run store, on each backend (``db_location``); ``wfkit``'s
    gates, call log and clock are reset around it so no test sees another's."""
    wfkit.reset()
    with Runs(db_location) as store:
        yield store
    wfkit.reset()
