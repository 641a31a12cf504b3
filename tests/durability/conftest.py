"""The two kinds of running service the durability tests share.

``service_process`` is the installed ``durability serve`` as a subprocess (what
a hook or the CLI reaches); ``service_inprocess`` is a ``Service`` in this
process, for tests that look inside it (its coalescer, its watcher)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durability.config import Settings
from durability.service.server import Service
from tests.helpers import ServiceProcess, start_service


@pytest.fixture
def service_process(tmp_path: Path) -> Iterator[ServiceProcess]:
    svc = start_service(tmp_path)
    yield svc
    svc.stop()


@pytest.fixture
def service_inprocess(settings: Settings) -> Iterator[Service]:
    with Service(settings) as svc:
        yield svc
