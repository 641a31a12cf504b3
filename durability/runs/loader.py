"""Loading a workflow file: a Python file with a module-level ``Workflow``."""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from durability.ground.store_errors import WorkflowInvalid
from durability.runs.workflow import Workflow

__all__ = ["Loaded", "load_workflow"]

_counter = itertools.count()


@dataclass(frozen=True)
class Loaded:
    workflow: Workflow
    path: Path
    module: types.ModuleType
    #: Modules that were imported while the file ran (candidates for hashing).
    imported: tuple[types.ModuleType, ...]


def load_workflow(path: str | os.PathLike[str]) -> Loaded:
    """Run the file at ``path`` and return its workflow.

    The file's folder is put first on ``sys.path`` so it can import its
    neighbours.  The workflow is the module's ``workflow`` attribute, or its
    only ``Workflow`` instance.
    """
    file = Path(os.path.abspath(path))
    if not file.is_file():
        raise WorkflowInvalid(f"workflow file {file} does not exist")
    folder = str(file.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    # A fresh name per load: resuming in the same process runs the file again.
    name = f"_durability_workflow_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise WorkflowInvalid(f"cannot load {file} as Python")
    module = importlib.util.module_from_spec(spec)
    before = set(sys.modules)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a file that exits is no workflow either
        raise WorkflowInvalid(f"{file}: {type(exc).__name__}: {exc}") from exc
    imported = {sys.modules[n] for n in set(sys.modules) - before if n in sys.modules}
    workflow = _find(module, file)
    workflow.validate()
    return Loaded(workflow, file, module, tuple(imported | _referenced(module)))


def _referenced(module: types.ModuleType) -> set[types.ModuleType]:
    """Modules the file uses that were already imported before it ran."""
    found: set[types.ModuleType] = set()
    for value in vars(module).values():
        if isinstance(value, types.ModuleType):
            found.add(value)
            continue
        owner = sys.modules.get(getattr(value, "__module__", None) or "")
        if owner is not None and owner is not module:
            found.add(owner)
    return found


def _find(module: types.ModuleType, file: Path) -> Workflow:
    found = getattr(module, "workflow", None)
    if isinstance(found, Workflow):
        return found
    candidates = [v for v in vars(module).values() if isinstance(v, Workflow)]
    if len(candidates) != 1:
        raise WorkflowInvalid(f"{file} must define one Workflow (name it `workflow`), "
                              f"found {len(candidates)}")
    return candidates[0]
