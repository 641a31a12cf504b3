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


def test_a_session_that_touched_two_worktrees_shows_only_the_served_one(
        tmp_path: Path) -> None:
    """Session sab captured in ``ours``, then ``theirs``, then ``ours`` (one
    attempt: its newest checkpoint before the last was theirs), with a gap in
    each: through ours' server its listing, checkpoints, attempts, gaps and
    log name nothing of theirs (path, commit ids, labels); through theirs'
    server, the converse."""
    import json
    import uuid

    from durability.capture.snapshot import snapshot_now
    from durability.config import Settings
    from durability.gaps import spool
    from durability.gaps.ingest import write_gap
    from durability.store import AttemptKey, Store

    ours = make_git_repo(tmp_path / "ours").resolve()
    theirs = make_git_repo(tmp_path / "theirs").resolve()
    settings = Settings.from_env()
    key = AttemptKey("sab", "session", 0, 1)
    commits: dict[Path, list[str]] = {ours: [], theirs: []}
    for where, label in ((ours, "Edit ours-one.txt"), (theirs, "Edit theirs-secret.txt"),
                         (ours, "Edit ours-two.txt"), (theirs, "Edit theirs-again.txt"),
                         (ours, "Edit ours-three.txt")):
        (where / "f.txt").write_text(label)
        done = snapshot_now(settings, key=key, path=where, label=label,
                            request_id=str(uuid.uuid4()))
        assert done.commit_id is not None
        commits[where].append(done.commit_id)
    with Store(settings.database) as store:
        for where in (ours, theirs):
            write_gap(settings, spool.gap_record(
                run_id="sab", request_id=f"gap-{where.name}", reason="timeout",
                node_id="session", iteration=0, attempt=1, worktree=str(where),
                source="hook", tool_use_id=None, detail=f"timed out in {where}"),
                lambda: store)
    seen: dict[Path, dict[str, dict]] = {}

    def reader(where: Path):
        async def body(mcp: Mcp) -> None:
            got = seen.setdefault(where, {})
            got["sessions"] = await mcp.call("sessions")
            for tool in ("snapshots", "attempts", "gaps", "logs"):
                got[tool] = await mcp.call(tool, run_id="sab")
            got["latest"] = await mcp.call("snapshots")  # the default session
        return body

    serve(ours, reader(ours))
    serve(theirs, reader(theirs))
    for mine, other in ((ours, theirs), (theirs, ours)):
        got = seen[mine]
        text = json.dumps(got)
        assert str(other) not in text and other.name + "-" not in text
        assert not [c for c in commits[other] if c in text]
        assert all(c in text for c in commits[mine])
        (listed,) = got["sessions"]["sessions"]
        assert (listed["run_id"], listed["worktree"]) == ("sab", str(mine))
        assert (listed["checkpoints"], listed["gaps"]) == (len(commits[mine]), 1)
        assert [c["commit_id"] for c in got["snapshots"]["checkpoints"]] == commits[mine]
        assert got["snapshots"]["total"] == len(commits[mine]) == got["latest"]["total"]
        (attempt,) = got["attempts"]["attempts"]
        assert (attempt["worktree"], attempt["jj_pointer"]) == (str(mine), commits[mine][-1])
        assert [g["request_id"] for g in got["gaps"]["gaps"]] == [f"gap-{mine.name}"]
        logged = [e for e in got["logs"]["events"] if e["kind"] == "checkpoint"]
        assert [e["detail"]["commit_id"] for e in logged] == commits[mine]
        assert got["logs"]["total"] == len(got["logs"]["events"])
    # The CLI, a person's view, still shows the whole session.
    assert len(cli_json("snapshots", "sab")) == 5


def test_no_event_or_gap_of_another_worktree_or_machine_reaches_the_agent(
        tmp_path: Path) -> None:
    """Session sx touched ours and a worktree whose path is not ASCII; an
    event (watch-ended) names that path, and another machine sharing the
    store filed a gap in its own worktree at our very path under the same
    session id.  Through ours' server: `logs`, `gaps` and `sessions` hold
    none of them (compared as text, not as JSON's escapes)."""
    import json
    import uuid

    from durability.capture.snapshot import snapshot_now
    from durability.config import Settings
    from durability.runs.run_rows import Runs
    from durability.store import AttemptKey, Store, now_ms
    from durability.store.models import Gap

    ours = make_git_repo(tmp_path / "ours").resolve()
    theirs = make_git_repo(tmp_path / "thé-ïrs-项目").resolve()
    settings = Settings.from_env()
    key = AttemptKey("sx", "session", 0, 1)
    for where in (ours, theirs, ours):
        (where / "f.txt").write_text(f"{where.name} {uuid.uuid4()}\n")
        assert snapshot_now(settings, key=key, path=where, label="Edit f.txt",
                            request_id=str(uuid.uuid4())).commit_id is not None
    with Runs(settings.database) as runs:
        runs.note("sx", "watch-ended", node_id="session",
                  detail={"iteration": 0, "attempt": 1, "worktree": str(theirs),
                          "reason": "the worktree is gone"})
    with Store(settings.database, host="another-machine") as elsewhere:
        assert elsewhere.add_gaps([Gap(now_ms(), "sx", "gap-elsewhere", "timeout", "session",
                                       0, 1, str(ours), "hook", None,
                                       "timed out on another machine")]) == 1
    got: dict[str, object] = {}

    async def body(mcp: Mcp) -> None:
        got["logs"] = await mcp.call("logs", run_id="sx")
        got["gaps"] = await mcp.call("gaps", run_id="sx")
        got["sessions"] = await mcp.call("sessions")

    serve(ours, body)
    text = json.dumps(got, ensure_ascii=False)
    assert theirs.name not in text
    assert "gap-elsewhere" not in text
    assert "another machine" not in text
    assert got["gaps"]["gaps"] == []  # type: ignore[index]
    (listed,) = got["sessions"]["sessions"]  # type: ignore[index]
    assert (listed["run_id"], listed["checkpoints"], listed["gaps"]) == ("sx", 2, 0)
    assert [e["kind"] for e in got["logs"]["events"]].count("checkpoint") == 2  # type: ignore[index]
