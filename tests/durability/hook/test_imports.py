"""The hook's fast path stays cheap to import (bench/RESULTS.md): it runs on
every tool call, and each heavy module costs milliseconds of every call."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from durability.ground import ids
from tests.helpers import cli, make_git_repo

# Each of these was measured on the fast path at 3-9 ms (or pulls in the
# third-party stack the fallback needs); none is needed when the service answers.
HEAVY = ("typing", "uuid", "tempfile", "hashlib", "dataclasses", "platform", "inspect",
         "json", "re", "pathlib", "threading", "socket", "enum", "collections",
         "durability.gaps.spool", "durability.store", "durability.runs", "pydantic", "click",
         "filelock", "pygit2")


def test_a_whole_pre_call_hook_loads_no_heavy_module(tmp_path: Path) -> None:
    # Run, not only imported: its watchdog (signal's C module, not signal.py,
    # which imports enum, functools and collections: issue 25) and the call
    # log it writes.  A pre-call hook runs before every tool call.
    repo = make_git_repo(tmp_path / "repo")
    payload = (f'{{"session_id": "s1", "cwd": "{repo}", "hook_event_name": "PreToolUse", '
               f'"tool_name": "Bash", "tool_input": {{"command": "true"}}, '
               f'"tool_use_id": "toolu_1"}}')
    heavy = [*HEAVY, "signal", "functools"]
    code = ("import io, sys; from durability.hook.entry import main; "
            f"main(io.BytesIO({payload.encode()!r})); "
            f"print(' '.join(m for m in {heavy!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.split() == [], done.stderr
    assert "durability:" not in done.stderr  # it announced the call, no gap


def test_importing_the_hook_loads_no_heavy_module() -> None:
    code = ("import sys; import durability.hook.entry; "
            f"print(' '.join(m for m in {list(HEAVY)!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.split() == []


#: Of durability's own modules, what the hook may load: its ground (stdlib-only
#: modules under durability/ground/), itself, and the gap spool's call log.
HOOK_GROUND = ("durability", "durability.hook", "durability.hook.entry", "durability.gaps",
               "durability.gaps.calls")


def outside_the_hook_ground(loaded: list[str]) -> list[str]:
    """The durability modules of ``loaded`` that the hook must not load."""
    return [m for m in loaded if (m == "durability" or m.startswith("durability."))
            and m not in HOOK_GROUND and not m.startswith("durability.ground.")
            and m != "durability.ground"]


def test_importing_the_hook_loads_only_its_ground() -> None:
    code = ("import sys; import durability.hook.entry; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('durability'))))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    loaded = done.stdout.split()
    assert "durability.hook.entry" in loaded and "durability.ground.client" in loaded
    assert outside_the_hook_ground(loaded) == []


def test_a_module_outside_the_hook_ground_is_caught() -> None:
    assert outside_the_hook_ground(["durability.ground.ids", "durability.gaps.calls",
                                    "durability.gaps.spool", "durability.config",
                                    "durability_other"]) == [
        "durability.gaps.spool", "durability.config"]


@pytest.mark.parametrize("data", [b"", b"abc", "é\0x".encode() * 1000])
def test_sha256_hex_matches_hashlib(data: bytes) -> None:
    assert ids.sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_safe_filename_of_an_odd_id_is_stable() -> None:
    name = ids.safe_filename("../../x")
    digest = hashlib.sha256(b"../../x").hexdigest()[:12]
    assert name == f"_.._x-{digest}"
    assert "/" not in name


def test_the_installed_hook_flushes_its_reason_before_its_fast_exit() -> None:
    # __main__ leaves through os._exit to skip the interpreter's teardown;
    # the one-line reason on stderr must still reach the harness.
    done = cli("snapshot-hook", input=b'{"session_id": "sess-exit", "cwd": "/tmp", "tool_')
    assert done.returncode == 0
    assert done.stdout == ""
    assert "bad-hook-input" in done.stderr
    assert done.stderr.endswith("\n")
