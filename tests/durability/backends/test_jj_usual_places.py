"""jj where its installers put it, found by a hook that runs with a bare PATH.

A harness started from a desktop launcher runs its hook with a PATH like
``/usr/bin:/bin``; a toolkit installed by pipx or uv tool has no jj beside
its Python; and jj installed by cargo, Homebrew or Nix lives in
``~/.cargo/bin``, ``/opt/homebrew/bin`` or ``~/.nix-profile/bin``.  Before,
every capture of a jj working copy was then a ``jj-missing`` gap while
`durability doctor`, run from the user's shell, said all was well.

The toolkit runs here from a Python of its own (a bare venv over this one's
packages, so nothing is beside it), with a PATH of one empty folder, exactly
as such a user's hook would; jj is only in ``$HOME/.cargo/bin``.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

from tests.helpers import hook_payload, jj_path, make_jj_repo

ROOT = Path(__file__).resolve().parents[3]


def _bare_python(tmp_path: Path) -> Path:
    """A venv with nothing beside its Python, seeing this checkout's packages."""
    venv = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    found = sorted(venv.glob("lib/python*/site-packages"))
    assert found, list(venv.rglob("*"))[:20]
    (found[0] / "checkout.pth").write_text(
        "\n".join([*site.getsitepackages(), str(ROOT)]) + "\n")
    python = venv / "bin" / "python"
    assert not (python.parent / "jj").exists()
    return python


def _user_with_cargo_jj(tmp_path: Path) -> dict[str, str]:
    home = Path(os.environ["HOME"])
    cargo_bin = home / ".cargo" / "bin"
    cargo_bin.mkdir(parents=True)
    shutil.copy2(jj_path(), cargo_bin / "jj")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    # The suite names its jj in DURABILITY_JJ; this user names none.
    env = {k: v for k, v in os.environ.items() if k not in ("PATH", "DURABILITY_JJ")}
    env["PATH"] = str(empty)
    env["DURABILITY_AUTOSTART"] = "0"
    return env


def test_a_hook_with_a_bare_path_finds_jj_in_cargos_bin_folder(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo", colocate=False)
    (repo / "a.txt").write_text("a\n")
    python = _bare_python(tmp_path)
    env = _user_with_cargo_jj(tmp_path)

    payload = hook_payload(repo, session_id="bare-path", file_path=str(repo / "a.txt"))
    ran = subprocess.run([str(python), "-m", "durability", "snapshot-hook"],
                         input=json.dumps(payload), env=env, capture_output=True, text=True,
                         timeout=60)
    assert (ran.returncode, ran.stdout) == (0, ""), ran.stderr

    listed = subprocess.run([str(python), "-m", "durability", "snapshots", "bare-path", "--json"],
                            env=env, capture_output=True, text=True, timeout=60)
    gaps = subprocess.run([str(python), "-m", "durability", "gaps", "bare-path", "--json"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(gaps.stdout) == [], gaps.stdout
    assert [r["label"] for r in json.loads(listed.stdout)] == ["Write a.txt"], listed.stderr


def test_doctor_says_which_jj_it_found_in_a_usual_place(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo", colocate=False)
    python = _bare_python(tmp_path)
    env = _user_with_cargo_jj(tmp_path)

    done = subprocess.run([str(python), "-m", "durability", "doctor", "--json",
                           "--project-dir", str(repo)], env=env, capture_output=True,
                          text=True, timeout=120)
    checks = {c["name"]: c for c in json.loads(done.stdout)}
    assert checks["backend"]["status"] == "ok", checks["backend"]
    assert str(Path(env["HOME"]) / ".cargo" / "bin" / "jj") in checks["backend"]["detail"]


def test_doctor_warns_when_only_the_users_shell_path_finds_jj(tmp_path: Path) -> None:
    """jj in a folder of the user's own (~/bin) on the shell's PATH: doctor
    found it and said ok, while a hook with a bare PATH filed jj-missing."""
    repo = make_jj_repo(tmp_path / "repo", colocate=False)
    python = _bare_python(tmp_path)
    env = _user_with_cargo_jj(tmp_path)
    home = Path(env["HOME"])
    (home / "bin").mkdir()
    (home / ".cargo" / "bin" / "jj").rename(home / "bin" / "jj")
    env["PATH"] = f"{home / 'bin'}:{env['PATH']}"

    done = subprocess.run([str(python), "-m", "durability", "doctor", "--json",
                           "--project-dir", str(repo)], env=env, capture_output=True,
                          text=True, timeout=120)
    backend = {c["name"]: c for c in json.loads(done.stdout)}["backend"]
    assert backend["status"] == "warn", backend
    assert "PATH=/usr/bin:/bin" in backend["detail"] and "jj-missing" in backend["detail"]
    assert str(home / "bin" / "jj") in backend["next_step"]
