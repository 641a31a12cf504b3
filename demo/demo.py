"""`make demo`: every agent tool call becomes a restorable jj checkpoint.

A scripted agent session in a temporary colocated jj repository, driven
through the installed ``durability`` command exactly as Claude Code drives it
(a PostToolUse payload on the hook's stdin after each tool call):

1. start the snapshot service;
2. write, edit and delete files (one deletion by a shell-style ``rm``);
3. SIGKILL the service and carry on: the hook captures in-process;
4. make one capture fail on purpose, so a gap is on record;
5. restart the service (it replaces the dead one's socket) and carry on;
6. list checkpoints, gaps and attempts with the CLI;
7. restore an earlier checkpoint, then undo the restore.

Every claim is checked; the demo exits 1 if anything did not happen.  State,
socket and spool live in a private temporary folder, removed at the end
(``--keep`` leaves it for inspection).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from demokit import DemoFailure, Sandbox, check, find_tool, say, step, tree_of

APP_V1 = 'def greet(name):\n    return "hello " + name\n'
APP_V2 = 'def greet(name: str) -> str:\n    return f"hello, {name}!"\n'


class Story:
    """The agent session, one tool call at a time, with what we expect."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        #: The tree each checkpoint must hold, by seq (what restore must bring back).
        self.trees: dict[int, dict[str, bytes]] = {}
        self.captured: list[str] = []  # tool_use_ids that must have a checkpoint
        self.failed: list[str] = []  # tool_use_ids that must be gaps

    # -- tool calls ------------------------------------------------------------

    def write(self, rel: str, text: str, **hook_env: str) -> str:
        path = self.box.repo / rel
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return self._tool("Write", {"file_path": str(path), "content": text},
                          {"type": "update" if existed else "create", "filePath": str(path),
                           "content": text, "structuredPatch": []}, hook_env)

    def edit(self, rel: str, old: str, new: str) -> str:
        path = self.box.repo / rel
        original = path.read_text(encoding="utf-8")
        path.write_text(original.replace(old, new), encoding="utf-8")
        return self._tool("Edit", {"file_path": str(path), "old_string": old,
                                   "new_string": new, "replace_all": False},
                          {"filePath": str(path), "oldString": old, "newString": new,
                           "originalFile": original, "structuredPatch": [],
                           "userModified": False, "replaceAll": False}, {})

    def shell_rm(self, rel: str) -> str:
        """What the Bash tool does for ``rm``: a subprocess the hook never sees."""
        done = subprocess.run([find_tool("rm"), "--", rel], cwd=self.box.repo,
                              capture_output=True, text=True, check=False, timeout=30)
        check(done.returncode == 0 and not (self.box.repo / rel).exists(),
              f"`rm {rel}` ran as a subprocess and deleted the file")
        return self._tool("Bash", {"command": f"rm {rel}", "description": f"Delete {rel}"},
                          {"stdout": "", "stderr": "", "interrupted": False,
                           "isImage": False}, {})

    def read(self, rel: str) -> str:
        path = self.box.repo / rel
        text = path.read_text(encoding="utf-8")
        return self._tool("Read", {"file_path": str(path)},
                          {"type": "text", "file": {"filePath": str(path), "content": text}}, {})

    def _tool(self, name: str, tool_input: dict[str, Any], response: dict[str, Any],
              hook_env: dict[str, str]) -> str:
        env = {**self.box.env, **hook_env} if hook_env else None
        started = time.monotonic()
        tool_use_id, done = self.box.hook(name, tool_input, response, env=env)
        took_ms = (time.monotonic() - started) * 1000
        where = tool_input.get("file_path") or tool_input.get("command")
        say(f"{name:<5} {Path(str(where)).name if name != 'Bash' else where!s:<14} "
            f"-> hook {tool_use_id} exited 0 in {took_ms:.0f} ms")
        if done.stderr.strip():
            say(f"      hook stderr: {done.stderr.strip()}")
        return tool_use_id

    # -- expectations ------------------------------------------------------------

    def checkpoints(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.box.cli_json("snapshots", self.box.session_id)
        return rows

    def expect_new_checkpoint(self, tool_use_id: str) -> dict[str, Any]:
        """The call's checkpoint is the newest, with the next seq."""
        rows = self.checkpoints()
        latest = rows[-1] if rows else {}
        check(latest.get("tool_use_id") == tool_use_id and latest.get("seq") == len(rows),
              f"checkpoint seq {latest.get('seq')} ({str(latest.get('commit_id'))[:12]}, "
              f"label {latest.get('label')!r}) records {tool_use_id}")
        self.trees[int(latest["seq"])] = tree_of(self.box.repo)
        self.captured.append(tool_use_id)
        return latest


def show_tree(title: str, tree: dict[str, bytes]) -> None:
    say(f"{title}:")
    for rel, data in tree.items():
        first = data.decode("utf-8", "replace").splitlines()[0] if data else ""
        say(f"  {rel:<16} {len(data):>4} bytes  | {first}")
    if not tree:
        say("  (no files)")


def start(story: Story) -> None:
    step(1, "start the snapshot service in a private sandbox")
    box = story.box
    box.init_repo()
    say(f"sandbox:  {box.root}")
    say(f"repo:     {box.repo} (jj git init --colocate)")
    say(f"state:    DURABILITY_HOME={box.env['DURABILITY_HOME']}")
    say(f"socket:   DURABILITY_SOCKET={box.env['DURABILITY_SOCKET']}")
    pid = box.start_service()
    answer = box.ping()
    check(answer is not None and answer.get("pid") == pid,
          f"`durability serve --detach` started the service (pid {pid}); it answers a ping")


def agent_works(story: Story) -> None:
    step(2, "the agent writes, edits and deletes files; each tool call is checkpointed")
    story.expect_new_checkpoint(story.write("src/app.py", APP_V1))
    story.expect_new_checkpoint(story.write("notes.txt", "TODO: remove this scratch file\n"))
    story.expect_new_checkpoint(story.edit("src/app.py", APP_V1, APP_V2))
    story.expect_new_checkpoint(story.shell_rm("notes.txt"))
    answer = story.box.ping()
    check(answer is not None and answer.get("captures") == 4,
          f"the service ran those captures itself (ping: {answer and answer.get('captures')} "
          "captures)")


def service_dies(story: Story) -> None:
    step(3, "SIGKILL the service mid-session; the hook captures in-process instead")
    box = story.box
    pid = box.service_pid
    box.kill_service(signal.SIGKILL)
    socket_file = Path(box.env["DURABILITY_SOCKET"])
    check(box.ping() is None, f"service pid {pid} is dead and nothing answers on the socket")
    say(f"its stale socket file is still there: {socket_file.exists()}")
    story.expect_new_checkpoint(story.write("src/util.py", "def double(x):\n    return 2 * x\n"))
    story.expect_new_checkpoint(story.write("README.md", "# demo project\n\nGreets people.\n"))
    check(not box.cli_json("gaps", box.session_id),
          "no gap: with the service gone, no checkpoint was lost")


def capture_fails(story: Story) -> None:
    step(4, "one capture fails on purpose (DURABILITY_JJ points at a missing jj)")
    box = story.box
    before = len(story.checkpoints())
    missing_jj = str(box.root / "no-such-jj")
    tool_use_id = story.write("config.json", '{"greeting": "hello"}\n', DURABILITY_JJ=missing_jj)
    story.failed.append(tool_use_id)
    check(len(story.checkpoints()) == before, "no checkpoint was recorded for that call")
    gaps = box.cli_json("gaps", box.session_id)
    check(len(gaps) == 1 and gaps[0]["reason"] == "jj-missing"
          and gaps[0]["tool_use_id"] == tool_use_id,
          f"it is on record as a gap: reason {gaps[0]['reason'] if gaps else None!r}, "
          f"tool call {tool_use_id}")


def service_returns(story: Story) -> None:
    step(5, "restart the service (it replaces the stale socket); the next call catches up")
    box = story.box
    pid = box.start_service()
    check(box.ping() is not None, f"a new service (pid {pid}) answers on the same socket")
    row = story.expect_new_checkpoint(story.edit("src/util.py", "2 * x", "x + x"))
    check("config.json" in story.trees[int(row["seq"])],
          "config.json, written during the failed call, is inside this checkpoint")
    rows_before = len(story.checkpoints())
    story.read("src/app.py")
    check(len(story.checkpoints()) == rows_before,
          "a Read that changed nothing added no checkpoint (same commit: deduplicated)")
    answer = box.ping()
    check(answer is not None and answer.get("captures") == 2,
          f"both calls went through the new service (ping: {answer and answer['captures']} "
          "captures)")


def list_everything(story: Story) -> list[dict[str, Any]]:
    step(6, "list checkpoints, gaps and attempts with the CLI")
    box = story.box
    say(f"$ durability snapshots {box.session_id}")
    say(box.cli("snapshots", box.session_id).stdout.rstrip())
    say(f"$ durability gaps {box.session_id}")
    say(box.cli("gaps", box.session_id).stdout.rstrip())
    say(f"$ durability attempts {box.session_id}")
    say(box.cli("attempts", box.session_id).stdout.rstrip())
    rows = story.checkpoints()
    seqs = [r["seq"] for r in rows]
    check(seqs == list(range(1, len(rows) + 1)), f"seqs are contiguous: {seqs}")
    recorded = [r["tool_use_id"] for r in rows]
    check(recorded == story.captured,
          f"every successful tool call has exactly one checkpoint ({len(recorded)})")
    check(not set(story.failed) & set(recorded), "the failed call is a gap, not a checkpoint")
    attempts = box.cli_json("attempts", box.session_id)
    check(len(attempts) == 1 and attempts[0]["jj_pointer"] == rows[-1]["commit_id"],
          "the attempt's jj_pointer is the latest checkpoint's commit")
    return rows


def restore_and_undo(story: Story, rows: list[dict[str, Any]]) -> None:
    step(7, "restore checkpoint seq 2, then undo the restore")
    box = story.box
    readme = box.repo / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "Unsaved line, no tool call.\n",
                      encoding="utf-8")
    say("someone edits README.md outside any tool call (no hook, no checkpoint yet)")
    before = tree_of(box.repo)
    show_tree("files before the restore", before)
    say(f"$ durability restore {box.session_id} --node session --seq 2")
    done = box.cli_json("restore", box.session_id, "--node", "session", "--seq", "2")
    after = tree_of(box.repo)
    show_tree("files after the restore", after)
    check(after == story.trees[2], "the worktree is byte-for-byte the tree of seq 2 "
          "(app.py v1 and notes.txt back; util.py, README.md, config.json gone)")
    pre = done["pre_restore"]
    latest = story.checkpoints()[-1]
    check(pre["seq"] == len(rows) + 1 and latest["source"] == "pre-restore"
          and latest["commit_id"] == pre["commit_id"],
          f"a pre-restore checkpoint (seq {pre['seq']}) holds the tree from before, "
          "unsaved README.md line included")
    say(f"$ durability restore {box.session_id} --node session --seq {pre['seq']}")
    box.cli_json("restore", box.session_id, "--node", "session", "--seq", str(pre["seq"]))
    undone = tree_of(box.repo)
    show_tree("files after the undo", undone)
    check(undone == before, "undo: the worktree is back as it was before the restore")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary sandbox")
    args = parser.parse_args(argv)
    started = time.monotonic()
    box: Sandbox | None = None
    try:
        box = Sandbox()
        story = Story(box)
        start(story)
        agent_works(story)
        service_dies(story)
        capture_fails(story)
        service_returns(story)
        restore_and_undo(story, list_everything(story))
    except (DemoFailure, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
        print(f"\nDEMO FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if box is not None:
            box.close(keep=args.keep)
            if args.keep:
                print(f"\n(sandbox kept at {box.root})")
    print(f"\nDemo complete in {time.monotonic() - started:.1f}s: every tool call is a "
          "restorable checkpoint, the failure is on record, nothing was lost.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
