"""Running the git program, for what pygit2 does not do (worktrees, push,
fetch): found on the caller's PATH (a hook's or a run's, not ours), an
argument list through ``proc`` (never a shell), and a failure raised as the
caller's own error with git's last words on one line."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence

from durability.ground import proc
from durability.ground.errors import DurabilityError, GitFailed

__all__ = ["run"]


def run(args: Sequence[str], *, env: Mapping[str, str], timeout: float, needs: str,
        options: Sequence[str] = (), cwd: str | None = None,
        error: type[DurabilityError] = GitFailed, timeout_code: str | None = None,
        check: bool = True, explain: Callable[[proc.Finished], str] | None = None) -> str:
    """git's standard output for ``git OPTIONS ARGS`` (``args`` start with
    the subcommand, ``options`` go before it).

    ``error`` is raised when git is not on ``env``'s PATH (saying what
    ``needs`` it), does not start, runs past ``timeout`` (with
    ``timeout_code`` where given), or, with ``check``, exits non-zero.
    """
    git = shutil.which("git", path=env.get("PATH"))
    if git is None:
        raise error(f"git not found on PATH: {needs}")
    what = _naming(args, cwd)
    try:
        done = proc.run([git, *options, *args], cwd=cwd, timeout=timeout, env=env)
    except proc.TimedOut as exc:
        raise error(f"{what} ran past {timeout:g}s", code=timeout_code) from exc
    except OSError as exc:
        raise error(f"{what} did not run: {exc}") from exc
    if check and done.returncode != 0:
        why = explain(done) if explain is not None else proc.last_words(done.stderr)
        raise error(f"{what} failed: {why or f'exit {done.returncode}'}")
    return done.stdout


def _naming(args: Sequence[str], cwd: str | None) -> str:
    """``git worktree add in /x``: the subcommand and its verb, not its flags."""
    words = [a for a in args[:2] if not a.startswith("-")]
    return " ".join(["git", *words]) + (f" in {cwd}" if cwd else "")
