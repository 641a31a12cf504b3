"""``durability log`` lists the tool calls whose checkpoint gc collected
(decision 0061), on real git and jj repositories: boundaries recorded by the
real hook, a real gc, the installed command.  Each collected call is an entry
at the time it was recorded, marked ``GC`` (``"kind": "call-collected"`` in
``--json``) with its session, boundary seq, tool call id and tool; every other
entry is exactly what ``log`` printed before; the calls cost one query and no
blob read; and the command the note names does rewind the conversation."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from durability import output
from durability.cli.table import timeline_table
from durability.config import Settings
from durability.inspect import timeline as timeline_module
from durability.inspect.timeline import Entry, timeline
from durability.retention.gc import run_gc
from durability.retention.policy import DAY_MS
from durability.store import Store, db
from durability.store.boundaries import Boundary, boundaries, by_checkpoint
from tests.durability.inspect.test_large_files import _blobs, _Counting, _Reads
from tests.durability.rewind.test_rewind_after_gc import SESSION, THIN, _gc, _session
from tests.helpers import cli, hook_payload, run_cli, run_cli_json, tree_manifest

#: What the calls of ``_session`` are once gc ran: seq, call id, tool, the
#: checkpoint seq each named (t2, a Read, dedups onto t1's).
COLLECTED = [(4, "t4", "Write", 3), (3, "t3", "Write", 2), (2, "t2", "Read", 1),
             (1, "t1", "Write", 1)]


def _gc_session(tmp_path: Path, kind: str) -> tuple[Path, Path, list[Boundary]]:
    """``_session``'s five calls, gc'd (t1 to t4 collected), then a later
    manual checkpoint of another run: newer than every call."""
    repo, path = _session(tmp_path, kind)
    settings = Settings.from_env()
    with Store(settings.database) as store:
        _gc(settings, store)
        calls = [b for b in boundaries(store, SESSION) if b.collected]
    assert [b.seq for b in calls] == [1, 2, 3, 4]
    (repo / "later.txt").write_text("later\n")
    run_cli_json("snapshot", str(repo), "--run", "later", "--node", "n", "--label", "after gc")
    return repo, path, calls


def _before(repo: Path) -> tuple[list[Entry], Any]:
    """What ``log`` listed before decision 0061: the timeline without the
    collected calls, each checkpoint with the boundaries naming it."""
    with Store(Settings.from_env().database) as store:
        entries = timeline(store, repo)
        calls = by_checkpoint(store, {e.checkpoint.run_id for e in entries if e.checkpoint})

    def of(e: Entry) -> list[Boundary]:
        return calls.get((e.checkpoint.key, e.checkpoint.seq), []) if e.checkpoint else []

    return entries, of


def _cells(table: str) -> list[list[str]]:
    """A table's rows (the header too), split into cells as ``_table`` pads them."""
    return [re.split(r" {2,}", line.rstrip()) for line in table.splitlines()]


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_log_lists_each_collected_call_at_its_place_marked(tmp_path: Path, kind: str) -> None:
    repo, _, calls = _gc_session(tmp_path, kind)
    old, of = _before(repo)
    # --json, from the installed command.
    done = cli("log", str(repo), "--json")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    entries = json.loads(done.stdout)
    assert [(e["kind"], e["run_id"], e["seq"]) for e in entries] == [
        ("checkpoint", "later", 1), ("checkpoint", SESSION, 4),
        *(("call-collected", SESSION, seq) for seq, *_ in COLLECTED)]
    shown = [e for e in entries if e["kind"] == "call-collected"]
    assert [(e["seq"], e["tool_use_id"], e["tool_name"], e["checkpoint_seq"]) for e in shown] == (
        COLLECTED)
    # Each is its boundary row, every field, as `rewind --json` names a boundary.
    assert shown == [{"kind": "call-collected", **dataclasses.asdict(b)}
                     for b in reversed(calls)]
    assert all(e["commit_id"] == "" and e["worktree"] == str(repo) for e in shown)
    # Newest first, by the time each call was recorded.
    times = [e["created_at_ms"] for e in entries]
    assert times == sorted(times, reverse=True)
    # Every other entry is exactly what log printed before.
    assert [e for e in entries if e["kind"] != "call-collected"] == [
        output.entry_out(e, of(e)).dump() for e in old]

    # The table, from the installed command.
    done = cli("log", str(repo))
    assert done.returncode == 0, done.stderr
    rows = _cells(done.stdout)
    assert rows[0] == ["TIME", "RUN", "NODE/IT/ATT", "SEQ", "SOURCE", "CHANGES", "LABEL"]
    marked = [r for r in rows[1:] if r[3] == "GC"]
    assert [r[1:] for r in marked] == [
        [SESSION, "session/0/1", "GC", "call", "collected",
         f"{tool} {call}: checkpoint collected by gc, files not restorable [calls {seq}]"]
        for seq, call, tool, _ in COLLECTED]
    assert [r for r in rows[1:] if r[3] != "GC"] == _cells(timeline_table(old, of))[1:]
    assert rows.index(marked[0]) == 3  # after the later checkpoint and seq 4 [calls 5]
    # One note on stderr says what GC means, naming a command that works.
    hint = f"durability rewind {SESSION} --seq 4 --conversation-only"
    assert done.stderr == (f"durability: GC: a tool call whose checkpoint gc collected: its "
                           f"files cannot be restored; its conversation can: {hint}\n")
    before = tree_manifest(repo)
    talk = run_cli_json(*hint.split()[1:])
    assert talk["code"] is None and talk["boundary"]["seq"] == 4
    assert tree_manifest(repo) == before


def test_a_limit_counts_the_collected_calls_as_entries(tmp_path: Path) -> None:
    repo, _, _ = _gc_session(tmp_path, "git")
    done = run_cli("log", str(repo), "--limit", "3")
    rows = _cells(done.stdout)[1:]
    assert [(r[1], r[3]) for r in rows] == [("later", "1"), (SESSION, "4"), (SESSION, "GC")]
    assert done.stderr.splitlines() == [
        f"durability: GC: a tool call whose checkpoint gc collected: its files cannot be "
        f"restored; its conversation can: durability rewind {SESSION} --seq 4 "
        f"--conversation-only",
        "durability: the newest 3 entries; older ones: --limit N or --all"]
    # Two entries: no call among them, no note about one.
    two = run_cli("log", str(repo), "--limit", "2")
    assert [r[3] for r in _cells(two.stdout)[1:]] == ["1", "4"]
    assert two.stderr == "durability: the newest 2 entries; older ones: --limit N or --all\n"
    assert [e["kind"] for e in run_cli_json("log", str(repo), "--all")] == (
        ["checkpoint"] * 2 + ["call-collected"] * 4)


def test_the_collected_calls_cost_one_query_and_no_blob_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions of collected calls in one worktree: still one query."""
    repo, path = _session(tmp_path, "git")
    second = "9d7c1c4e-0000-4000-8000-000000000061"
    for n in range(3):
        (repo / f"g{n}.txt").write_text(f"{n}\n")
        payload = hook_payload(repo, session_id=second, tool_use_id=f"s{n}",
                               tool_name="Write", transcript_path=str(path))
        assert run_cli("snapshot-hook", input=json.dumps(payload)).returncode == 0
    settings = Settings.from_env()
    with Store(settings.database) as store:
        run_gc(settings, store, THIN, now_ms=int(time.time() * 1000) + DAY_MS)
        assert sum(b.collected for b in boundaries(store, SESSION)) == 4
        assert sum(b.collected for b in boundaries(store, second)) == 2
    statements: list[str] = []
    execute = db.NumberedConnection.execute

    def recorded(self: db.NumberedConnection, sql: str, parameters: Any = (), /) -> Any:
        statements.append(sql)
        return execute(self, sql, parameters)

    reads = _Reads()
    opened = timeline_module.open_checkpoints

    def counted(worktree: Any, env: Any = None) -> Any:
        found = opened(worktree) if env is None else opened(worktree, env)
        found.odb.add_backend(_Counting(reads), 1_000)
        return found

    monkeypatch.setattr(db.NumberedConnection, "execute", recorded)
    monkeypatch.setattr(timeline_module, "open_checkpoints", counted)
    entries = run_cli_json("log", str(repo))
    assert sorted((e["run_id"], e["seq"]) for e in entries if e["kind"] == "call-collected"
                  ) == [*((SESSION, n) for n in (1, 2, 3, 4)), (second, 1), (second, 2)]
    collected = [s for s in statements if "b.commit_id=" in s]
    assert len(collected) == 1, collected
    assert _blobs(repo, reads.read) == set()
