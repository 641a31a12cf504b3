"""``git push`` and ``git fetch`` of checkpoint refs, through ``proc`` (an
argument list, never a shell).

git, not pygit2, moves the objects: it speaks ssh and https with the user's
own keys and credential helpers, which libgit2 would need callbacks for.  The
URL is always the one stored for the remote, never a remote of the user's git
configuration, so nothing goes to ``origin`` unless the user named it.  No
hook of the user's repository runs (``core.hooksPath`` is emptied, and
``--no-verify``), no tag or submodule goes along whatever the user's
configuration says, git never prompts (``GIT_TERMINAL_PROMPT=0``), and only the
file, ssh and https transports are allowed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from durability.backends import git_cli
from durability.ground import proc
from durability.ground.errors import DurabilityError
from durability.ground.redact import redact

__all__ = ["RemoteFailed", "fetch", "ls_remote", "push", "replace"]

#: Ceiling on one push or fetch.
TIMEOUT_S = 120.0
#: The user's own settings for reaching a remote, kept from the environment
#: (CI names its deploy key with GIT_SSH_COMMAND); every other GIT_ variable
#: goes: a hook's GIT_DIR or GIT_INDEX_FILE must not steer this git.
_KEPT = frozenset({
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH",
    "GIT_SSL_CERT", "GIT_SSL_KEY", "GIT_PROXY_SSL_CAINFO", "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
})


class RemoteFailed(DurabilityError):
    """A push to, or fetch from, a remote failed (unreachable, refused)."""

    code = "remote-failed"


def _git(git_dir: str, args: Sequence[str], env: Mapping[str, str], timeout: float) -> str:
    child = {k: v for k, v in env.items() if not k.startswith("GIT_") or k in _KEPT}
    child.update(GIT_TERMINAL_PROMPT="0", GIT_ALLOW_PROTOCOL="file:ssh:https",
                 LC_ALL="C", GIT_DIR=git_dir)
    try:
        return git_cli.run(args, env=child, timeout=timeout, needs="replication needs git",
                           options=["-c", f"core.hooksPath={os.devnull}", "-c",
                                    "core.askPass="],
                           error=RemoteFailed, explain=_why)
    except RemoteFailed as exc:
        # git's error names the URL (a stored one may predate the refusal of
        # credentials): what is logged, filed in a gap or shown carries none.
        raise RemoteFailed(redact(exc.message), code=exc.code) from None


def _why(done: proc.Finished) -> str:
    """What git said went wrong: a push's refused refs with their reasons
    (``--porcelain`` puts them on stdout, ``!`` lines), then its last error
    lines; never its ``hint:`` lines, which alone say nothing of the cause."""
    refused = [" ".join(ln.split("\t")[1:]) for ln in done.stdout.splitlines()
               if ln.startswith("!\t")]
    said = [ln for ln in done.stderr.splitlines()
            if ln.strip() and not ln.startswith("hint:")][-3:]
    more = [f"and {len(refused) - 1} more refused"] if len(refused) > 1 else []
    return " | ".join(refused[:1] + more + said)


def push(git_dir: str, url: str, refspecs: Sequence[str], *,
         env: Mapping[str, str] = os.environ, timeout: float = TIMEOUT_S) -> None:
    """Push ``refspecs`` (``src:dst``, never forced) from ``git_dir`` to ``url``.

    Not forced: a ref the remote holds at a commit that is not an ancestor
    (another machine's checkpoints of the same attempt) is refused, never
    overwritten.  ``--atomic``: all of a batch lands, or none of it does, so
    the state recorded afterwards is exact.
    """
    if refspecs:
        # Whatever the user's configuration asks of an ordinary push
        # (push.followTags, submodule.recurse): no tag, no submodule's
        # commits to the submodule's own remote; only these refspecs.
        _git(git_dir, ["push", "--no-verify", "--atomic", "--porcelain", "--quiet",
                       "--no-follow-tags", "--no-recurse-submodules", "--",
                       url, *refspecs], env, timeout)


def replace(git_dir: str, url: str, refspecs: Sequence[str], leases: Mapping[str, str], *,
            env: Mapping[str, str] = os.environ, timeout: float = TIMEOUT_S) -> None:
    """Push ``refspecs`` (``src:dst``, or ``:dst`` to delete) where each
    ``dst`` may move to a commit that does not descend from the remote's
    (``durability forget`` rewrote it), but only while the remote holds it
    at ``leases[dst]`` (``""``: holds no such ref): a ref someone else moved
    since it was read is refused, never overwritten.  ``--atomic``, as
    ``push``."""
    if refspecs:
        guard = [f"--force-with-lease={ref}:{old}" for ref, old in sorted(leases.items())]
        _git(git_dir, ["push", "--no-verify", "--atomic", "--porcelain", "--quiet",
                       "--no-follow-tags", "--no-recurse-submodules", *guard, "--",
                       url, *refspecs], env, timeout)


def fetch(git_dir: str, url: str, refspecs: Sequence[str], *,
          env: Mapping[str, str] = os.environ, timeout: float = TIMEOUT_S) -> None:
    """Fetch ``refspecs`` (``+src:dst``) from ``url`` into ``git_dir``."""
    _git(git_dir, ["fetch", "--no-tags", "--no-write-fetch-head", "--quiet",
                   "--no-recurse-submodules", "--", url, *refspecs], env, timeout)


def ls_remote(git_dir: str, url: str, refs: Sequence[str], *,
              env: Mapping[str, str] = os.environ, timeout: float = TIMEOUT_S
              ) -> dict[str, str]:
    """``{ref: commit}`` of ``refs`` on ``url`` (those it has)."""
    out = _git(git_dir, ["ls-remote", "--refs", "--", url, *refs], env, timeout)
    found = {}
    for line in out.splitlines():
        sha, _, ref = line.partition("\t")
        if ref:
            found[ref] = sha
    return found
