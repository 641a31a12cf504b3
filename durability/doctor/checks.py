"""``durability doctor``: is every part of the path from a tool call to a
checkpoint in place, here and now?

Each check is ok, warn or fail with a one-line next step.  Only a fail (a part
that is installed and does not work, or a capture that cannot happen in this
worktree) makes the command exit non-zero: a git-only user without jj, a
service that is not running, a harness without a hook are all fine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from durability.config import Settings
from durability.doctor.hooks import MINIMAL_PATH, hook_checks
from durability.doctor.mcp import mcp_checks
from durability.doctor.report import FAIL, OK, WARN, Check
from durability.ground import client, ids, paths
from durability.ground.errors import (
    ConnectionLost,
    DurabilityError,
    ServiceTimeout,
    ServiceUnreachable,
)
from durability.store import EngineError, Store
from durability.store.database import describe

__all__ = ["run_checks"]

def run_checks(settings: Settings, env: Mapping[str, str],
               project_dir: Path | None = None) -> list[Check]:
    where = Path(project_dir or Path.cwd()).absolute()
    remotes = _remotes(settings, where, env)
    service = _socket(settings, env)
    hooks = hook_checks(where, env)
    return [_backend(where, env), _state(settings), _spool(settings), service,
            _machine(env), *([remotes] if remotes is not None else []), *hooks,
            _hook_speed(env, service, hooks), *mcp_checks(where, env)]


#: The modules every hook process imports (its fast path: the service answers).
HOOK_MODULES = ("durability", "durability.__main__", "durability.hook", "durability.hook.entry",
                "durability.gaps", "durability.gaps.calls", "durability.ground",
                "durability.ground.client", "durability.ground.envms",
                "durability.ground.errors", "durability.ground.fastjson",
                "durability.ground.ids", "durability.ground.paths")


def _hook_speed(env: Mapping[str, str], service: Check, hooks: list[Check]) -> Check:
    """What makes every tool call slower without failing it: no service to
    answer the hook (each call captures in-process), and a hook that has no
    bytecode caches to load (each call compiles its modules); each costs
    50-250 ms per tool call (bench/RESULTS.md, issue 25)."""
    slow: list[str] = []
    steps: list[str] = []
    installed = any(c.name.startswith("hook ") and "not installed" not in c.detail
                    for c in hooks)
    # No service answers when none runs, when one runs whose socket is gone
    # (both say hooks capture in-process) or when the one there fails.
    unanswered = service.status == FAIL or "hooks capture in-process" in service.detail
    if installed and unanswered:
        from durability.hook.autostart import enabled

        slow.append("no service answers the hook, so each tool call captures in-process"
                    + (" until the next hook starts one" if enabled(env) else
                       " (DURABILITY_AUTOSTART is off)"))
        steps.append("`durability serve --detach` (or `durability service install`)")
    if env.get("PYTHONDONTWRITEBYTECODE"):
        slow.append("PYTHONDONTWRITEBYTECODE is set: a hook started with it never writes the "
                    "bytecode caches it lacks")
        steps.append("unset PYTHONDONTWRITEBYTECODE where the harness starts")
    missing = _missing_bytecode()
    if missing:
        slow.append(f"no up-to-date bytecode cache for {len(missing)} of the hook's "
                    f"{len(HOOK_MODULES)} modules ({', '.join(missing[:3])}"
                    f"{', ...' if len(missing) > 3 else ''}): each hook compiles them")
        steps.append("`python -m compileall` the toolkit's package folder "
                     "(or run any durability command once where it may write there)")
    if not slow:
        return Check("hook speed", OK, "a service answers the hook, and its "
                     f"{len(HOOK_MODULES)} modules load from bytecode caches")
    return Check("hook speed", WARN, "; ".join(slow) + " (each costs 50-250 ms per tool call)",
                 "; ".join(steps))


def _missing_bytecode() -> list[str]:
    """The hook modules whose bytecode cache is missing or older than their
    source (as the interpreter checks it: the source's mtime and size)."""
    import importlib.util

    missing = []
    for name in HOOK_MODULES:
        spec = importlib.util.find_spec(name)
        source = spec.origin if spec is not None else None
        if source is None or not source.endswith(".py"):
            continue
        try:
            cache = importlib.util.cache_from_source(source)
            with open(cache, "rb") as f:
                head = f.read(16)
            st = os.stat(source)
        except (OSError, NotImplementedError, ValueError):
            missing.append(name)
            continue
        stamped = int.from_bytes(head[4:8], "little") == 0  # not a hash-based cache
        stale = stamped and (
            int.from_bytes(head[8:12], "little") != int(st.st_mtime) & 0xFFFFFFFF
            or int.from_bytes(head[12:16], "little") != st.st_size & 0xFFFFFFFF)
        if len(head) < 16 or head[:4] != importlib.util.MAGIC_NUMBER or stale:
            missing.append(name)
    return missing


def _backend(where: Path, env: Mapping[str, str]) -> Check:
    """The backend this folder's captures would use, and that it works."""
    try:
        forced = ids.backend_choice(env)
    except ValueError as exc:
        return Check("backend", FAIL, str(exc), "set DURABILITY_BACKEND to jj or git, or unset it")
    found = ids.find_root_str(where, forced)
    if found is None:
        return Check("backend", WARN, f"none: {where} is not inside a jj working copy or a git "
                     "working tree (hooks file a not-a-repo gap here)",
                     "run doctor inside your project, or `git init` / `jj git init` it")
    root, kind = found
    if kind == "jj" and forced is None and ids.is_git_root(root) and not _has_jj(env):
        git = _git(root)
        if git.status != OK:
            return git
        return Check("backend", WARN, f"git at {root}: a colocated jj repository, but no jj "
                     "here, so captures go through its git side", "install jj >= 0.30 "
                     "(see the README) to capture through jj")
    return _jj(root, env) if kind == "jj" else _git(root)


def _has_jj(env: Mapping[str, str]) -> bool:
    from durability.backends.jj import find_jj
    from durability.ground.errors import JjMissing

    try:
        find_jj(env)
    except JjMissing:
        return False
    except DurabilityError:
        return True
    return True


def _jj(root: str, env: Mapping[str, str]) -> Check:
    from durability.backends.jj import find_jj

    try:
        jj = find_jj(env)
    except DurabilityError as exc:
        colocated = os.path.isdir(os.path.join(root, ".git"))
        step = ("install jj (README: Installing jj), or set DURABILITY_BACKEND=git to capture "
                "this colocated repository through git" if colocated else
                "install jj (README: Installing jj) or set DURABILITY_JJ")
        return Check("backend", FAIL, f"jj at {root}, but {exc.code}: {exc}", step)
    found = f"jj at {root} ({jj.path}, jj {jj.version_text})"
    if not _hook_finds_jj(env):
        return Check("backend", WARN, f"{found}, but a hook run with PATH={MINIMAL_PATH} (a "
                     "harness started from a desktop launcher) finds no jj: its captures here "
                     "would be jj-missing gaps", f"link {jj.path} into ~/.local/bin or "
                     "/usr/local/bin, or set DURABILITY_JJ in the harness's environment")
    return Check("backend", OK, found)


def _hook_finds_jj(env: Mapping[str, str]) -> bool:
    """Would a hook find jj with the PATH a harness may give it?  (The hook
    checks below run its command that way, but with an empty payload, which
    never reaches jj.)"""
    return _has_jj({**env, "PATH": MINIMAL_PATH})


def _git(root: str) -> Check:
    try:
        import pygit2

        pygit2.Repository(root)
    except Exception as exc:  # any failure to open it is the answer
        return Check("backend", FAIL, f"git at {root}, but pygit2 cannot open it: {exc}",
                     "check the repository with `git status`")
    version = getattr(pygit2, "__version__", "?")
    stale = _stale_index_locks(root)
    if stale:
        return Check("backend", WARN, f"git at {root}: a private index lock is left at "
                     f"{stale[0]} (left by a capture killed while writing it)",
                     "nothing to do: the next capture removes it")
    return Check("backend", OK, f"git at {root} (pygit2 {version}; jj not needed)")


def _stale_index_locks(root: str) -> list[str]:
    """The lock files of the toolkit's private indexes in ``root``'s git
    folder that no live writer holds (``index_lock``)."""
    import pygit2

    from durability.backends.index_lock import held

    try:
        git_dir = Path(pygit2.Repository(root).path) / "durability"
        return sorted(str(p) for p in git_dir.glob("index-*.lock")
                      if not held(p.with_name(p.name.removesuffix(".lock"))))
    except (pygit2.GitError, OSError):
        return []


def _state(settings: Settings) -> Check:
    try:
        paths.ensure_private_dir(settings.state_dir)
        with Store(settings.database) as store:
            verdict = store.integrity_check()
    except (DurabilityError, EngineError, OSError) as exc:
        return Check("state", FAIL, f"{describe(settings.database)}: {exc}",
                     "check the folder's owner and mode, or set DURABILITY_HOME")
    return Check("state", OK if verdict == "ok" else FAIL,
                 f"{describe(settings.database)} (integrity: {verdict})",
                 "" if verdict == "ok" else "move state.db aside; checkpoints stay in the repo")


def _machine(env: Mapping[str, str]) -> Check:
    """The machine id this shell records under (``durability.store.host.machine``):
    part of every worktree's key, so a CLI, a hook and a service that use
    different ones do not see each other's records."""
    from durability.store.host import id_host_part, machine, made_under

    found = machine(env)
    if found.source == "env":
        return Check("machine", OK, f"{found.id} (DURABILITY_HOST_ID)")
    if found.source == "kept":
        # A state folder copied from another machine (baked into a container
        # image, restored from a backup) brings that machine's id along.
        made, now = made_under(found.id), id_host_part()
        note = (f"; made under the host name {made}, this is {now}: if this state folder "
                "was copied from another machine, set DURABILITY_HOST_ID"
                if made is not None and made != now else "")
        return Check("machine", OK, f"{found.id} (kept in {found.path}){note}")
    return Check("machine", WARN, f"{found.id}: the host name, since {found.reason}; records "
                 "made under it are hidden if the host name changes",
                 "make the state folder writable, or set DURABILITY_HOST_ID")


def _spool(settings: Settings) -> Check:
    try:
        paths.ensure_private_dir(settings.spool_dir)
    except DurabilityError as exc:
        return Check("spool", FAIL, str(exc), "set DURABILITY_SPOOL_DIR to a folder of your own")
    mode = oct(os.stat(settings.spool_dir).st_mode & 0o777)
    return Check("spool", OK, f"{settings.spool_dir} ({mode})")


def _socket(settings: Settings, env: Mapping[str, str]) -> Check:
    path = settings.socket_path
    try:
        answer = client.call(path, {"v": 1, "op": "ping"}, timeout_s=2)
    except (ConnectionLost, ServiceTimeout) as exc:
        return Check("service", FAIL, f"{path}: {exc}",
                     "`durability stop --kill`, then `durability serve --detach`")
    except ServiceUnreachable:
        from durability.service.record import recorded_pid

        pid = recorded_pid(path, settings.state_dir)
        if pid is not None:
            return Check("service", WARN, f"pid {pid} runs for {path}, but its socket is gone "
                         "or taken (hooks capture in-process)", "`durability stop`, then "
                         "`durability serve --detach` (or let the next hook start one)")
        return Check("service", OK, f"not running on {path} (hooks capture in-process)",
                     "optional: `durability serve --detach` for faster captures")
    except DurabilityError as exc:
        return Check("service", FAIL, f"{path}: {exc}", "see `durability status`")
    mode = oct(os.stat(path).st_mode & 0o777)
    ok = bool(answer.get("ok"))
    where = f"pid {answer.get('pid')} on {path} ({mode})"
    differ = _settings_differ(answer.get("capture"), settings, env) if ok else ""
    if differ:
        return Check("service", WARN, f"{where} captures with settings other than this "
                     f"shell's: {differ}", "`durability stop`, then `durability serve --detach` "
                     "from here (or let the next hook start it) to capture with these")
    return Check("service", OK if ok else FAIL, where,
                 "" if ok else "restart the service: `durability serve --detach`")


def _settings_differ(theirs: object, settings: Settings, env: Mapping[str, str]) -> str:
    """The capture settings in which the service's differ from this shell's
    (the service keeps those of the environment it was started in: often a
    harness's, when a hook started it); "" when none do or it does not say."""
    from durability.backends import capture_settings

    if not isinstance(theirs, dict):
        return ""  # a service from before it reported them
    ours = capture_settings(env, settings.max_new_file_size)
    return "; ".join(f"{name}={theirs.get(name) or '(unset)'} there, "
                     f"{value or '(unset)'} here" for name, value in ours.items()
                     if _kind(name, theirs.get(name, value)) != _kind(name, value))


def _kind(name: str, value: object) -> object:
    """What matters of a setting: for jj, whether one is found at all (two
    working jj binaries, the venv's and the system's, capture alike)."""
    return (str(value).startswith("/")) if name == "jj" else value


def _remotes(settings: Settings, where: Path, env: Mapping[str, str]) -> Check | None:
    """The remotes of this worktree, if it has any (docs/how-to/remote.md): git
    must be there to push, and no checkpoint should be failing to get there."""
    import shutil

    from durability.backends import resolve_worktree
    from durability.store.remote_rows import FAILED, Remotes

    try:
        root = str(resolve_worktree(where))
        remotes = Remotes(settings.database)
        named = remotes.all(root)
        if not named:
            return None
        pending = [p for p in remotes.pending() if p.checkpoint.worktree == root]
    except (DurabilityError, EngineError):
        return None  # no worktree, or no store: the checks above say so
    from durability.ground.redact import credential_in_url

    names = ", ".join(r.name for r in named)
    leaky = [r.name for r in named if credential_in_url(r.url) is not None]
    if leaky:
        return Check("remotes", FAIL, f"{', '.join(leaky)}: the stored URL holds a credential "
                     "(an older version stored it; it is never shown, but it is kept here)",
                     f"`durability remote remove {leaky[0]}`, then `durability remote add "
                     f"{leaky[0]} URL` with the URL without it (git's credential helper "
                     "supplies the secret)")
    if shutil.which("git", path=env.get("PATH")) is None:
        return Check("remotes", FAIL, f"{names}: git is not on PATH, nothing can be pushed",
                     "install git")
    failed = sum(p.state == FAILED for p in pending)
    if failed:
        return Check("remotes", WARN, f"{names}: {failed} checkpoint(s) not pushed within the "
                     "bound (replication-failed gaps)", "check the URL and your access: "
                     "`durability remote list`, then `git ls-remote URL`")
    return Check("remotes", OK, f"{names}: {len(pending)} checkpoint(s) waiting to be pushed"
                 if pending else f"{names}: every checkpoint pushed")
