"""The workflow runner: declare a workflow, run it durably, resume it.

Public: ``from durability.runs import Workflow, TaskContext`` (docs/how-to/runs.md).
It imports only ``durability.store`` and ``durability.ground`` (the layer rule
of docs/ARCHITECTURE.md): nothing of jj, git, click or watchdog.
"""

from __future__ import annotations

from durability.runs.context import TaskContext
from durability.runs.workflow import Workflow

__all__ = ["TaskContext", "Workflow"]
