"""Which files never leave the machine unasked: the secret patterns a push is
checked against (docs/how-to/remote.md, "Secrets are withheld").

A checkpoint's push carries its commit and every ancestor the remote lacks
(for git, the attempt's whole chain and the branch it grew from).  So the
check walks the commits the push would carry, down to the ones already
checked clean or already listed as pushed, and looks at the paths each one
adds or changes against its first parent (all of a root commit's): a file
that sits in a later tree unchanged came in with an earlier commit, which the
walk reaches too.  A path matches a pattern by its name (a pattern without a
``/``, e.g. ``*.pem``) or by its last components (``.aws/credentials``);
an ``allow`` pattern wins over every secret pattern.

The patterns are the defaults below, plus ``[secrets] patterns`` of the config
file (``$DURABILITY_CONFIG``, else ``config.toml`` in the platform's config
folder, as ``[retention]``), minus ``[secrets] allow``.  The file is read at
each replication pass, so allowing a path takes effect without a restart.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import pygit2

from durability.backends.git_store import user_refs
from durability.config import config_tables
from durability.ground.errors import InvalidInput

__all__ = ["DEFAULT_ALLOW", "DEFAULT_PATTERNS", "Finding", "Patterns", "Scanner", "load",
           "published_tips"]

#: Files that hold secrets, by the usual names.
DEFAULT_PATTERNS = (
    ".env", ".env.*", "*.env",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
    ".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass",
    "credentials.json", "client_secret*.json", "service-account*.json",
    ".aws/credentials", ".docker/config.json", ".kube/config",
    "secrets.yml", "secrets.yaml", "*.tfvars",
)
#: Files by those names that hold no secret by convention: templates and
#: public keys.
DEFAULT_ALLOW = (
    ".env.example", ".env.sample", ".env.template", ".env.dist", "*.env.example",
    "*.pub",
)
#: A walk stops after this many findings (one withholds the push).
MAX_NAMED = 5
_MAX_KEPT = 10_000


@dataclass(frozen=True)
class Patterns:
    secret: tuple[str, ...] = DEFAULT_PATTERNS
    allow: tuple[str, ...] = DEFAULT_ALLOW

    def matches(self, path: str) -> str | None:
        """The secret pattern ``path`` (``/``-separated, relative) matches,
        or None (none does, or an allow pattern does)."""
        if any(_match(p, path) for p in self.allow):
            return None
        return next((p for p in self.secret if _match(p, path)), None)


def _match(pattern: str, path: str) -> bool:
    parts = path.split("/")
    want = pattern.strip("/").split("/")
    if len(want) > len(parts):
        return False
    return all(fnmatchcase(part, w) for part, w in zip(parts[-len(want):], want, strict=True))


def load(env: Mapping[str, str] = os.environ) -> Patterns:
    """The patterns: the defaults, ``[secrets] patterns`` added, ``[secrets]
    allow`` added to the allowed.  A file that cannot be read, or a setting
    that is not a list of strings, is ``invalid-value``: nothing is pushed
    on a guess."""
    path, data = config_tables(env)
    table = data.get("secrets", {})
    if not isinstance(table, dict) or set(table) - {"patterns", "allow"}:
        raise InvalidInput(f"{path}: [secrets] takes only `patterns` and `allow`, lists of "
                           "file name patterns")
    extra = _strings(table.get("patterns", []), path, "patterns")
    allow = _strings(table.get("allow", []), path, "allow")
    return Patterns(DEFAULT_PATTERNS + extra, DEFAULT_ALLOW + allow)


def _strings(value: object, path: Path, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip("/")
                                              for v in value):
        raise InvalidInput(f"{path}: [secrets] {name} must be a list of file name patterns")
    return tuple(value)


@dataclass(frozen=True)
class Finding:
    """A secret-shaped path a push would carry."""

    path: str
    pattern: str
    #: The commit that brought it in.
    commit: str
    #: The user's own ref (a branch or tag of the repository) whose history
    #: holds that commit (the file is in the user's git history, which
    #: `durability forget` does not rewrite), "" when none does, None
    #: before it was looked up.
    own_ref: str | None = None


#: The refs whose history the user already published to a remote of their
#: own (git's remote-tracking refs): never scanned.
PUBLISHED = "refs/remotes/"
#: The user's own refs: a finding in their history is named as such.
OWN = ("refs/heads/", "refs/tags/")


class Scanner:
    """The check, with what it learned: a tip's verdict never changes (its
    history is fixed), so each tip is walked once per set of patterns and of
    published refs, and the walk of the next checkpoint stops at a commit
    already walked, whole history clean or not (its cost is the new commits,
    also while a secret is held back)."""

    def __init__(self) -> None:
        #: (repo, patterns, published) -> {commit: verdict of its whole history}
        self._verdicts: dict[tuple[str, Patterns, frozenset[str]],
                             dict[str, tuple[Finding, ...]]] = {}
        self._clean: dict[tuple[str, Patterns, frozenset[str]], set[str]] = {}

    def scan(self, repo: pygit2.Repository, tip: str, patterns: Patterns,
             known: Collection[str] = (), published: frozenset[str] | None = None
             ) -> tuple[Finding, ...]:
        """The secret paths the history of commit ``tip`` brings, down to the
        commits in ``known`` (already pushed or checked), those the user's
        remote-tracking refs hold (the user published them: ``published``,
        their commits, read here when None), and their ancestors."""
        if published is None:
            published = published_tips(repo)
        key = (repo.path, patterns, published)
        verdicts = self._verdicts.setdefault(key, {})
        if tip in verdicts:
            return verdicts[tip]
        clean = self._clean.setdefault(key, set())
        found: list[Finding] = []
        seen: set[str] = set()
        stops: set[str] | None = None
        todo = [tip]
        while todo and len(found) < MAX_NAMED:
            oid = todo.pop()
            if oid in seen or oid in clean or oid in known:
                continue
            seen.add(oid)
            if oid in verdicts:  # an earlier tip: its whole history's verdict
                had = {(f.path, f.commit) for f in found}
                found += [f for f in verdicts[oid] if (f.path, f.commit) not in had]
                continue
            if len(seen) > 1 and stops is None:  # beyond the tip: the user's history?
                stops = _merge_bases(repo, tip, published)
            if stops and oid in stops:
                continue
            try:
                commit = repo[oid].peel(pygit2.Commit)
            except (KeyError, ValueError, pygit2.GitError):
                continue  # not here (a shallow clone's edge): nothing of it is pushed
            found += _added(repo, commit, patterns)
            todo += [str(p) for p in commit.parent_ids]
        verdict = tuple(_owned(repo, found[:MAX_NAMED]))
        if sum(map(len, self._verdicts.values())) >= _MAX_KEPT:
            self._verdicts.clear()  # a long-lived service: walked again, never wrong
            self._clean.clear()
            verdicts = self._verdicts.setdefault(key, {})
            clean = self._clean.setdefault(key, set())
        verdicts[tip] = verdict
        if not verdict:
            clean |= seen
        return verdict


def published_tips(repo: pygit2.Repository) -> frozenset[str]:
    """The commits of the user's remote-tracking refs (read once per pass:
    listing the refs costs their number, our pins included)."""
    return _targets(repo, (PUBLISHED,))


def _targets(repo: pygit2.Repository, prefixes: tuple[str, ...]) -> frozenset[str]:
    found = set()
    refs = user_refs(repo)
    for name in refs.references:
        if name.startswith(prefixes):
            try:
                found.add(str(refs.references[name].peel(pygit2.Commit).id))
            except (KeyError, ValueError, pygit2.GitError):
                continue  # symbolic to nothing, or not a commit
    return frozenset(found)


def _merge_bases(repo: pygit2.Repository, tip: str, published: frozenset[str]) -> set[str]:
    """Commits below which everything is in the published history: the
    merge base of ``tip`` with each published ref (one of them, where git
    knows several: the walk then looks at more, never at less)."""
    bases = set()
    for ref in published:
        try:
            base = repo.merge_base(tip, ref)
        except (KeyError, ValueError, pygit2.GitError):
            continue
        if base is not None:
            bases.add(str(base))
    return bases


def _owned(repo: pygit2.Repository, found: list[Finding]) -> list[Finding]:
    """``found``, each naming the user's branch or tag that holds its commit
    (those looked up already, from an earlier tip's verdict, as they are)."""
    if all(f.own_ref is not None for f in found):
        return found
    refs = user_refs(repo)
    own = [(name, str(refs.references[name].peel(pygit2.Commit).id))
           for name in refs.references if name.startswith(OWN)
           and _is_commit(refs, name)]
    done = []
    for f in found:
        if f.own_ref is not None:
            done.append(f)
            continue
        ref = next((name for name, target in sorted(own)
                    if target == f.commit or repo.descendant_of(target, f.commit)), "")
        done.append(Finding(f.path, f.pattern, f.commit, ref))
    return done


def _is_commit(repo: pygit2.Repository, name: str) -> bool:
    try:
        repo.references[name].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return False
    return True


def _added(repo: pygit2.Repository, commit: pygit2.Commit, patterns: Patterns) -> list[Finding]:
    """The secret paths ``commit`` adds or changes against its first parent."""
    if commit.parents:
        diff = commit.parents[0].tree.diff_to_tree(commit.tree)
    else:
        diff = commit.tree.diff_to_tree(swap=True)
    found = []
    for delta in diff.deltas:
        if delta.status == pygit2.enums.DeltaStatus.DELETED:
            continue
        path = delta.new_file.path
        pattern = patterns.matches(path)
        if pattern is not None:
            found.append(Finding(path, pattern, str(commit.id)))
    return found
