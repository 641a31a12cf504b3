"""`make demo`: from `install-hook` to restorable checkpoints, as a new user.

A scripted agent session in a temporary colocated jj repository, driven the
way Claude Code drives it.  Nothing is prepared by hand:

1. ``durability install-hook --scope project`` writes the hook into the
   project's ``.claude/settings.json``; the demo reads its command back.
2. ``durability doctor`` checks the whole path and runs that hook the way
   Claude Code does; it must pass.
3. Every tool call of the session then runs THE COMMAND FROM settings.json
   through ``/bin/sh -c`` with ``PATH=/usr/bin:/bin`` (no venv, no jj on it)
   and the PostToolUse payload on stdin, exactly as Claude Code runs hooks.
   The first call finds no service: the hook captures in process and starts
   the service by itself (autostart); the next calls go through it.
4. SIGKILL the service mid-session: the next call is captured in process by
   the hook, which starts a new service by itself (checked with
   ``durability status``: a new pid, that had captured nothing yet).
5. ``durability stop``, then one capture fails on purpose (``DURABILITY_JJ``
   names a jj that is too old, with ``DURABILITY_AUTOSTART=0`` so no service
   steps in): it becomes a gap.
6. ``durability serve --detach`` (idempotent: a second run starts nothing);
   the next call's checkpoint holds the failed call's file.
7. List sessions, checkpoints (``snapshots --latest``), gaps and attempts.
8. Restore an earlier checkpoint, then undo the restore; ``durability stop``.

Every claim is checked; the demo exits 1 if anything did not happen.  HOME,
state, socket and spool live in a private temporary folder, removed at the
end (``--keep`` leaves it for inspection): the user's own settings, hooks and
service are never touched.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from demokit import HOOK_PATH, DemoFailure, Sandbox, check, find_tool, say, step, tree_of

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

    def write(self, rel: str, text: str, **extra_env: str) -> str:
        path = self.box.repo / rel
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return self._tool("Write", {"file_path": str(path), "content": text},
                          {"type": "update" if existed else "create", "filePath": str(path),
                           "content": text, "structuredPatch": []}, extra_env)

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
              extra_env: dict[str, str]) -> str:
        started = time.monotonic()
        tool_use_id, done = self.box.hook(name, tool_input, response, extra_env=extra_env)
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
        say(f"  {rel:<21} {len(data):>4} bytes  | {first}")
    if not tree:
        say("  (no files)")


def show(box: Sandbox, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    """Run ``durability ARGS`` and print it as a user would see it."""
    say(f"$ durability {' '.join(args)}")
    done = box.cli(*args, ok=ok)
    say(done.stdout.rstrip())
    return done


def install(story: Story) -> None:
    step(1, "install the hook into a fresh project: durability install-hook")
    box = story.box
    box.init_repo()
    say(f"sandbox:  {box.root} (HOME, state, socket and spool are all in here)")
    say(f"repo:     {box.repo} (jj git init --colocate)")
    say(f"$ durability install-hook --scope project --project-dir {box.repo} --json")
    result = box.install_hook()
    settings = Path(result["settings"])
    say(f"wrote {settings}; its PostToolUse hook runs:")
    say(f"  {box.hook_command}")
    for note in result.get("notes", []):
        say(f"note: {note}")
    check(settings == box.repo / ".claude" / "settings.json" and result["changed"],
          "install-hook wrote the hook into the project's .claude/settings.json")
    command = box.hook_command or ""
    check(command == result["command"] and str(box.durability) in command,
          "the command read back from settings.json is the one install-hook reported, and it "
          "names the installed durability by its absolute path (no PATH needed)")


def doctor(story: Story) -> None:
    step(2, "check the whole path: durability doctor")
    box = story.box
    say(f"$ durability doctor --project-dir {box.repo}")
    done = box.run([box.durability, "doctor", "--project-dir", str(box.repo)])
    say(done.stdout.rstrip())
    lines = done.stdout.splitlines()
    check(done.returncode == 0, f"doctor passes (exit {done.returncode})")
    check(any(line.startswith("ok") and "hook claude project" in line
              and f"PATH={HOOK_PATH}" in line for line in lines),
          f"it ran the installed hook as Claude Code would (/bin/sh -c, PATH={HOOK_PATH})")
    check(box.status() is None, "no service is running yet")


def agent_works(story: Story) -> None:
    step(3, "the agent works; the first tool call starts the service by itself")
    box = story.box
    story.expect_new_checkpoint(story.write("src/app.py", APP_V1))
    first = box.wait_for_service()
    check(first.get("captures") == 0,
          f"the hook captured that call in process and started the service (pid "
          f"{first.get('pid')}), which then answered `durability status`")
    show(box, "status")
    story.expect_new_checkpoint(story.write("notes.txt", "TODO: remove this scratch file\n"))
    story.expect_new_checkpoint(story.edit("src/app.py", APP_V1, APP_V2))
    story.expect_new_checkpoint(story.shell_rm("notes.txt"))
    answer = box.status()
    check(answer is not None and answer.get("pid") == first.get("pid")
          and answer.get("captures") == 3,
          f"the service ran the next three captures itself (status: "
          f"{answer and answer.get('captures')} captures)")


def service_dies(story: Story) -> None:
    step(4, "SIGKILL the service mid-session; the hook captures in process and "
            "starts a new one")
    box = story.box
    answer = box.status()
    pid = int(answer["pid"]) if answer else 0
    check(pid > 0, f"the service runs (pid {pid})")
    box.kill(pid, signal.SIGKILL)
    check(box.status() is None, f"service pid {pid} is dead; nothing answers on the socket")
    say(f"its stale socket file is still there: {Path(box.env['DURABILITY_SOCKET']).exists()}")
    story.expect_new_checkpoint(story.write("src/util.py", "def double(x):\n    return 2 * x\n"))
    new = box.wait_for_service(not_pid=pid)
    check(new.get("captures") == 0,
          f"that call was captured in process, and the hook started a new service "
          f"(pid {new.get('pid')}) on the same socket by itself")
    story.expect_new_checkpoint(story.write("README.md", "# demo project\n\nGreets people.\n"))
    answer = box.status()
    check(answer is not None and answer.get("pid") == new.get("pid")
          and answer.get("captures") == 1, "the next call went through the new service")
    check(not box.cli_json("gaps", box.session_id),
          "no gap: with the service gone, no checkpoint was lost")


def capture_fails(story: Story) -> None:
    step(5, "stop the service; one capture fails on purpose (a too-old jj, no autostart)")
    box = story.box
    show(box, "stop")
    before = len(story.checkpoints())
    old_jj = box.fake_old_jj()
    say(f"the next hook runs with DURABILITY_JJ={old_jj} (it says jj 0.20.0) "
        "DURABILITY_AUTOSTART=0")
    tool_use_id = story.write("config.json", '{"greeting": "hello"}\n',
                              DURABILITY_JJ=str(old_jj), DURABILITY_AUTOSTART="0")
    story.failed.append(tool_use_id)
    check(len(story.checkpoints()) == before, "no checkpoint was recorded for that call")
    gaps = box.cli_json("gaps", box.session_id)
    check(len(gaps) == 1 and gaps[0]["reason"] == "jj-too-old"
          and gaps[0]["tool_use_id"] == tool_use_id,
          f"it is on record as a gap: reason {gaps[0]['reason'] if gaps else None!r}, "
          f"tool call {tool_use_id}")
    check(box.status() is None, "with DURABILITY_AUTOSTART=0 the hook started no service")


def service_returns(story: Story) -> None:
    step(6, "start the service again: durability serve --detach; the next call catches up")
    box = story.box
    show(box, "serve", "--detach")
    started = json.loads(box.cli("serve", "--detach", "--json").stdout)
    check(started.get("already_running") is True,
          f"serve --detach is idempotent: a second run found pid {started.get('pid')} "
          "and started nothing")
    row = story.expect_new_checkpoint(story.edit("src/util.py", "2 * x", "x + x"))
    check("config.json" in story.trees[int(row["seq"])],
          "config.json, written during the failed call, is inside this checkpoint")
    rows_before = len(story.checkpoints())
    story.read("src/app.py")
    check(len(story.checkpoints()) == rows_before,
          "a Read that changed nothing added no checkpoint (same commit: deduplicated)")
    answer = box.status()
    check(answer is not None and answer.get("pid") == started.get("pid")
          and answer.get("captures") == 2,
          f"both calls went through that service (status: "
          f"{answer and answer.get('captures')} captures)")


def list_everything(story: Story) -> list[dict[str, Any]]:
    step(7, "list sessions, checkpoints, gaps and attempts with the CLI")
    box = story.box
    show(box, "sessions")
    sessions = box.cli_json("sessions")
    check([s.get("run_id") for s in sessions] == [box.session_id],
          "`durability sessions` lists the agent's session")
    latest = show(box, "snapshots", "--latest")
    check(latest.stdout == box.cli("snapshots", box.session_id).stdout,
          "`snapshots --latest` (run in the project) is that session's listing")
    show(box, "gaps", box.session_id)
    show(box, "attempts", box.session_id)
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
    step(8, "restore checkpoint seq 2, then undo the restore; stop the service")
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
    show(box, "stop")
    check(box.status() is None, "the service is gone")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary sandbox")
    args = parser.parse_args(argv)
    started = time.monotonic()
    box: Sandbox | None = None
    try:
        box = Sandbox()
        story = Story(box)
        install(story)
        doctor(story)
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
    print(f"\nDemo complete in {time.monotonic() - started:.1f}s: from install-hook and "
          "doctor on, every tool call is a restorable checkpoint, the failure is on record, "
          "nothing was lost.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
