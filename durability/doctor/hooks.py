"""The hook part of ``durability doctor``: for each harness, is a hook
installed (user, project and local scopes, and the Claude Code plugin), and
does its command run?

"Runs" is proven, not assumed: the command is executed the way the harness
executes it (``/bin/sh -c``, or ``bash -c`` for Gemini CLI) with a minimal
PATH and an empty payload, and must exit 0 with nothing on stdout.  The gap
the empty payload files goes to a throwaway spool, not the user's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from durability.doctor.report import FAIL, OK, WARN, Check
from durability.install import harnesses as install_hook

__all__ = ["MINIMAL_PATH", "hook_checks", "run_hook_command"]

# A harness started from a desktop launcher or a service manager may have no
# more than this; a hook that only works with a richer PATH is a hook that
# silently fails for someone.
MINIMAL_PATH = "/usr/bin:/bin"
PLUGIN_NAME = "worktree-durability"
# A hook's own budget is 10 s; starting Python on a cold cache adds a little.
_RUN_TIMEOUT_S = 30


def hook_checks(project_dir: Path, env: Mapping[str, str]) -> list[Check]:
    checks: list[Check] = []
    for harness in install_hook.HARNESSES:
        found = list(_installed(harness, project_dir, env))
        checks.extend(found)
        if not found:
            checks.append(Check(f"hook {harness}", OK, "not installed",
                                f"to use {harness}: durability install-hook --harness {harness}"))
    plugin = _plugin(env)
    if plugin is not None:
        checks.append(plugin)
    if not any(c.detail != "not installed" for c in checks):
        checks.append(Check("hooks", WARN, "no hook is installed for any harness: tool calls "
                            "are not checkpointed", "durability install-hook (or install the "
                            "Claude Code plugin, see README)"))
    return checks


def _installed(harness: str, project_dir: Path, env: Mapping[str, str]) -> Iterator[Check]:
    spec = install_hook.HARNESSES[harness]
    for scope in spec.scopes:
        path = install_hook.hook_path(harness, scope, project_dir=project_dir, env=env)
        by_event = install_hook.installed_commands(path, harness)
        commands = sorted({c for cs in by_event.values() for c in cs})
        for command in commands:
            check = run_hook_command(f"hook {harness} {scope}", command, path, env,
                                     shell=_shell(harness))
            if check.status == OK and harness == "codex":
                check = _codex_trust(check, path, scope, project_dir, env)
            missing = [e for e in spec.events if e not in by_event]
            if check.status == OK and missing:
                # An install by an older toolkit (Codex's Stop, the pre-call
                # events came later): it runs, but not on every event it should.
                check = Check(check.name, WARN, f"{path}: runs, but {_missing(missing)}",
                              _again(check.name))
            yield check


def _missing(events: list[str]) -> str:
    """What an install lacking ``events`` misses."""
    said = []
    pre = [e for e in events if e in install_hook.PRE_CALL_EVENTS]
    denied = [e for e in events if e in install_hook.DENIED_EVENTS]
    post = [e for e in events
            if e not in install_hook.PRE_CALL_EVENTS | install_hook.DENIED_EVENTS]
    if post:
        said.append(f"not on {' or '.join(post)}, so some edits wait for a later "
                    "checkpoint or are in none")
    if pre:
        said.append(f"not on {' or '.join(pre)}, so a call killed before its post-call "
                    "hook leaves no call-unfinished gap and its writes go under the next "
                    "call's label")
    if denied:
        said.append(f"not on {' or '.join(denied)}, so a call the harness refused to run "
                    "is a call-unfinished gap")
    return "; and ".join(said)


def _our_argv(command: str, env: Mapping[str, str]) -> list[str] | None:
    """The argument list of a hook command of one of our forms, else None:
    ``[/bin/sh] <...>/durability/run-hook.sh [<absolute durability>]`` or
    ``<path>/durability snapshot-hook``, with nothing a shell would act on
    (``${CLAUDE_PLUGIN_ROOT}`` is the one expansion, done here)."""
    import shlex

    plugin_root = env.get("CLAUDE_PLUGIN_ROOT", "")
    text = command.replace("${CLAUDE_PLUGIN_ROOT}", plugin_root) if plugin_root else command
    if any(c in text for c in ";&|`$<>()*?~\n"):
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    if words[:1] in (["/bin/sh"], ["sh"]):
        words = ["/bin/sh", *words[1:]]
        if len(words) in (2, 3) and words[1].endswith("/durability/run-hook.sh") \
                and all(os.path.isabs(w) for w in words[1:]):
            return words
        return None
    if len(words) == 2 and os.path.basename(words[0]) == "durability" \
            and words[1] == "snapshot-hook":
        return words
    return None


def _shell(harness: str) -> str:
    # Gemini CLI runs hooks with bash -c; Claude Code and Codex with sh -c.
    return "/bin/bash" if harness == "gemini" and os.path.exists("/bin/bash") else "/bin/sh"


def run_hook_command(name: str, command: str, where: Path, env: Mapping[str, str], *,
                     shell: str = "/bin/sh", extra_env: Mapping[str, str] | None = None) -> Check:
    """Execute ``command`` as a harness would, with an empty payload.

    Only a command of exactly our own forms is run, and never through a shell:
    the settings file of a project just cloned is not ours to trust, and a
    command that merely *contains* ``durability snapshot-hook`` could do
    anything else first.  Anything else is reported, not run.
    """
    argv = _our_argv(command, {**env, **(extra_env or {})})
    if argv is None:
        return Check(name, WARN, f"{where}: a hook names durability but is not in a form "
                     f"install-hook writes, so doctor does not run it: {command[:120]!r}",
                     _again(name))
    with tempfile.TemporaryDirectory(prefix="durability-doctor-") as spool:
        run_env = {**env, **(extra_env or {}), "PATH": MINIMAL_PATH,
                   "DURABILITY_SPOOL_DIR": spool}
        started = time.monotonic()
        try:
            done = subprocess.run(argv, input=b"", capture_output=True,
                                  env=run_env, timeout=_RUN_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return Check(name, FAIL, f"{where}: the hook did not finish in {_RUN_TIMEOUT_S} s",
                         "run `durability install-hook` again; report it if it persists")
        except OSError as exc:  # not found on the harness's PATH: a shell says 127
            return Check(name, FAIL, f"{where}: the hook cannot run ({exc.strerror}): "
                         f"{argv[0]} is not found with PATH={MINIMAL_PATH}; the harness sees "
                         "exit 127 on every tool call", _again(name))
        ms = (time.monotonic() - started) * 1000
    err = done.stderr.decode("utf-8", "replace").strip().splitlines()
    first = err[0][:200] if err else ""
    again = _again(name)
    if done.returncode != 0:
        return Check(name, FAIL, f"{where}: the hook exits {done.returncode} ({first}); the "
                     "harness sees a failed hook on every tool call", again)
    if done.stdout:
        return Check(name, FAIL, f"{where}: the hook prints on stdout", again)
    if any("toolkit-missing" in line for line in err):
        return Check(name, FAIL, f"{where}: the hook runs but finds no toolkit ({first})",
                     "install the toolkit (pip install --user, pipx or uv tool), then " + again)
    return Check(name, OK, f"{where}: runs under {shell} -c with PATH={MINIMAL_PATH} "
                 f"(exit 0, {ms:.0f} ms)")


def _again(name: str) -> str:
    """The command that rewrites the hook ``name`` ("hook HARNESS SCOPE")."""
    parts = name.split()
    if parts[-1] == "plugin":
        return "run `durability doctor` again (the plugin's launcher looks on each call)"
    return f"reinstall: durability install-hook --harness {parts[1]} --scope {parts[2]}"


def _codex_trust(check: Check, path: Path, scope: str, project_dir: Path,
                 env: Mapping[str, str]) -> Check:
    """Codex skips, silently, a hook whose definition it has not been told to
    trust.  Its record is ``[hooks.state."<hooks.json>:post_tool_use:G:H"]``
    with a ``trusted_hash`` in config.toml; the hash is Codex's own and is not
    re-computed here, so a recorded trust is reported, not proven."""
    from durability.install.flow import codex_trust_step

    config = _codex_config(env)
    hooks = config.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    state = state if isinstance(state, dict) else {}
    keys = _codex_keys(path)
    trusted = [k for k in keys if isinstance(state.get(k), dict)
               and state[k].get("trusted_hash")]
    problems = []
    if not keys or len(trusted) < len(keys):
        problems.append("Codex has no trust recorded for it, so it never runs")
    if scope == "project":
        projects = config.get("projects")
        project = projects.get(str(project_dir)) if isinstance(projects, dict) else None
        if not (isinstance(project, dict) and project.get("trust_level") == "trusted"):
            problems.append("the project is not trusted, so Codex ignores its .codex/")
    if not problems:
        return Check(check.name, OK, check.detail + "; Codex trust recorded (its hash is "
                     "Codex's to check: if you edited the hook, trust it again in /hooks)")
    return Check(check.name, WARN, f"{path}: runs, but " + " and ".join(problems),
                 codex_trust_step(path, scope))


def _codex_config(env: Mapping[str, str]) -> dict[str, Any]:
    import tomllib

    home = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else \
        Path(env.get("HOME") or Path.home()) / ".codex"
    try:
        with open(home / "config.toml", "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _codex_keys(path: Path) -> list[str]:
    """Codex's trust keys of our handlers: file, event, group and handler index."""
    try:
        hooks = json.loads(path.read_text(encoding="utf-8"))["hooks"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    keys = []
    for event in install_hook.HARNESSES["codex"].events:
        groups = hooks.get(event) if isinstance(hooks, dict) else None
        # Codex's key names the event in snake case: PostToolUse -> post_tool_use.
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()
        keys += [f"{path}:{snake}:{g}:{h}"
                 for g, group in enumerate(groups if isinstance(groups, list) else [])
                 for h, handler in enumerate(group.get("hooks", [])
                                             if isinstance(group, dict) else [])
                 if isinstance(handler, dict) and install_hook.is_ours(handler.get("command"))]
    return keys


def _plugin(env: Mapping[str, str]) -> Check | None:
    """The Claude Code plugin, when a copy of it is installed: its hook runs?"""
    base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else \
        Path(env.get("HOME") or Path.home()) / ".claude"
    for manifest in sorted((base / "plugins").glob("**/.claude-plugin/plugin.json")):
        root = manifest.parent.parent
        try:
            name = json.loads(manifest.read_text(encoding="utf-8")).get("name")
            hooks = json.loads((root / "hooks" / "hooks.json").read_text(encoding="utf-8"))
            command = hooks["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
        except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
            continue
        if name == PLUGIN_NAME:
            check = run_hook_command("hook claude plugin", command, root, env,
                                     extra_env={"CLAUDE_PLUGIN_ROOT": str(root)})
            if check.status == OK and "PreToolUse" not in hooks["hooks"]:
                # A copy of the plugin from before the pre-call event.
                return Check(check.name, WARN, f"{root}: runs, but {_missing(['PreToolUse'])}",
                             "update the plugin (claude plugin update worktree-durability)")
            return check
    return None
