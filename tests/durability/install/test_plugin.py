"""The Claude Code plugin (.claude-plugin/plugin.json and hooks/hooks.json)
checked against the plugin schema, not only parsed: the manifest's keys and
their types, the hook events the harness knows, and each hook's form.  The
command must name its program by a path: a harness whose PATH lacks a bare
``durability`` runs nothing and gets exit 127 on every tool call."""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
PLUGIN_ROOT_VAR = "${CLAUDE_PLUGIN_ROOT}"

#: The manifest's documented keys; only ``name`` is required.
MANIFEST_KEYS = frozenset({
    "name", "version", "description", "author", "homepage", "repository", "license",
    "keywords", "commands", "agents", "skills", "hooks", "mcpServers", "outputStyles",
    "lspServers", "userConfig", "channels",
})
#: Events Claude Code fires hooks for; a misspelt one is silently never run.
HOOK_EVENTS = frozenset({
    "PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "Notification",
    "UserPromptSubmit", "Stop", "StopFailure", "SubagentStart", "SubagentStop", "PreCompact",
    "PostCompact", "SessionStart", "SessionEnd", "PermissionDenied",
})
#: The events about one tool call: their groups select tools with ``matcher``.
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure",
                         "PermissionRequest", "PermissionDenied"})
KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
SEMVER = re.compile(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?")
# The harness hands the command to a shell: anything past one plain argv
# (pipes, redirections, substitutions) would run there.
SHELL_SYNTAX = re.compile(r"[;&|<>`\\\n]|\$(?!\{CLAUDE_PLUGIN_ROOT\})")


def manifest_problems(manifest: Any) -> list[str]:
    if not isinstance(manifest, dict):
        return ["the manifest is not an object"]
    problems = [f"unknown key {k!r}" for k in sorted(set(manifest) - MANIFEST_KEYS)]
    name = manifest.get("name")
    if not (isinstance(name, str) and KEBAB.fullmatch(name)):
        problems.append(f"name {name!r} is missing or not kebab-case")
    if "version" in manifest and not (isinstance(manifest["version"], str)
                                      and SEMVER.fullmatch(manifest["version"])):
        problems.append(f"version {manifest['version']!r} is not semantic")
    for key in ("description", "homepage", "license"):
        if key in manifest and not isinstance(manifest[key], str):
            problems.append(f"{key} is not a string")
    author = manifest.get("author", {"name": "-"})
    if not (isinstance(author, dict) and isinstance(author.get("name"), str)
            and all(isinstance(author[k], str) for k in author)):
        problems.append(f"author {author!r} is not an object with a name")
    keywords = manifest.get("keywords", [])
    if not (isinstance(keywords, list) and all(isinstance(k, str) for k in keywords)):
        problems.append("keywords is not a list of strings")
    return problems


def command_problems(command: Any, plugin_root: Path) -> list[str]:
    if not (isinstance(command, str) and command.strip()):
        return [f"command {command!r} is not a non-empty string"]
    if SHELL_SYNTAX.search(command):
        return [f"command {command!r} is more than one plain program call"]
    program = shlex.split(command)[0]
    if program.startswith(PLUGIN_ROOT_VAR + "/"):
        path = plugin_root / program[len(PLUGIN_ROOT_VAR) + 1:]
        if not path.is_file():
            return [f"{program} is not a file of the plugin"]
        if not os.stat(path).st_mode & stat.S_IXUSR:
            return [f"{program} is not executable"]
        return []
    if os.path.isabs(program):
        return []
    return [f"command {command!r} runs {program!r} from PATH: start it with "
            f"{PLUGIN_ROOT_VAR}/ or an absolute path"]


def hook_problems(entry: Any, plugin_root: Path) -> list[str]:
    if not isinstance(entry, dict):
        return [f"hook {entry!r} is not an object"]
    problems = []
    if entry.get("type") != "command":
        problems.append(f"type {entry.get('type')!r} is not 'command'")
    problems += command_problems(entry.get("command"), plugin_root)
    timeout = entry.get("timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        problems.append(f"timeout {timeout!r} is not a positive number of seconds")
    return problems


def hooks_problems(doc: Any, plugin_root: Path) -> list[str]:
    if not (isinstance(doc, dict) and isinstance(doc.get("hooks"), dict)):
        return ["hooks.json is not an object with a 'hooks' object"]
    problems = [f"unknown key {k!r}" for k in sorted(set(doc) - {"description", "hooks"})]
    if not isinstance(doc.get("description", ""), str):
        problems.append("description is not a string")
    if not doc["hooks"]:
        problems.append("no hook is registered")
    for event, groups in doc["hooks"].items():
        if event not in HOOK_EVENTS:
            problems.append(f"{event!r} is not a Claude Code hook event")
        if not (isinstance(groups, list) and groups):
            problems.append(f"{event}: not a non-empty list of groups")
            continue
        for group in groups:
            if not (isinstance(group, dict) and isinstance(group.get("hooks"), list)
                    and group["hooks"]):
                problems.append(f"{event}: group {group!r} has no hooks")
                continue
            problems += [f"{event}: unknown group key {k!r}"
                         for k in sorted(set(group) - {"matcher", "hooks"})]
            matcher = group.get("matcher")
            if event in TOOL_EVENTS and not isinstance(matcher, str):
                problems.append(f"{event}: matcher {matcher!r} is not a string")
            for entry in group["hooks"]:
                problems += [f"{event}: {p}" for p in hook_problems(entry, plugin_root)]
    return problems


def _load(name: str) -> Any:
    return json.loads((ROOT / name).read_text())


def test_the_manifest_follows_the_plugin_schema() -> None:
    manifest = _load(".claude-plugin/plugin.json")
    assert manifest_problems(manifest) == []
    assert manifest["name"] == "worktree-durability"


def test_the_hooks_follow_the_plugin_schema() -> None:
    """Fails while hooks.json runs a bare ``durability``: the plugin must
    bring its own launcher (under ${CLAUDE_PLUGIN_ROOT}), since the harness's
    PATH need not hold the one the user installed."""
    assert hooks_problems(_load("hooks/hooks.json"), ROOT) == []


# -- the checks above can fail: each of these breaks one rule -------------------------

GOOD_HOOKS: dict[str, Any] = {"description": "d", "hooks": {"PostToolUse": [
    {"matcher": "*", "hooks": [{"type": "command", "timeout": 15,
                                "command": PLUGIN_ROOT_VAR + "/bin/hook snapshot-hook"}]}]}}


def _entry(doc: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = doc["hooks"]["PostToolUse"][0]["hooks"][0]
    return entry


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda doc: _entry(doc).__setitem__(key, value)


BREAKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "bare-program": _set("command", "durability snapshot-hook"),
    "relative-path": _set("command", "bin/hook snapshot-hook"),
    "missing-launcher": _set("command", PLUGIN_ROOT_VAR + "/bin/nothing"),
    "not-executable": _set("command", PLUGIN_ROOT_VAR + "/bin/plain"),
    "shell-pipe": _set("command", PLUGIN_ROOT_VAR + "/bin/hook | tee log"),
    "substitution": _set("command", "/usr/bin/env $(whoami)"),
    "type": _set("type", "prompt"),
    "timeout-text": _set("timeout", "15"),
    "timeout-bool": _set("timeout", True),
    "timeout-zero": _set("timeout", 0),
    "no-timeout": lambda doc: _entry(doc).pop("timeout"),
    "no-command": lambda doc: _entry(doc).pop("command"),
    "event": lambda doc: doc["hooks"].__setitem__("PostToolCall", doc["hooks"].pop("PostToolUse")),
    "lowercase-event": lambda doc: doc["hooks"].__setitem__(
        "postToolUse", doc["hooks"].pop("PostToolUse")),
    "no-matcher": lambda doc: doc["hooks"]["PostToolUse"][0].pop("matcher"),
    "empty-group": lambda doc: doc["hooks"]["PostToolUse"][0].__setitem__("hooks", []),
    "no-events": lambda doc: doc.__setitem__("hooks", {}),
    "top-level-key": lambda doc: doc.__setitem__("PostToolUse", []),
}


@pytest.fixture
def plugin_root(tmp_path: Path) -> Path:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "hook").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "hook").chmod(0o755)
    (tmp_path / "bin" / "plain").write_text("#!/bin/sh\n")
    return tmp_path


def test_a_well_formed_plugin_passes(plugin_root: Path) -> None:
    assert hooks_problems(GOOD_HOOKS, plugin_root) == []
    absolute = copy.deepcopy(GOOD_HOOKS)
    _entry(absolute)["command"] = "/usr/local/bin/durability snapshot-hook"
    assert hooks_problems(absolute, plugin_root) == []


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_broken_rule_is_reported(plugin_root: Path, name: str) -> None:
    doc = copy.deepcopy(GOOD_HOOKS)
    BREAKS[name](doc)
    assert hooks_problems(doc, plugin_root), name


@pytest.mark.parametrize(("key", "value"), [
    ("name", None), ("name", "Worktree Durability"), ("version", "v1"), ("version", 1),
    ("author", "someone"), ("author", {"email": "a@b"}), ("keywords", "jj"),
    ("description", 3), ("hook", "./hooks/hooks.json"),
])
def test_each_broken_manifest_field_is_reported(key: str, value: Any) -> None:
    manifest = {**_load(".claude-plugin/plugin.json"), key: value}
    if value is None:
        del manifest[key]
    assert manifest_problems(manifest), (key, value)
