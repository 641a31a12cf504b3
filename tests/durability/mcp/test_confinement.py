"""The agent is the MCP client: it reaches the worktree the server was
started in, not every worktree the state knows.  A run id of another
project, or a ``worktree`` naming one, is refused (``invalid-value``) by every
tool that reads or writes files, so the agent can neither restore another
project's tree, read its files through show/diff, nor write a checkpoint into
its repository.  A person may lift this with ``durability mcp --any-worktree``.
"""

from __future__ import annotations

from pathlib import Path

from tests.durability.mcp.test_server import Mcp, serve
from tests.helpers import cli, cli_json, make_git_repo


def _projects(tmp_path: Path) -> tuple[Path, Path]:
    """Project ``ours`` (session ra) and project ``theirs`` (session rb, two
    checkpoints: README.md "theirs v1", then "theirs v2")."""
    ours = make_git_repo(tmp_path / "ours").resolve()
    theirs = make_git_repo(tmp_path / "theirs").resolve()
    (ours / "sub").mkdir()
    assert cli("snapshot", str(ours), "--run", "ra", "--node", "session").returncode == 0
    for text in ("theirs v1\n", "theirs v2\n"):
        (theirs / "README.md").write_text(text)
        assert cli("snapshot", str(theirs), "--run", "rb", "--node", "session").returncode == 0
    return ours, theirs


def test_another_projects_worktree_and_runs_are_out_of_reach(tmp_path: Path) -> None:
    ours, theirs = _projects(tmp_path)
    (ours / "sub" / "link-to-theirs").symlink_to(theirs)

    async def body(mcp: Mcp) -> None:
        # Another project's run: no restore (dry or real), no reading its files.
        for tool, extra in (("restore", {"seq": 1}), ("restore", {"seq": 1, "dry_run": True}),
                            ("show", {}), ("diff", {"seq": 1, "to_worktree": True,
                                                    "patch": True}),
                            ("snapshots", {}), ("gaps", {}), ("attempts", {}),
                            ("snapshot_now", {})):
            assert await mcp.error(tool, run_id="rb", **extra) == "invalid-value", tool
        # A worktree argument naming another project.
        for tool in ("sessions", "log", "snapshots", "show", "restore", "snapshot_now"):
            assert await mcp.error(tool, worktree=str(theirs)) == "invalid-value", tool
        assert await mcp.error("snapshot_now", worktree=str(theirs), run_id="x") == \
            "invalid-value"
        # Nor by a relative path, or a link inside this worktree to the other one.
        for other in ("../theirs", "sub/link-to-theirs"):
            assert await mcp.error("log", worktree=other) == "invalid-value", other
        # The listing of sessions is this worktree's only (no other project's paths).
        listed = await mcp.call("sessions")
        assert [s["run_id"] for s in listed["sessions"]] == ["ra"]
        # The server's own worktree, by any path inside it, still serves.
        assert (await mcp.call("sessions", worktree=str(ours / "sub")))["total"] == 1
        assert (await mcp.call("restore", seq=1, dry_run=True))["worktree"] == str(ours)
        assert (await mcp.call("snapshots", run_id="ra"))["total"] == 1

    serve(ours, body)
    assert (theirs / "README.md").read_text() == "theirs v2\n"
    assert [r["seq"] for r in cli_json("snapshots", "rb")] == [1, 2]
    assert cli("snapshots", "x", "--json").returncode != 0


def test_any_worktree_lets_a_person_open_every_project(tmp_path: Path) -> None:
    ours, theirs = _projects(tmp_path)

    async def body(mcp: Mcp) -> None:
        assert (await mcp.call("sessions"))["total"] == 2
        done = await mcp.call("restore", run_id="rb", seq=1)
        assert done["worktree"] == str(theirs)

    serve(ours, body, "--any-worktree")
    assert (theirs / "README.md").read_text() == "theirs v1\n"
