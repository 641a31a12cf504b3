"""A new user's session, end to end with the real Claude Code CLI (issue 11).

One scripted session edits a repository through Write, Read, Edit and Bash
(sed, mv, cp of a binary, a symlink, an executable bit, rm of a file and a
folder, names with spaces, non-ASCII and non-UTF-8 bytes), on a colocated jj
repository and on a plain git repository.  Then, through the installed
command as a user runs it: ``snapshots`` labels each call, ``show --json``
says what each call changed, ``log`` says the same, ``restore --path`` of a
deleted file and a deleted folder brings them back, and the undo it prints
restores the tree exactly.  The non-UTF-8 name, which jj cannot record, is an
``unreadable-path`` gap on jj and a captured file on git.

A missing CLI fails the test (run `make setup`); it never skips.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_anthropic import FakeAnthropic, Script
from tests.e2e.test_claude_code import CLAUDE_TIMEOUT_S, claude_env, claude_exe
from tests.helpers import cli, cli_json, git, jj, make_git_repo, make_jj_repo, tree_manifest

pytestmark = pytest.mark.slow

BAD = os.fsdecode(b"bad\xffname.txt")


def _calls(repo: Path) -> list[tuple[str, dict[str, Any]]]:
    app = str(repo / "src" / "app.py")

    def bash(command: str) -> tuple[str, dict[str, Any]]:
        return "Bash", {"command": command, "description": "step"}

    return [
        ("Write", {"file_path": app, "content": "print('hi')\n"}),
        ("Read", {"file_path": app}),
        ("Edit", {"file_path": app, "old_string": "hi", "new_string": "hello"}),
        bash("sed -i 's/hello/bonjour/' src/app.py"),
        bash("printf 'x\\n' > 'file with spaces.txt' && printf 'caf\\303\\251\\n' > 'naïve é.txt'"),
        bash("mv 'file with spaces.txt' 'moved file.txt'"),
        bash("cp /bin/true tool.bin && ln -s src/app.py link && chmod +x keep.txt"),
        bash("rm README.md && rm -r olddir"),
        bash("printf 'bad\\n' > \"$(printf 'bad\\377name.txt')\""),
    ]


def _labels(repo: Path) -> list[str]:
    return ["Write src/app.py", "Edit src/app.py", "Bash sed -i 's/hello/bonjour/' src/app.py",
            "Bash printf 'x\\n' > 'file with spaces.txt' && printf 'caf\\303\\251\\n' > "
            "'naïve é.txt'",
            "Bash mv 'file with spaces.txt' 'moved file.txt'",
            "Bash cp /bin/true tool.bin && ln -s src/app.py link && chmod +x keep.txt",
            "Bash rm README.md && rm -r olddir"]


def _repo(kind: str, path: Path) -> Path:
    repo = (make_jj_repo(path) if kind == "jj" else make_git_repo(path)).resolve()
    (repo / "README.md").write_text("hello\n")
    (repo / "keep.txt").write_text("keep\n")
    (repo / "olddir").mkdir()
    (repo / "olddir" / "x.txt").write_text("x\n")
    if kind == "jj":
        jj(repo, "commit", "-m", "init")
    else:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "init")
    return repo


def _session(repo: Path) -> str:
    calls = _calls(repo)

    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        done = len({r["tool_use_id"] for r in results})
        return calls[done] if done < len(calls) else None

    with FakeAnthropic(Script(plan=plan, final_text="done")) as fake:
        ran = subprocess.run(
            [claude_exe(), "-p", "Edit the project.", "--output-format", "json",
             "--permission-mode", "bypassPermissions"],
            cwd=repo, env=claude_env(fake.base_url), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=CLAUDE_TIMEOUT_S)
        assert ran.returncode == 0, (ran.stdout[-2000:], ran.stderr[-2000:])
        results = {r["tool_use_id"]: r.get("is_error") for r in fake.tool_results()}
    assert len(results) == len(calls) and not any(results.values()), results
    return str(json.loads(ran.stdout)["session_id"])


def _changed(run: str, seq: int) -> list[tuple[str, str, str | None, str | None]]:
    shown = cli_json("show", run, "--seq", str(seq))
    return [(f["status"], f["path"], f["old_mode"], f["new_mode"]) for f in shown["files"]]


@pytest.mark.parametrize("kind", ["jj", "git"])
def test_a_claude_session_of_edits_and_shell_commands_reads_and_restores_as_it_happened(
        tmp_path: Path, kind: str) -> None:
    repo = _repo(kind, tmp_path / "repo")
    assert cli_json("install-hook", "--scope", "project", "--project-dir", str(repo))["installed"]
    run = _session(repo)

    rows = cli_json("snapshots", run)
    assert {r["harness"] for r in rows} == {"claude"}
    # The Read changed nothing (no checkpoint); jj cannot record the last
    # call's file, so that call changed nothing it could capture either.
    assert [r["label"] for r in rows] == _labels(repo) + (
        [] if kind == "jj" else ["Bash printf 'bad\\n' > \"$(printf 'bad\\377name.txt')\""])
    assert _changed(run, 2) == [("modified", "src/app.py", "100644", "100644")]
    assert _changed(run, 5) == [("renamed", "moved file.txt", "100644", "100644")]
    assert _changed(run, 6) == [("modified", "keep.txt", "100644", "100755"),
                                ("added", "link", None, "120000"),
                                ("added", "tool.bin", None, "100755")]
    assert _changed(run, 7) == [("deleted", "README.md", "100644", None),
                                ("deleted", "olddir/x.txt", "100644", None)]
    gaps = [(g["reason"], g["detail"].split(":")[0]) for g in cli_json("gaps", run)]
    if kind == "jj":
        assert gaps == [("unreadable-path", "bad\\xffname.txt")]
    else:
        assert gaps == [] and _changed(run, 8) == [("added", BAD, None, "100644")]
    log = cli_json("log", str(repo))
    assert [e["seq"] for e in log if e["kind"] == "checkpoint"][:2] == [len(rows), len(rows) - 1]

    # The deleted file and folder come back; nothing else moves; undo is exact.
    before = tree_manifest(repo)
    done = cli_json("restore", run, "--seq", "6", "--path", "README.md", "--path", "olddir")
    assert (done["written"], done["deleted"], done["paths"]) == (2, 0, ["README.md", "olddir"])
    after = tree_manifest(repo)
    assert after["README.md"][2] == b"hello\n" and after["olddir/x.txt"][2] == b"x\n"
    assert {k: v for k, v in after.items() if k not in ("README.md", "olddir/x.txt")} == before
    undo = cli("restore", run, "--seq", str(done["pre_restore"]["seq"]))
    assert undo.returncode == 0, undo.stderr
    assert tree_manifest(repo) == before
