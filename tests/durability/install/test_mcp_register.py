"""``durability install-hook --mcp``: the MCP server registered for Claude
Code in real config files through the installed CLI; ``doctor`` proving the
registered server answers; the plugin declaring it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from tests.helpers import VENV_BIN, cli, cli_json

ROOT = Path(__file__).resolve().parents[3]
OTHERS: dict[str, Any] = {"mcpServers": {"github": {"command": "gh-mcp", "args": ["serve"],
                                                    "env": {"TOKEN": "x"}}},
                          "extra": [1, 2]}


def _mcp(project: Path, *args: str) -> dict[str, Any]:
    done = cli_json("install-hook", "--scope", "project", "--project-dir", str(project),
                    "--mcp", *args)
    return dict(done["mcp"])


def test_project_mcp_json_merges_is_idempotent_and_uninstalls_only_ours(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    config = project / ".mcp.json"
    config.write_text(json.dumps(OTHERS))
    first = _mcp(project)
    assert (first["config"], first["changed"]) == (str(config), True)
    written = json.loads(config.read_text())
    assert written["mcpServers"]["github"] == OTHERS["mcpServers"]["github"]
    assert written["extra"] == [1, 2]
    ours = written["mcpServers"]["durability"]
    assert ours["args"] == ["mcp"] and os.path.isabs(ours["command"])
    assert os.access(ours["command"], os.X_OK)
    assert _mcp(project)["changed"] is False
    assert json.loads(config.read_text()) == written
    removed = _mcp(project, "--uninstall")
    assert removed["changed"] is True
    assert json.loads(config.read_text()) == OTHERS


def test_an_older_entry_of_ours_is_updated_in_place(tmp_path: Path) -> None:
    config = tmp_path / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {"durability": {
        "command": "/old/venv/bin/durability", "args": ["mcp"]}}}))
    assert _mcp(tmp_path)["changed"] is True
    entry = json.loads(config.read_text())["mcpServers"]["durability"]
    assert entry["command"] != "/old/venv/bin/durability" and entry["args"] == ["mcp"]


def test_never_replaces_a_durability_server_that_is_not_ours(tmp_path: Path) -> None:
    config = tmp_path / ".mcp.json"
    foreign = {"mcpServers": {"durability": {"command": "someone-elses-server"}}}
    config.write_text(json.dumps(foreign))
    done = cli("install-hook", "--scope", "project", "--project-dir", str(tmp_path), "--mcp")
    assert done.returncode == 2
    assert done.stderr.startswith("durability: invalid-value: ") and "not this toolkit" in \
        done.stderr
    assert json.loads(config.read_text()) == foreign
    assert not (tmp_path / ".claude").exists()  # nor was the hook installed


def test_user_scope_is_claude_json_kept_private_and_other_harnesses_refused(
        tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    done = cli_json("install-hook", "--mcp", "user")
    user = home / ".claude.json"
    assert done["mcp"]["config"] == str(user) and done["mcp"]["scope"] == "user"
    assert stat.S_IMODE(user.stat().st_mode) == 0o600
    assert json.loads(user.read_text())["mcpServers"]["durability"]["args"] == ["mcp"]
    refused = cli("install-hook", "--harness", "codex", "--mcp")
    assert refused.returncode == 2 and "--harness claude" in refused.stderr


def _checks(project: Path) -> dict[str, dict[str, Any]]:
    done = cli("doctor", "--json", "--project-dir", str(project))
    return {c["name"]: c for c in json.loads(done.stdout)}


def test_doctor_starts_the_registered_server_and_fails_a_broken_one(repo: Path,
                                                                    tmp_path: Path) -> None:
    assert _checks(repo)["mcp"]["detail"].startswith("not registered")
    _mcp(repo)
    check = _checks(repo)["mcp project"]
    assert check["status"] == "ok" and "answers initialize" in check["detail"]
    config = repo / ".mcp.json"
    data = json.loads(config.read_text())
    # Ours by its form, but the install it names is gone.
    data["mcpServers"]["durability"]["command"] = str(tmp_path / "gone" / "durability")
    config.write_text(json.dumps(data))
    check = _checks(repo)["mcp project"]
    assert check["status"] == "fail" and "install-hook" in check["next_step"]


def test_doctor_never_runs_a_server_the_project_ships(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    planted = repo / "tools" / "durability"
    planted.parent.mkdir()
    planted.write_text(f"#!/bin/sh\ntouch {marker}\n")
    planted.chmod(0o755)
    env = {**os.environ, "PATH": f"{repo / 'tools'}:{os.environ['PATH']}"}
    for command in (str(planted), "durability"):  # by its path, or found on PATH
        (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"durability": {
            "command": command, "args": ["mcp"]}}}))
        done = cli("doctor", "--json", "--project-dir", str(repo), env=env)
        check = {c["name"]: c for c in json.loads(done.stdout)}["mcp project"]
        assert check["status"] == "warn" and "inside the project" in check["detail"]
    assert not marker.exists()


def test_doctor_says_how_to_install_a_missing_sdk(repo: Path, tmp_path: Path) -> None:
    # A durability whose interpreter has no MCP SDK (see test_server.py).
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "mcp.py").write_text("raise ModuleNotFoundError('no mcp', name='mcp')\n")
    wrapper = tmp_path / "bin" / "durability"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={shim} exec {VENV_BIN / 'durability'} \"$@\"\n")
    wrapper.chmod(0o755)
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"durability": {
        "command": str(wrapper), "args": ["mcp"]}}}))
    check = _checks(repo)["mcp project"]
    assert check["status"] == "fail" and "missing-extra" in check["detail"]
    assert "worktree-durability[mcp]" in check["next_step"]


def test_the_plugin_declares_the_server_through_its_launcher() -> None:
    manifest = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    server = manifest["mcpServers"]["durability"]
    assert server == {"command": "${CLAUDE_PLUGIN_ROOT}/bin/durability", "args": ["mcp"]}
    assert os.access(ROOT / "bin" / "durability", os.X_OK)
