"""``durability install-hook`` and the plugin files: the installed CLI run on
real settings files, and the plugin's hooks.json checked against what the
command writes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from durability.hook.entry import DEFAULT_BUDGET_MS
from durability.install import harnesses as install_hook
from tests.helpers import cli, cli_json

ROOT = Path(__file__).resolve().parents[3]

OTHER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier -w"}]},
        ],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]},
        ],
    },
}


# What install-hook writes: the launcher, with the durability that ran it.
COMMAND = "/bin/sh /home/u/.local/share/durability/run-hook.sh /home/u/.venv/bin/durability"


def _ours(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [h for g in settings.get("hooks", {}).get(event, []) for h in g["hooks"]
            if install_hook.is_ours(h["command"])]


def test_round_trip_keeps_every_other_setting_and_hook(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    settings_file = project / ".claude" / "settings.json"
    settings_file.parent.mkdir(parents=True)
    settings_file.write_text(json.dumps(OTHER_SETTINGS, indent=4))
    first = cli_json("install-hook", "--scope", "project", "--project-dir", str(project))
    assert {k: first[k] for k in ("settings", "changed", "installed", "harness")} == {
        "settings": str(settings_file), "changed": True, "installed": True, "harness": "claude"}
    second = cli_json("install-hook", "--scope", "project", "--project-dir", str(project))
    assert second["changed"] is False
    installed = json.loads(settings_file.read_text())
    for event in install_hook.EVENTS:
        [entry] = _ours(installed, event)
        assert entry["timeout"] == install_hook.HOOK_TIMEOUT_S
    assert installed["hooks"]["PostToolUse"][0] == OTHER_SETTINGS["hooks"]["PostToolUse"][0]
    assert installed["permissions"] == OTHER_SETTINGS["permissions"]
    removed = cli_json("install-hook", "--scope", "project", "--project-dir", str(project),
                       "--uninstall")
    assert removed["changed"] is True
    assert json.loads(settings_file.read_text()) == OTHER_SETTINGS
    again = cli("install-hook", "--scope", "project", "--project-dir", str(project),
                "--uninstall")
    assert again.returncode == 0 and "was not in" in again.stdout


def test_user_scope_writes_home_settings_and_fresh_files(tmp_path: Path) -> None:
    done = cli("install-hook")
    assert done.returncode == 0, done.stderr
    path = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    data = json.loads(path.read_text())
    assert set(data) == {"hooks"} and set(data["hooks"]) == set(install_hook.EVENTS)
    cli_json("install-hook", "--uninstall")
    assert json.loads(path.read_text()) == {}
    assert not list(path.parent.glob(".settings.json.*"))  # no temporary left behind


def test_local_scope_and_claude_config_dir(tmp_path: Path) -> None:
    local = install_hook.settings_path("local", project_dir=tmp_path)
    assert local == tmp_path / ".claude" / "settings.local.json"
    custom = install_hook.settings_path("user", env={"CLAUDE_CONFIG_DIR": str(tmp_path / "c")})
    assert custom == tmp_path / "c" / "settings.json"


def test_a_group_shared_with_another_hook_keeps_the_other(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    shared = {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "logger.sh"},
        {"type": "command", "command": COMMAND, "timeout": 15},
    ]}]}}
    path.write_text(json.dumps(shared))
    assert install_hook.install(path, command=COMMAND) is True  # PostToolUseFailure was missing
    assert install_hook.uninstall(path) is True
    assert json.loads(path.read_text()) == {"hooks": {"PostToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": "logger.sh"}]}]}}


def test_invalid_json_is_left_alone_with_an_error(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{ not json")
    done = cli("install-hook", "--scope", "project", "--project-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("durability: invalid-value:")
    assert path.read_text() == "{ not json"


def test_a_symlinked_settings_file_stays_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text("{}")
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    install_hook.install(link, command=COMMAND)
    assert link.is_symlink()
    assert _ours(json.loads(real.read_text()), "PostToolUse")


@pytest.mark.parametrize("name", ["hooks/hooks.json", ".claude-plugin/plugin.json"])
def test_plugin_files_are_valid_json(name: str) -> None:
    data = json.loads((ROOT / name).read_text())
    assert isinstance(data, dict)


def test_plugin_hooks_match_install_hook() -> None:
    plugin = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    assert set(plugin["hooks"]) == set(install_hook.EVENTS)
    for event in install_hook.EVENTS:
        [group] = plugin["hooks"][event]
        assert group["matcher"] == "*"
        [entry] = group["hooks"]
        # The install-hook entry's shape, with the plugin's launcher as command.
        assert entry == install_hook.HARNESSES["claude"].entry(entry["command"])
        assert install_hook.is_ours(entry["command"])
        # Bounded, and longer than the hook's own budget so it exits by itself.
        assert DEFAULT_BUDGET_MS / 1000 < entry["timeout"] <= 60
    manifest = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "worktree-durability"


def test_a_project_dir_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    """A typo must not create a fresh folder and report the hook installed."""
    missing = tmp_path / "typo" / "proj"
    done = cli("install-hook", "--scope", "project", "--project-dir", str(missing))
    assert done.returncode == 2
    assert done.stderr.startswith("durability: invalid-value:")
    assert not (tmp_path / "typo").exists()


def test_project_dir_with_user_scope_is_refused(tmp_path: Path) -> None:
    """It would be ignored: the hook would land in the home settings instead."""
    done = cli("install-hook", "--scope", "user", "--project-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("durability: invalid-value:")
    assert not (Path(os.environ["HOME"]) / ".claude").exists()


@pytest.mark.parametrize("mode", [0o600, 0o664])
def test_the_settings_file_keeps_its_mode(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}\n")
    path.chmod(mode)
    # Under this umask a mode left to the umask would lose 0o664's group bits.
    old_umask = os.umask(0o077)
    try:
        assert install_hook.install(path, command=COMMAND) is True
    finally:
        os.umask(old_umask)
    assert os.stat(path).st_mode & 0o777 == mode
    assert _ours(json.loads(path.read_text()), "PostToolUse")
    assert not list(tmp_path.glob(".settings.json.*"))


@pytest.mark.parametrize(("harness", "events"), [
    ("claude", ["PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied"]),
    ("codex", ["PreToolUse", "PostToolUse", "Stop"]),
    ("gemini", ["BeforeTool", "AfterTool"]),
])
def test_install_hook_registers_the_pre_call_event(tmp_path: Path, harness: str,
                                                   events: list[str]) -> None:
    """The pre-call event announces each call, so that one killed before its
    post-call hook is a call-unfinished gap: every harness gets it, with the
    same entry as its post-call events."""
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "codex-home")}
    done = cli_json("install-hook", "--harness", harness, env=env)
    data = json.loads(Path(done["settings"]).read_text())
    assert list(data["hooks"]) == events
    spec = install_hook.HARNESSES[harness]
    for event in events:
        [group] = data["hooks"][event]
        assert group == spec.group(done["command"])
    cli_json("install-hook", "--harness", harness, "--uninstall", env=env)
    assert json.loads(Path(done["settings"]).read_text()) == {}


def test_the_plugin_announces_calls_too() -> None:
    plugin = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    [group] = plugin["hooks"]["PreToolUse"]
    assert group["hooks"] == plugin["hooks"]["PostToolUse"][0]["hooks"]
