"""A workflow can import a package of its own named ``engine`` (or ``store``,
``runs``): the toolkit installs one import package, ``durability``, and
nothing else at the top level.  Before the house move a project with
``engine/physics.py`` failed with ``ModuleNotFoundError: No module named
'engine.physics'``, because the toolkit's own ``engine`` shadowed it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.durability.runs import isokit
from tests.helpers import cli, run_cli_json

WORKFLOW = textwrap.dedent('''
    from pydantic import BaseModel

    from durability.runs import TaskContext, Workflow
    from engine.physics import SPEED

    workflow = Workflow("own-engine")


    class Out(BaseModel):
        speed: int


    @workflow.task(output=Out, checkpoints=False)
    def measure(ctx: TaskContext) -> Out:
        from engine.physics import SPEED as again
        return Out(speed=SPEED + again)
''')


def test_a_workflow_imports_its_own_engine_package(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "engine").mkdir(parents=True)
    (project / "engine" / "__init__.py").write_text("")
    (project / "engine" / "physics.py").write_text("SPEED = 21\n")
    (project / "wf.py").write_text(WORKFLOW)
    repo = isokit.make_repo(tmp_path / "repo", "git")
    done = cli("run", str(project / "wf.py"), "--run-id", "own", "--worktree", str(repo))
    assert done.returncode == 0, done.stderr
    [task] = run_cli_json("run-status", "own")["tasks"]
    assert task["outputs"][0]["output"] == {"speed": 42}


def test_the_wheel_installs_durability_alone_at_the_top() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[3]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["durability*"]
    tops = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    assert tops == {"durability", "tests"}
