"""The scripted agent CLI of ``agentkit.Scripted``: plays one program.

Run as ``python scripted_agent.py PROGRAM.json`` in the task's worktree;
reads its prompt on stdin (kept in ``prompt.txt`` of its private folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    program = json.loads(Path(sys.argv[1]).read_text())
    private = Path(sys.argv[1]).parent
    (private / "prompt.txt").write_text(sys.stdin.read())
    (private / "pid").write_text(str(os.getpid()))
    (private / "env.json").write_text(json.dumps(dict(os.environ)))
    session = program["session_id"]
    for step in program["steps"]:
        if "emit" in step:
            line = dict(step["emit"])
            if line.get("type") == "result":
                line.setdefault("session_id", session)
            print(json.dumps(line), flush=True)
        elif "session" in step:
            print(json.dumps({"type": "session", "id": session}), flush=True)
        elif "write" in step:
            path, text = step["write"]
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text)
            with (private.parent.parent / "tools.log").open("a") as log:
                log.write(f"{path}\n")
        elif "hook" in step:
            payload = {"hook_event_name": "PostToolUse", "session_id": session,
                       "tool_use_id": step["hook"], "cwd": os.getcwd(), "tool_name": "Write",
                       "tool_input": {"file_path": os.path.abspath(step.get("path") or ".")},
                       "tool_response": {}}
            done = subprocess.run(program["hook"], input=json.dumps(payload).encode(),
                                  check=False, capture_output=True)
            with (private / "hook.log").open("ab") as log:
                log.write(done.stdout + done.stderr + b"\n")
        elif "ls" in step:  # the tree as this invocation found it
            root = Path.cwd()
            found = {str(f.relative_to(root)): f.read_text() for f in sorted(root.rglob("*"))
                     if f.is_file() and not {".git", ".jj"} & set(f.relative_to(root).parts)}
            (private / "tree.json").write_text(json.dumps(found))
        elif "sleep" in step:
            time.sleep(step["sleep"])
        elif "child" in step:  # a grandchild that outlives us unless the group is killed
            # "detached": in a session of its own, as Claude Code runs its Bash tool
            detached = step["child"] == "detached"
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                     stdout=subprocess.DEVNULL, start_new_session=detached)
            name = "detached.pid" if detached else "child.pid"
            (private / name).write_text(str(child.pid))
        elif "hang" in step:
            (private / "hanging").write_text("1")
            time.sleep(600)
        elif "stderr" in step:
            sys.stderr.write(step["stderr"])
            sys.stderr.flush()
        elif "exit" in step:
            return int(step["exit"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
