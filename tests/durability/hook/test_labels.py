"""Checkpoint labels say what a tool call touched: the file, the files of a
Codex patch, or the shell command (shortened, control characters escaped)."""

from __future__ import annotations

import pytest

from durability.hook.entry import tool_label

ROOT = "/home/you/repo"


@pytest.mark.parametrize(("payload", "label"), [
    ({"tool_name": "Write", "tool_input": {"file_path": f"{ROOT}/src/a.py"}}, "Write src/a.py"),
    ({"tool_name": "Bash", "tool_input": {"command": "pytest -q tests/"}},
     "Bash pytest -q tests/"),
    ({"tool_name": "Bash", "tool_input": {"command": "echo a\nrm -rf b\x1b[2J"}},
     "Bash echo a\\nrm -rf b\\x1b[2J"),
    ({"tool_name": "shell", "tool_input": {"command": ["bash", "-lc", "make test"]}},
     "shell bash -lc make test"),
    ({"tool_name": "run_shell_command", "tool_input": {"command": "npm test"}},
     "run_shell_command npm test"),
    ({"tool_name": "apply_patch", "tool_input": {"input": (
        "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n"
        "*** Add File: docs/new.md\n+hi\n*** Delete File: old.txt\n*** End Patch\n")}},
     "apply_patch src/app.py docs/new.md old.txt"),
    ({"tool_name": "apply_patch", "tool_input": {"command": [
        "apply_patch", f"*** Begin Patch\n*** Update File: {ROOT}/x.py\n*** End Patch"]}},
     "apply_patch x.py"),
    ({"tool_name": "Read", "tool_input": {}}, "Read"),
    ({"tool_input": {"command": "ls"}}, None),
])
def test_the_label_names_what_the_call_touched(payload: dict[str, object],
                                                label: str | None) -> None:
    assert tool_label(payload, ROOT) == label


def test_a_long_command_is_shortened() -> None:
    label = tool_label({"tool_name": "Bash", "tool_input": {"command": "x" * 5000}}, ROOT)
    assert label is not None and len(label) == len("Bash ") + 200 and label.endswith("…")
