"""Nothing secret leaves the machine silently (docs/how-to/remote.md, "Secrets are
withheld" and "What is redacted"): a checkpoint whose push would carry a
secret-shaped file is withheld with a gap naming it, labels reach the remote
redacted, and a URL holding a credential is refused, or, stored by an older
toolkit, is never shown, logged or filed with it.  Real git and jj
repositories, bare file:// remotes, the installed CLI and MCP server."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.ground.redact import redact
from durability.remote.replicator import Replicator
from durability.store import AttemptKey, Store
from durability.store.remote_rows import Remotes
from tests.durability.mcp.test_server import Mcp, serve
from tests.durability.remote.remotekit import (
    KEY,
    add_remote,
    bare_remote,
    quick_states,
    remote_refs,
)
from tests.helpers import cli, cli_json, git, make_git_repo, make_jj_repo, state_write

SECRET = "SECRET_VALUE_4f1d9c"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
BEARER = "sk-ant-" + "api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"


def _repo(kind: str, path: Path) -> Path:
    return (make_jj_repo(path) if kind == "jj" else make_git_repo(path)).resolve()


def _with_remote(kind: str, tmp_path: Path) -> tuple[Path, Path]:
    """A repository with a bare remote ``backup``: (repository, remote)."""
    repo = _repo(kind, tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    return repo, remote


def _snap(repo: Path, label: str | None = None, key: AttemptKey = KEY) -> str:
    done = snapshot_now(Settings.from_env(), key=key, path=repo, label=label,
                        request_id=str(uuid.uuid4()))
    assert done.commit_id is not None
    return done.commit_id


def _push(settings: Settings | None = None) -> int:
    settings = settings or Settings.from_env()
    with Store(settings.database) as store:
        return Replicator(settings, lambda: store, os.environ).run_once()


def _blob(content: str) -> str:
    return subprocess.run(["git", "hash-object", "--stdin"], input=content, text=True,
                          capture_output=True, check=True).stdout.strip()


def _has_object(remote: Path, oid: str) -> bool:
    return subprocess.run(["git", "-C", str(remote), "cat-file", "-e", oid],
                          capture_output=True).returncode == 0


def _everything_on(remote: Path) -> str:
    """Every object the remote holds, as text: commit messages, trees' names,
    blobs (the manifests' JSON), so a secret anywhere in it is found."""
    oids = git(remote, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"
               ).stdout.split()
    return subprocess.run(["git", "-C", str(remote), "cat-file", "--batch"],
                          input=("\n".join(oids) + "\n").encode(), capture_output=True,
                          check=True).stdout.decode("utf-8", "replace")


def _stored_by_an_older_toolkit(repo: Path, name: str, url: str) -> None:
    """A remote whose URL holds a credential, as an older toolkit stored it
    (today's ``Remotes.add`` refuses it)."""
    Remotes(Settings.from_env().database).add(str(repo), name, "https://127.0.0.1:9/x.git")
    with state_write() as conn:
        conn.execute("UPDATE remotes SET url=$1 WHERE worktree=$2 AND name=$3",
                     (url, str(repo), name))


def _gaps(run_id: str = KEY.run_id) -> list[dict[str, str]]:
    return cli_json("gaps", run_id)


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_checkpoint_holding_a_dotenv_is_withheld_with_a_gap_naming_it(
        kind: str, tmp_path: Path) -> None:
    repo, remote = _with_remote(kind, tmp_path)
    (repo / "app.py").write_text("print('hi')\n")
    (repo / ".env").write_text(f"API_KEY={SECRET}\n")
    (repo / ".env.example").write_text("API_KEY=\n")  # a template: not a secret
    _snap(repo, "Write .env")
    assert _push() == 0
    assert not _has_object(remote, _blob(f"API_KEY={SECRET}\n"))
    assert remote_refs(remote) == {}
    assert quick_states() == [{"backup": "failed"}]
    gaps = _gaps()
    assert [g["reason"] for g in gaps] == ["secret-withheld"]
    assert ".env (pattern .env)" in gaps[0]["detail"] and "forget" in gaps[0]["detail"]
    assert ".env.example" not in gaps[0]["detail"]
    assert _push() == 0 and len(_gaps()) == 1  # filed once, still withheld


def test_a_later_checkpoint_whose_history_holds_the_secret_is_withheld_too(
        tmp_path: Path) -> None:
    """A git attempt's pin carries its whole chain: seq 2 without the file
    would push seq 1's tree with it.  Another attempt, grown from HEAD,
    goes; the secret's blob is nowhere on the remote."""
    repo, remote = _with_remote("git", tmp_path)
    (repo / "id_rsa").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n")
    _snap(repo)
    (repo / "id_rsa").unlink()
    (repo / "work.txt").write_text("later\n")
    _snap(repo)
    other = AttemptKey("run-other", "agent", 0, 1)
    clean = _snap(repo, key=other)
    assert _push() == 1
    assert quick_states() == [{"backup": "failed"}, {"backup": "failed"}]
    assert quick_states("run-other") == [{"backup": "pushed"}]
    assert clean in remote_refs(remote).values()
    assert not _has_object(remote, _blob(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n"))
    details = [g["detail"] for g in _gaps()]
    assert len(details) == 2 and all("id_rsa" in d for d in details)
    assert "in its history" in details[1]


def test_allowing_a_path_in_the_config_lets_its_checkpoint_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, remote = _with_remote("git", tmp_path)
    (repo / "deploy").mkdir()
    (repo / "deploy" / "server.pem").write_text("a public certificate\n")
    (repo / "notes.secret").write_text("extra pattern\n")
    commit = _snap(repo)
    config = tmp_path / "config.toml"
    config.write_text('[secrets]\nallow = ["deploy/server.pem"]\npatterns = ["*.secret"]\n')
    monkeypatch.setenv("DURABILITY_CONFIG", str(config))
    assert _push() == 0
    assert "notes.secret (pattern *.secret)" in _gaps()[0]["detail"]
    assert "server.pem" not in _gaps()[0]["detail"]
    config.write_text('[secrets]\nallow = ["deploy/server.pem", "notes.secret"]\n')
    assert _push() == 1  # read at each pass: no restart
    assert commit in remote_refs(remote).values()
    config.write_text("[secrets]\nallow = 3\n")
    (repo / "x").write_text("x\n")
    _snap(repo)
    assert _push() == 0  # an unreadable setting pushes nothing on a guess


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_labels_reach_the_remote_without_tokens_and_stay_whole_here(
        kind: str, tmp_path: Path) -> None:
    repo, remote = _with_remote(kind, tmp_path)
    label = (f'curl -H "Authorization: Bearer {BEARER}" https://api.example.com/v1?'
             f"private_token={SECRET} && gh --token {TOKEN} && PASSWORD={SECRET}x "
             f"aws AKIAABCDEFGHIJKLMNOP xoxb-123456789012-abcdef")
    (repo / "work.txt").write_text("one\n")
    _snap(repo, label)
    assert _push() == 1
    held = _everything_on(remote)
    assert "durability" in held and "Authorization: Bearer <redacted>" in held
    for secret in (SECRET, TOKEN, BEARER, "AKIAABCDEFGHIJKLMNOP", "xoxb-1234"):
        assert secret not in held
    assert cli_json("snapshots", KEY.run_id)[0]["label"] == label  # the local record


@pytest.mark.parametrize("url", [
    f"https://{TOKEN}@github.com/me/x.git",
    f"https://me:{SECRET}@host.example/x.git",
    f"https://me%3A{SECRET}@host.example/x.git",
    f"https://host.example/x.git?private_token={SECRET}",
    f"ssh://me:{SECRET}@host.example/x.git",
    f"ssh://{TOKEN}@host.example/x.git",
    f"me:{SECRET}@host.example:x.git",
])
def test_a_url_holding_a_credential_is_refused_without_echoing_it(
        url: str, tmp_path: Path) -> None:
    repo = _repo("git", tmp_path / "repo")
    done = cli("remote", "add", "backup", url, "--worktree", str(repo))
    assert done.returncode == 2
    assert done.stderr.startswith("durability: remote-credential: ")
    assert done.stderr.count("\n") == 1 and "credential helper" in done.stderr
    assert SECRET not in done.stderr and TOKEN not in done.stderr
    assert cli_json("remote", "list", "--worktree", str(repo)) == []


def test_plain_urls_are_still_taken(tmp_path: Path) -> None:
    repo = _repo("git", tmp_path / "repo")
    for i, url in enumerate(["ssh://git@host.example/x.git", "git@host.example:me/x.git",
                             "https://host.example/x.git", str(tmp_path / "b.git")]):
        add_remote(repo, f"r{i}", url)


def test_a_stored_credential_url_is_never_shown_logged_or_filed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A URL an older toolkit stored with its token: `remote list` (table and
    JSON), the MCP `remotes` tool, the push's error in the log, the gap and
    the replication row carry none of it."""
    from dataclasses import replace

    repo = _repo("git", tmp_path / "repo")
    settings = replace(Settings.from_env(), replication_bound_ms=0)
    url = f"https://{TOKEN}@127.0.0.1:9/x.git?private_token={SECRET}"
    _stored_by_an_older_toolkit(repo, "old", url)
    (repo / "work.txt").write_text("one\n")
    _snap(repo)
    with caplog.at_level(logging.INFO, logger="durability"):
        assert _push(settings) == 0
    assert "replication of" in caplog.text and "<redacted>" in caplog.text
    shown = [caplog.text, cli("remote", "list", "--worktree", str(repo)).stdout,
             cli("remote", "list", "--all", "--json").stdout,
             cli("remote", "remove", "old", "--worktree", str(repo), "--json").stdout]
    _stored_by_an_older_toolkit(repo, "old", url)  # back, for the MCP answer
    seen: dict[str, object] = {}

    async def body(mcp: Mcp) -> None:
        seen.update(await mcp.call("remotes"))

    serve(repo, body)
    shown.append(json.dumps(seen))
    gaps = _gaps()
    assert [g["reason"] for g in gaps] == ["replication-failed"]
    shown.append(json.dumps(gaps))
    assert "git push failed" in gaps[0]["detail"] and "<redacted>" in gaps[0]["detail"]
    for text in shown:
        assert text and SECRET not in text and TOKEN not in text, text
    assert "<redacted>@127.0.0.1:9/x.git?<redacted>" in shown[1]


def test_redact_keeps_what_a_label_says() -> None:
    assert redact("Write src/app.py") == "Write src/app.py"
    assert redact("git commit --author=me -m 'fix'") == "git commit --author=me -m 'fix'"
    assert redact(f"mysql -u root --password {SECRET} db") == (
        "mysql -u root --password <redacted> db")
    assert redact(f"curl -u bob:{SECRET} x") == "curl -u bob:<redacted> x"
    assert redact("ssh://git@host/x.git") == "ssh://git@host/x.git"
    for plain in ("Edit src/auth/token_store.py", "Edit tokenizer.py: fix",
                  "fix the token refresh logic", "Write docs/password-reset.md"):
        assert redact(plain) == plain
    assert redact('-H "Authorization: Basic dXNlcjpwYXNz"') == (
        '-H "Authorization: Basic <redacted>"')
    assert redact("GITHUB_TOKEN=abc make") == "GITHUB_TOKEN=<redacted> make"
    assert redact("git push https://x-access-token:abc@github.com/a/b") == (
        "git push https://<redacted>@github.com/a/b")


@pytest.mark.slow
def test_the_service_log_and_gaps_carry_no_credential_of_a_stored_url(
        tmp_path: Path) -> None:
    """The installed service pushing to a URL an older toolkit stored with a
    query-string token and a token as its user: git's error (which names the
    URL) reaches service.log and the gap redacted."""
    from tests.helpers import start_service, wait_for

    repo = _repo("git", tmp_path / "repo")
    _stored_by_an_older_toolkit(
        repo, "old", f"https://{TOKEN}@127.0.0.1:9/x.git?private_token={SECRET}")
    (repo / "work.txt").write_text("one\n")
    _snap(repo)
    svc = start_service(tmp_path, env={**os.environ, "DURABILITY_REPLICATION_BOUND_MS": "1"})
    try:
        wait_for(lambda: [g["reason"] for g in _gaps()] == ["replication-failed"], timeout=60)
    finally:
        assert svc.stop() == 0
    log, gaps = svc.log(), json.dumps(_gaps())
    assert "replication of" in log and "unable to access" in log
    for text in (log, gaps):
        assert SECRET not in text and TOKEN not in text, text
        assert "127.0.0.1:9/x.git?<redacted>" in text  # git drops the user itself


def test_a_later_jj_checkpoint_without_the_file_goes_and_carries_none_of_it(
        tmp_path: Path) -> None:
    """jj: each checkpoint is its own pin, and a snapshot rewrites the
    working-copy commit rather than building on the last one: once the file
    is gone, the next checkpoint is pushed, and the secret's blob is not."""
    repo, remote = _with_remote("jj", tmp_path)
    (repo / ".npmrc").write_text(f"//registry/:_authToken={SECRET}\n")
    _snap(repo)
    (repo / ".npmrc").unlink()
    (repo / "work.txt").write_text("later\n")
    later = _snap(repo)
    assert _push() == 1
    assert quick_states() == [{"backup": "failed"}, {"backup": "pushed"}]
    assert f"refs/durability/jj/{later}" in remote_refs(remote)
    assert not _has_object(remote, _blob(f"//registry/:_authToken={SECRET}\n"))
    assert ".npmrc (pattern .npmrc)" in _gaps()[0]["detail"]


def test_a_capture_between_the_scan_and_the_push_does_not_go_out_unscanned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git: the attempt's pin moves on every capture, and the replicator
    does not take the worktree's lock.  A capture writing `.env` right after
    the scan read the pin must not ride along with the push: what is pushed
    is the commit scanned, and the `.env` checkpoint is checked on its own."""
    from durability.remote import secrets

    repo = _repo("git", tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    (repo / "work.txt").write_text("clean\n")
    clean = _snap(repo)
    real = secrets.Scanner.scan
    late: list[str] = []

    def scan_then_capture(self: secrets.Scanner, *args: object, **kw: object) -> object:
        verdict = real(self, *args, **kw)  # type: ignore[arg-type]
        if not late:
            (repo / ".env").write_text(f"API_KEY={SECRET}\n")
            late.append(_snap(repo))
        return verdict

    monkeypatch.setattr(secrets.Scanner, "scan", scan_then_capture)
    assert _push() == 1
    assert not _has_object(remote, _blob(f"API_KEY={SECRET}\n"))
    assert not _has_object(remote, late[0])
    assert set(remote_refs(remote).values()) >= {clean}
    monkeypatch.setattr(secrets.Scanner, "scan", real)
    assert _push() == 0  # the next pass scans the `.env` checkpoint: withheld
    assert quick_states() == [{"backup": "pushed"}, {"backup": "failed"}]
    assert not _has_object(remote, _blob(f"API_KEY={SECRET}\n"))
    assert [g["reason"] for g in _gaps()] == ["secret-withheld"]


PEM = f"-----BEGIN PRIVATE KEY-----\n{SECRET}-test-cert\n"


def _user_history_with_a_pem(repo: Path, commits: int) -> None:
    """The user's own commits: a test certificate, then ``commits`` more."""
    (repo / "tests" / "certs").mkdir(parents=True)
    (repo / "tests" / "certs" / "server.pem").write_text(PEM)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "test certificate")
    for i in range(commits):
        (repo / "history.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {i}")


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_key_the_user_published_in_their_own_history_does_not_block_checkpoints(
        kind: str, tmp_path: Path) -> None:
    """A clone whose upstream history holds tests/certs/server.pem: the
    commits the user's remote-tracking refs hold are theirs, published by
    them, and are not scanned; an agent-written `.env` still is withheld."""
    from tests.helpers import jj_path

    upstream = make_git_repo(tmp_path / "upstream")
    _user_history_with_a_pem(upstream, 3)
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(upstream), str(repo)], check=True, timeout=120)
    if kind == "jj":  # jj on the clone (its remote-tracking refs kept)
        subprocess.run([jj_path(), "git", "init", "--colocate", str(repo)], check=True,
                       capture_output=True, timeout=120)
    repo = repo.resolve()
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    (repo / "work.txt").write_text("agent work\n")
    first = _snap(repo)
    assert _push() == 1
    assert first in remote_refs(remote).values()
    (repo / ".env").write_text(f"API_KEY={SECRET}\n")
    _snap(repo)
    assert _push() == 0
    assert quick_states() == [{"backup": "pushed"}, {"backup": "failed"}]
    assert not _has_object(remote, _blob(f"API_KEY={SECRET}\n"))
    (detail,) = [g["detail"] for g in _gaps()]
    assert ".env (pattern .env)" in detail and "server.pem" not in detail


def test_a_key_in_the_users_unpublished_history_names_the_remedy_and_is_walked_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A certificate committed on the user's own branch, on no remote of
    theirs: withheld (nothing leaves unasked), and the gap says it is in
    their git history and to allow it (`forget` does not rewrite their
    commits).  Later checkpoints stay withheld without walking that history
    again: each pass looks at the new commits only.  Allowed, they go."""
    from durability.remote import secrets

    repo = _repo("git", tmp_path / "repo")
    _user_history_with_a_pem(repo, 30)
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    real = secrets._added
    looked: list[str] = []

    def counting(repo_: object, commit: object, patterns: object) -> object:
        looked.append(str(commit.id))  # type: ignore[attr-defined]
        return real(repo_, commit, patterns)  # type: ignore[arg-type]

    monkeypatch.setattr(secrets, "_added", counting)
    with Store(Settings.from_env().database) as store:
        replicator = Replicator(Settings.from_env(), lambda: store, os.environ)
        (repo / "work.txt").write_text("0\n")
        _snap(repo)
        assert replicator.run_once() == 0
        assert len(looked) >= 32  # the first pass walks the user's history once
        (detail,) = [g["detail"] for g in _gaps()]
        assert "tests/certs/server.pem (pattern *.pem, in your git history: commit" in detail
        assert "on refs/heads/main" in detail and "allow the path under [secrets] allow" in detail
        assert "`durability forget` the path" not in detail
        for i in range(1, 4):
            looked.clear()
            (repo / "work.txt").write_text(f"{i}\n")
            _snap(repo)
            assert replicator.run_once() == 0
            assert len(looked) == 1, len(looked)  # the new checkpoint only
        config = tmp_path / "config.toml"
        config.write_text('[secrets]\nallow = ["tests/certs/server.pem"]\n')
        monkeypatch.setenv("DURABILITY_CONFIG", str(config))
        assert replicator.run_once() == 4
    assert quick_states() == [{"backup": "pushed"}] * 4


@pytest.mark.parametrize("url", [
    f"https://{TOKEN}@github.com/me/x.git",
    f"https://me%3A{SECRET}@host.example/x.git",
    f"https://host.example/x.git?private_token={SECRET}",
    f"ssh://me:{SECRET}@host.example/x.git",
    f"me:{SECRET}@host.example:x.git",
    f"file:///srv/x.git#{SECRET}",
])
def test_the_store_refuses_a_credential_url_whoever_calls(url: str, tmp_path: Path) -> None:
    """`Remotes.add` itself, not only the CLI: no caller stores one."""
    from durability.ground.store_errors import EngineError

    remotes = Remotes(Settings.from_env().database)
    with pytest.raises(EngineError) as caught:
        remotes.add(str(tmp_path), "backup", url)
    assert caught.value.code == "remote-credential"
    assert SECRET not in str(caught.value) and TOKEN not in str(caught.value)
    assert remotes.all(str(tmp_path)) == []
    for plain in ("ssh://git@host.example/x.git", "git@host.example:me/x.git",
                  "https://host.example/x.git", (tmp_path / "b.git").as_uri()):
        remotes.add(str(tmp_path), f"r{len(remotes.all(str(tmp_path)))}", plain)
    assert len(remotes.all(str(tmp_path))) == 4


def test_doctor_fails_on_a_stored_credential_url_and_names_the_remedy(tmp_path: Path) -> None:
    repo = _repo("git", tmp_path / "repo")
    _stored_by_an_older_toolkit(repo, "old", f"https://{TOKEN}@host.example/x.git")
    add_remote(repo, "clean", (tmp_path / "b.git").as_uri())
    done = cli("doctor", "--json", cwd=repo)
    assert done.returncode != 0
    (check,) = [c for c in json.loads(done.stdout) if c["name"] == "remotes"]
    assert check["status"] == "fail", check
    assert "old" in check["detail"] and "credential" in check["detail"]
    assert "clean" not in check["detail"]
    assert "durability remote remove old" in check["next_step"]
    assert TOKEN not in done.stdout and TOKEN not in done.stderr
