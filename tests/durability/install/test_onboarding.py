"""From "installed" to "every tool call checkpointed", as a user gets there.

The hook is installed exactly as a user would (the installed CLI, or the
plugin's own hooks.json), then its command is run the way each harness runs
it: ``/bin/sh -c`` (Claude Code, Codex) or ``bash -c`` (Gemini CLI), with a
PATH that lacks ``.venv/bin``.  A checkpoint must be recorded; with the
toolkit unreachable the hook must still exit 0, print nothing on stdout, and
leave a ``toolkit-missing`` gap that ``durability gaps`` lists.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.install.harnesses import HARNESSES
from durability.store import Store
from tests.durability.hook.test_harness_payloads import codex_payload, gemini_payload
from tests.helpers import VENV_BIN, cli, cli_json, hook_payload, make_jj_repo

ROOT = Path(__file__).resolve().parents[3]
# What a harness started outside the project's virtualenv has on its PATH.
BARE_PATH = "/usr/bin:/bin"
SHELLS = {"claude": "/bin/sh", "codex": "/bin/sh", "gemini": "/bin/bash"}


def _harness_env(**extra: str) -> dict[str, str]:
    """The harness's environment: the user's, with a PATH lacking .venv/bin
    and no DURABILITY_JJ (the toolkit must find its jj by itself)."""
    env = {k: v for k, v in os.environ.items() if k != "DURABILITY_JJ"}
    env["PATH"] = BARE_PATH
    assert str(VENV_BIN) not in env["PATH"]
    return {**env, **extra}


def _run(command: str, payload: dict[str, Any] | bytes, *, shell: str = "/bin/sh",
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run([shell, "-c", command], input=data, capture_output=True,
                          env=env or _harness_env(), timeout=120, check=False)


def _payload(harness: str, repo: Path) -> dict[str, Any]:
    (repo / f"by-{harness}.txt").write_text(f"written by {harness}\n")
    if harness == "codex":
        return codex_payload(repo, f"touch by-{harness}.txt")
    if harness == "gemini":
        return gemini_payload(repo, "write_file", {"file_path": str(repo / "by-gemini.txt")})
    return hook_payload(repo, file_path=str(repo / "by-claude.txt"))


def _installed_command(harness: str, project: Path) -> str:
    done = cli_json("install-hook", "--harness", harness, "--scope", "project",
                    "--project-dir", str(project))
    data = json.loads(Path(done["settings"]).read_text())
    [event, *_] = HARNESSES[harness].events
    [group] = data["hooks"][event]
    [entry] = group["hooks"]
    assert entry["command"] == done["command"]
    return str(entry["command"])


def _checkpoints(run_id: str) -> list[Any]:
    with Store(Settings.from_env().database) as store:
        return store.checkpoints(run_id)


def _gaps(run_id: str) -> list[dict[str, Any]]:
    return list(cli_json("gaps", run_id))


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_installed_hook_checkpoints_without_the_venv_on_path(harness: str, repo: Path) -> None:
    command = _installed_command(harness, repo)
    assert str(VENV_BIN / "durability") in command  # absolute, never a bare name
    payload = _payload(harness, repo)
    done = _run(command, payload, shell=SHELLS[harness])
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    [row] = _checkpoints(payload["session_id"])
    assert row.source == "hook"


def test_plugin_hook_finds_the_plugins_own_venv(repo: Path) -> None:
    plugin = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    command = plugin["hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    payload = _payload("claude", repo)
    done = _run(command, payload, env=_harness_env(CLAUDE_PLUGIN_ROOT=str(ROOT)))
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    assert len(_checkpoints(payload["session_id"])) == 1


@pytest.mark.parametrize(("harness", "pre_event"), [
    ("claude", "PreToolUse"), ("codex", "PreToolUse"), ("gemini", "BeforeTool")])
def test_toolkit_missing_is_one_gap_for_a_call_announced_then_finished(
        harness: str, pre_event: str, tmp_path: Path, repo: Path) -> None:
    """Without a toolkit the launcher files the miss at the post-call hook
    only: the pre-call one says so on stderr and files nothing (Gemini's
    calls have no id that would make the two one gap)."""
    root = _bare_plugin(tmp_path)
    command = json.loads((root / "hooks" / "hooks.json").read_text())[
        "hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    payload = _payload(harness, repo)
    announced = {**payload, "hook_event_name": pre_event}
    announced.pop("tool_response", None)
    for sent in (announced, payload):
        done = _run(command, sent, shell=SHELLS[harness],
                    env=_harness_env(CLAUDE_PLUGIN_ROOT=str(root)))
        assert (done.returncode, done.stdout) == (0, b"")
        assert done.stderr.decode().startswith("durability: toolkit-missing:")
    assert [g["reason"] for g in _gaps(payload["session_id"])] == ["toolkit-missing"]


def _bare_plugin(tmp_path: Path) -> Path:
    """A copy of the plugin as Claude Code caches it: no .venv inside."""
    root = tmp_path / "plugin-cache" / "worktree-durability"
    for part in (".claude-plugin", "hooks", "bin"):
        shutil.copytree(ROOT / part, root / part)
    (root / "durability").mkdir()
    shutil.copy2(ROOT / "durability" / "run-hook.sh", root / "durability" / "run-hook.sh")
    return root


def test_plugin_hook_finds_a_user_install(tmp_path: Path, repo: Path) -> None:
    """pip --user and pipx put `durability` in ~/.local/bin, often not on the
    harness's PATH."""
    root = _bare_plugin(tmp_path)
    user_bin = Path(os.environ["HOME"]) / ".local" / "bin"
    user_bin.mkdir(parents=True)
    (user_bin / "durability").symlink_to(VENV_BIN / "durability")
    command = json.loads((root / "hooks" / "hooks.json").read_text())[
        "hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    payload = _payload("claude", repo)
    done = _run(command, payload, env=_harness_env(CLAUDE_PLUGIN_ROOT=str(root)))
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    assert len(_checkpoints(payload["session_id"])) == 1


@pytest.mark.parametrize("harness", ["claude", "codex", "gemini"])
def test_toolkit_missing_exits_0_and_files_a_gap(harness: str, tmp_path: Path,
                                                 repo: Path) -> None:
    root = _bare_plugin(tmp_path)
    command = json.loads((root / "hooks" / "hooks.json").read_text())[
        "hooks"]["PostToolUse"][0]["hooks"][0]["command"]
    payload = _payload(harness, repo)
    done = _run(command, payload, shell=SHELLS[harness],
                env=_harness_env(CLAUDE_PLUGIN_ROOT=str(root)))
    assert (done.returncode, done.stdout) == (0, b"")
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("durability: toolkit-missing:")
    [gap] = _gaps(payload["session_id"])
    assert (gap["reason"], gap["source"], gap["worktree"]) == (
        "toolkit-missing", "hook", str(repo))
    assert gap["tool_use_id"] == payload.get("tool_use_id")
    if harness != "gemini":  # Gemini sends no call id to tell a replay by
        # The same tool call reported twice (plugin and settings) is one gap.
        _run(command, payload, shell=SHELLS[harness],
             env=_harness_env(CLAUDE_PLUGIN_ROOT=str(root)))
        assert len(_gaps(payload["session_id"])) == 1


def test_a_deleted_or_broken_install_is_a_gap_not_a_failed_tool_call(repo: Path,
                                                                      tmp_path: Path) -> None:
    """The settings hook names a durability whose Python is gone (a deleted or
    broken virtualenv): the launcher falls through and files the gap."""
    command = _installed_command("gemini", repo)
    broken = tmp_path / "old-venv" / "bin" / "durability"
    broken.parent.mkdir(parents=True)
    broken.write_text("#!/nonexistent/python3\n")
    broken.chmod(0o755)
    command = command.replace(str(VENV_BIN / "durability"), str(broken))
    payload = _payload("gemini", repo)
    done = _run(command, payload, shell="/bin/bash")
    assert (done.returncode, done.stdout) == (0, b"")
    [gap] = _gaps(payload["session_id"])
    assert gap["reason"] == "toolkit-missing"
    assert f"{broken} (its interpreter /nonexistent/python3 is missing)" in gap["detail"]


def test_an_install_that_starts_and_fails_is_a_gap_too(repo: Path, tmp_path: Path) -> None:
    """A durability that runs but exits non-zero (a half-removed package):
    the harness still sees exit 0 and nothing on stdout."""
    command = _installed_command("codex", repo)
    failing = tmp_path / "half" / "durability"
    failing.parent.mkdir()
    failing.write_text("#!/bin/sh\ncat >/dev/null\necho 'Traceback: no module'\nexit 3\n")
    failing.chmod(0o755)
    command = command.replace(str(VENV_BIN / "durability"), str(failing))
    done = _run(command, _payload("codex", repo), env=_harness_env(DURABILITY_RUN_ID="r-half"))
    assert (done.returncode, done.stdout) == (0, b"")
    [gap] = _gaps("r-half")
    assert gap["reason"] == "toolkit-missing" and f"{failing} (exit 3)" in gap["detail"]


def test_an_install_that_fails_before_reading_files_one_gap_per_call(
        repo: Path, tmp_path: Path) -> None:
    """A durability that dies before it reads its input (an import error):
    the launcher reads the payload itself, so the pre-call hook files no
    second gap and the post-call hook's gap is under the payload's session."""
    command = _installed_command("claude", repo)
    failing = tmp_path / "half" / "durability"
    failing.parent.mkdir()
    failing.write_text("#!/bin/sh\necho 'ModuleNotFoundError: durability' >&2\nexit 1\n")
    failing.chmod(0o755)
    command = command.replace(str(VENV_BIN / "durability"), str(failing))
    payload = _payload("claude", repo)
    announced = {**payload, "hook_event_name": "PreToolUse"}
    announced.pop("tool_response", None)
    for sent in (announced, payload):
        done = _run(command, sent, env=_harness_env())
        assert (done.returncode, done.stdout) == (0, b"")
    [gap] = _gaps(payload["session_id"])
    assert gap["reason"] == "toolkit-missing" and f"{failing} (exit 1)" in gap["detail"]
    assert cli("gaps", "_invalid").returncode == 3  # no gap filed without a run


def test_unreadable_payload_still_files_the_gap(tmp_path: Path) -> None:
    root = _bare_plugin(tmp_path)
    command = f'/bin/sh "{root}/durability/run-hook.sh"'
    done = _run(command, b'{"session_id": "s\\"x", "cwd": 7\n\x01', env=_harness_env())
    assert (done.returncode, done.stdout) == (0, b"")
    [gap] = _gaps("_invalid")
    assert gap["reason"] == "toolkit-missing" and gap["worktree"] is None


@pytest.mark.parametrize("home_set", [True, False])
def test_launcher_spool_is_where_the_toolkit_reads_it(tmp_path: Path, home_set: bool) -> None:
    """Without DURABILITY_SPOOL_DIR the launcher must compute the folder as
    durability/ground/paths.py does, or its gaps are never ingested."""
    root = _bare_plugin(tmp_path)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()  # a harness's own TMPDIR must not move the spool
    dropped = {"DURABILITY_SPOOL_DIR"} | (set() if home_set else {"DURABILITY_HOME"})
    env = {k: v for k, v in _harness_env(TMPDIR=str(tmpdir)).items() if k not in dropped}
    payload = {"session_id": "spool-where", "cwd": str(tmp_path)}
    done = _run(f'/bin/sh "{root}/durability/run-hook.sh"', payload, env=env)
    assert done.returncode == 0
    where = subprocess.run([sys.executable, "-c", "from durability.ground import paths; "
                            "print(paths.spool_dir())"], env=env, capture_output=True,
                           text=True, check=True, timeout=60).stdout.strip()
    expected = Path(where) / "spool-where.gaps.ndjson"
    assert json.loads(expected.read_text())["reason"] == "toolkit-missing"
    assert expected.parent.stat().st_mode & 0o777 == 0o700


def test_plugin_bin_durability_is_a_working_command(tmp_path: Path) -> None:
    """Claude Code puts the plugin's bin/ on PATH: `durability` there must run."""
    env = _harness_env(CLAUDE_PLUGIN_ROOT=str(ROOT), PATH=f"{ROOT / 'bin'}:{BARE_PATH}")
    done = subprocess.run(["/bin/sh", "-c", "durability --version"], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert (done.returncode, done.stdout.startswith("durability, version")) == (0, True), \
        done.stderr
    root = _bare_plugin(tmp_path)
    env = _harness_env(CLAUDE_PLUGIN_ROOT=str(root), PATH=f"{root / 'bin'}:{BARE_PATH}")
    done = subprocess.run(["/bin/sh", "-c", "durability --version"], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert done.returncode == 127
    assert done.stderr.startswith("durability: toolkit-missing:")


def test_install_hook_says_what_it_wrote_and_warns_about_path(tmp_path: Path) -> None:
    done = cli("install-hook", "--harness", "codex")
    assert done.returncode == 0, done.stderr
    assert f"command: /bin/sh {Path(os.environ['HOME'])}" in done.stdout
    assert "login shell's PATH does not find" in done.stderr
    assert "/hooks" in done.stderr  # the one step that makes Codex trust it


def test_install_replaces_a_legacy_bare_command_and_uninstall_keeps_the_rest(
        tmp_path: Path) -> None:
    project = tmp_path / "proj"
    settings = project / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    other = {"type": "command", "name": "fmt", "command": "fmt.sh", "timeout": 500}
    settings.write_text(json.dumps({"theme": "dark", "hooks": {"AfterTool": [
        {"matcher": ".*", "hooks": [other]},
        {"matcher": ".*", "hooks": [{"type": "command", "name": "durability",
                                     "command": "durability snapshot-hook",
                                     "timeout": 15000}]}]}}))
    args = ("install-hook", "--harness", "gemini", "--scope", "project", "--project-dir",
            str(project))
    assert cli_json(*args)["changed"] is True
    assert cli_json(*args)["changed"] is False
    data = json.loads(settings.read_text())
    [_, ours] = data["hooks"]["AfterTool"]
    assert ours["hooks"][0]["command"].startswith("/bin/sh ")
    assert ours["hooks"][0]["timeout"] == 15000
    assert cli_json(*args, "--uninstall")["changed"] is True
    assert json.loads(settings.read_text()) == {
        "theme": "dark", "hooks": {"AfterTool": [{"matcher": ".*", "hooks": [other]}]}}


def test_codex_and_local_scopes(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    done = cli_json("install-hook", "--harness", "codex",
                    env={**os.environ, "CODEX_HOME": str(codex_home)})
    assert done["settings"] == str(codex_home / "hooks.json")
    data = json.loads((codex_home / "hooks.json").read_text())
    assert set(data) == {"hooks"}  # Codex refuses unknown top-level keys
    [group] = data["hooks"]["PostToolUse"]
    assert "matcher" not in group and group["hooks"][0]["timeout"] == 15
    refused = cli("install-hook", "--harness", "codex", "--scope", "local")
    assert refused.returncode == 2 and "no 'local' scope" in refused.stderr


def test_marketplace_and_plugin_manifests() -> None:
    """The fields `/plugin marketplace add` and `/plugin install` need."""
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    plugin = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert market["name"].replace("-", "").isalnum() and market["name"].islower()
    assert isinstance(market["owner"]["name"], str) and market["owner"]["name"]
    [entry] = market["plugins"]
    assert entry["name"] == plugin["name"] == "worktree-durability"
    assert entry["source"].startswith("./") and ".." not in entry["source"]
    assert (ROOT / entry["source"] / ".claude-plugin" / "plugin.json").is_file()
    hooks = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    for event in ("PostToolUse", "PostToolUseFailure"):
        command = hooks["hooks"][event][0]["hooks"][0]["command"]
        assert command == '/bin/sh "${CLAUDE_PLUGIN_ROOT}/durability/run-hook.sh"'
    assert (ROOT / "durability" / "run-hook.sh").is_file()
    assert (ROOT / "bin" / "durability").read_text().startswith("#!/bin/sh\n")


def _doctor(*args: str, env: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    done = cli("doctor", "--json", *args, env=env)
    return done.returncode, json.loads(done.stdout)


def _by_name(checks: list[dict[str, Any]], name: str) -> dict[str, Any]:
    [check] = [c for c in checks if c["name"] == name]
    return check


def test_doctor_runs_the_installed_hook_and_fails_a_bare_command(repo: Path) -> None:
    cli_json("install-hook", "--scope", "project", "--project-dir", str(repo))
    code, checks = _doctor("--project-dir", str(repo))
    assert code == 0
    assert _by_name(checks, "hook claude project")["status"] == "ok"
    assert _by_name(checks, "backend")["detail"].startswith("jj at ")
    local = repo / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "durability snapshot-hook"}]}]}}))
    code, checks = _doctor("--project-dir", str(repo))
    bare = _by_name(checks, "hook claude local")
    assert code == 1 and bare["status"] == "fail" and "exit 127" in bare["detail"]
    assert "install-hook --harness claude --scope local" in bare["next_step"]


def test_doctor_git_only_without_jj_is_not_a_failure(tmp_path: Path) -> None:
    repo = tmp_path / "plain"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {**os.environ, "DURABILITY_JJ": str(tmp_path / "no-jj"), "PATH": BARE_PATH}
    code, checks = _doctor("--project-dir", str(repo), env=env)
    assert code == 0, checks
    assert _by_name(checks, "backend")["detail"].startswith("git at ")
    assert _by_name(checks, "hooks")["status"] == "warn"  # nothing installed yet


def test_doctor_fails_a_jj_repo_without_jj(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "jj-only", colocate=False)
    env = {**os.environ, "DURABILITY_JJ": str(tmp_path / "no-jj")}
    code, checks = _doctor("--project-dir", str(repo), env=env)
    backend = _by_name(checks, "backend")
    assert code == 1 and backend["status"] == "fail"
    assert "jj-missing" in backend["detail"]


def test_doctor_warns_for_a_colocated_repo_without_jj(repo: Path, tmp_path: Path) -> None:
    env = {**os.environ, "DURABILITY_JJ": str(tmp_path / "no-jj")}
    _code, checks = _doctor("--project-dir", str(repo), env=env)
    backend = _by_name(checks, "backend")
    assert backend["status"] == "warn", backend
    assert backend["detail"].startswith("git at ") and "no jj here" in backend["detail"]
    assert "install jj" in backend["next_step"]


def test_doctor_reports_an_untrusted_codex_hook(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    env = {**os.environ, "CODEX_HOME": str(codex_home)}
    cli_json("install-hook", "--harness", "codex", env=env)
    code, checks = _doctor(env=env)
    codex = _by_name(checks, "hook codex user")
    assert (code, codex["status"]) == (0, "warn")
    assert "no trust recorded" in codex["detail"] and "/hooks" in codex["next_step"]
    trusted = ""
    for event in ("pre_tool_use", "post_tool_use", "stop"):  # /hooks trusts each on its own
        key = f"{codex_home / 'hooks.json'}:{event}:0:0"
        trusted += f'[hooks.state."{key}"]\ntrusted_hash = "sha256:{"0" * 64}"\n'
        (codex_home / "config.toml").write_text(trusted)
        code, checks = _doctor(env=env)
        assert _by_name(checks, "hook codex user")["status"] == (
            "ok" if event == "stop" else "warn"), event


def test_doctor_warns_of_a_codex_hook_installed_before_stop(tmp_path: Path) -> None:
    """A hooks.json an older toolkit wrote has PostToolUse only: the last
    edit of a Codex session made by a shell-run apply_patch is in no
    checkpoint.  doctor says so; install-hook again adds Stop."""
    codex_home = tmp_path / "codex-home"
    env = {**os.environ, "CODEX_HOME": str(codex_home)}
    cli_json("install-hook", "--harness", "codex", env=env)
    hooks = codex_home / "hooks.json"
    data = json.loads(hooks.read_text())
    del data["hooks"]["Stop"]
    hooks.write_text(json.dumps(data))
    (codex_home / "config.toml").write_text("".join(
        f'[hooks.state."{hooks}:{event}:0:0"]\ntrusted_hash = "sha256:{"0" * 64}"\n'
        for event in ("pre_tool_use", "post_tool_use")))
    _code, checks = _doctor(env=env)
    codex = _by_name(checks, "hook codex user")
    assert codex["status"] == "warn" and "not on Stop" in codex["detail"], codex
    assert "install-hook --harness codex --scope user" in codex["next_step"]
    cli_json("install-hook", "--harness", "codex", env=env)
    assert set(json.loads(hooks.read_text())["hooks"]) == {"PreToolUse", "PostToolUse", "Stop"}


@pytest.mark.parametrize(("harness", "event"), [
    ("claude", "PreToolUse"), ("codex", "PreToolUse"), ("gemini", "BeforeTool")])
def test_doctor_warns_of_a_hook_installed_without_the_pre_call_event(
        tmp_path: Path, harness: str, event: str) -> None:
    """An install from before the pre-call event still captures every call,
    but a call killed mid-call leaves no call-unfinished gap: doctor says so,
    and install-hook again adds the event."""
    codex_home = tmp_path / "codex-home"
    env = {**os.environ, "CODEX_HOME": str(codex_home)}
    path = Path(cli_json("install-hook", "--harness", harness, env=env)["settings"])
    data = json.loads(path.read_text())
    del data["hooks"][event]
    path.write_text(json.dumps(data))
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text("".join(
        f'[hooks.state."{path}:{name}:0:0"]\ntrusted_hash = "sha256:{"0" * 64}"\n'
        for name in ("post_tool_use", "stop")))
    _code, checks = _doctor(env=env)
    check = _by_name(checks, f"hook {harness} user")
    assert check["status"] == "warn", check
    assert f"not on {event}" in check["detail"] and "call-unfinished" in check["detail"]
    assert f"install-hook --harness {harness} --scope user" in check["next_step"]
    cli_json("install-hook", "--harness", harness, env=env)
    assert event in json.loads(path.read_text())["hooks"]
    _code, checks = _doctor(env=env)
    if harness != "codex":  # Codex would want the new entry trusted first
        assert _by_name(checks, f"hook {harness} user")["status"] == "ok"


def test_doctor_checks_an_installed_plugin(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    root = _bare_plugin(home / ".claude" / "plugins" / "cache" / "m")
    code, checks = _doctor()
    plugin = _by_name(checks, "hook claude plugin")
    assert (code, plugin["status"]) == (1, "fail") and "finds no toolkit" in plugin["detail"]
    assert "install-hook" not in plugin["next_step"]
    os.symlink(VENV_BIN.parent, root / ".venv")
    code, checks = _doctor()
    assert (code, _by_name(checks, "hook claude plugin")["status"]) == (0, "ok")
    # A copy of the plugin from before the pre-call event: it runs, and says what it misses.
    hooks = json.loads((root / "hooks" / "hooks.json").read_text())
    del hooks["hooks"]["PreToolUse"]
    (root / "hooks" / "hooks.json").write_text(json.dumps(hooks))
    code, checks = _doctor()
    plugin = _by_name(checks, "hook claude plugin")
    assert (code, plugin["status"]) == (0, "warn"), plugin
    assert "not on PreToolUse" in plugin["detail"] and "call-unfinished" in plugin["detail"]


def test_harness_page_snippets_are_what_install_hook_writes() -> None:
    """Each snippet of docs/how-to/harnesses.md with the launcher command has the
    exact shape of the entry install-hook adds for its harness (paths are
    placeholders there)."""
    import re

    readme = (ROOT / "docs" / "how-to" / "harnesses.md").read_text()
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", readme, re.S)
              if "run-hook.sh" in b]
    seen = set()
    for block in blocks:
        if "matcher" in block:  # a bare group: the one Claude Code gets for each event
            found = [("claude", block)]
        else:  # a whole file: Codex's PostToolUse and Stop, Gemini's AfterTool
            name = "gemini" if "AfterTool" in block["hooks"] else "codex"
            assert tuple(block["hooks"]) == HARNESSES[name].events
            found = [(name, group) for [group] in block["hooks"].values()]
        for name, group in found:
            command = group["hooks"][0]["command"]
            assert command.startswith("/bin/sh ") and command.endswith("/bin/durability")
            assert group == HARNESSES[name].group(command)
            seen.add(name)
    assert seen == set(HARNESSES)


def test_doctor_never_runs_a_hostile_command_that_only_mentions_durability(
        repo: Path, tmp_path: Path) -> None:
    # A freshly cloned project's settings are not ours to trust: a command
    # that runs something else before "durability snapshot-hook" is reported,
    # never executed (and nothing is run through a shell).
    planted = tmp_path / "PWNED"
    hostile = f"touch {planted}; /x/durability snapshot-hook"
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir(exist_ok=True)
    settings.write_text(json.dumps({"hooks": {"PostToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": hostile}]}]}}))
    _code, checks = _doctor("--project-dir", str(repo))
    assert not planted.exists()
    check = _by_name(checks, "hook claude project")
    assert check["status"] == "warn" and "does not run it" in check["detail"]


def test_two_plugin_launchers_on_path_do_not_exec_each_other(tmp_path: Path) -> None:
    # Two copies of the plugin's bin/durability (two plugin installs) on PATH
    # and no toolkit: one clear line and exit 127, never an endless exec loop.
    copies = []
    for name in ("one", "two"):
        folder = tmp_path / name / "bin"
        folder.mkdir(parents=True)
        copy = folder / "durability"
        copy.write_bytes((ROOT / "bin" / "durability").read_bytes())
        copy.chmod(0o755)
        copies.append(folder)
    env = {"PATH": ":".join([*map(str, copies), BARE_PATH]), "HOME": str(tmp_path / "h")}
    done = subprocess.run([str(copies[0] / "durability"), "--version"], capture_output=True,
                          text=True, env=env, timeout=20, check=False)
    assert done.returncode == 127 and "toolkit-missing" in done.stderr


def test_the_launcher_gap_line_is_valid_json_whatever_the_worktree(tmp_path: Path) -> None:
    root = _bare_plugin(tmp_path)
    env = {k: v for k, v in _harness_env(DURABILITY_WORKTREE='/tmp/a"b\\c').items()}
    payload = {"session_id": "odd-worktree", "cwd": str(tmp_path)}
    done = _run(f'/bin/sh "{root}/durability/run-hook.sh"', payload, env=env)
    assert done.returncode == 0
    gaps = cli_json("gaps", "odd-worktree")
    assert [g["reason"] for g in gaps] == ["toolkit-missing"]
    assert gaps[0]["worktree"] == "/tmp/abc"
