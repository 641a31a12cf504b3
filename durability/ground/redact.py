"""Token-shaped text out of what leaves the machine or is shown (docs/how-to/remote.md,
"What is redacted").

One function, ``redact``, for every place that prints, logs or stores a URL,
git's error output, or a label that goes to a remote: a URL's user
information (other than a plain ssh user name) and query string, an
``Authorization`` scheme's credential, the shapes of the common tokens, and
the value of a ``key=value``, ``key: value`` or ``--flag value`` whose name
says it is a secret.  Each is replaced by ``<redacted>``; the rest of the text
is kept, so a label still says what the call did.  Standard library only:
the ground floor (the backends and the remote room both use it).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["MARK", "credential_in_url", "redact"]

MARK = "<redacted>"

# A URL: a scheme, then everything up to white space or a quote.
_URL = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)([^\s\"'<>]*)")
# A plain ssh user name: not a credential.
_SSH_USER = re.compile(r"[A-Za-z0-9._-]{1,32}")
_SSH_SCHEMES = ("ssh://", "git+ssh://", "ssh+git://")

#: Well-known token shapes, whatever surrounds them.
_TOKENS = [
    r"sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{12,}",   # OpenAI, Anthropic, Stripe
    r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}",           # GitHub
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"glpat-[A-Za-z0-9_-]{16,}",                            # GitLab
    r"xox[abposr]-[A-Za-z0-9-]{8,}",                        # Slack
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",                           # AWS access key id
    r"AIza[0-9A-Za-z_-]{30,}",                              # Google API key
    r"npm_[A-Za-z0-9]{30,}",                                # npm
    r"hf_[A-Za-z0-9]{30,}",                                 # Hugging Face
    r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",            # Stripe secret, restricted
    r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # a JWT
]
_TOKEN = re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(_TOKENS) + ")")
# What a secret's name holds (case-insensitive).
_NAME = (r"[A-Za-z0-9_-]*(?:passw(?:or)?d|pwd|secret|token|api[_-]?key|apikey|"
         r"access[_-]?key|private[_-]?key|credential|authorization|auth[_-]?key)"
         r"[A-Za-z0-9_-]*")
_VALUE = r"(?:\"[^\"]*\"|'[^']*'|[^\s&;,'\"]+)"
# A name that only says "token" (max_tokens, token_limit): a count, when its
# value is a number.
_COUNT_NAME = re.compile(r"(?i)(?!.*(?:passw|pwd|secret|key|credential|auth)).*token")
# A separator followed by white space and then this is a key with no value
# (``grep -rn api_key: config/``): a path or an option, not a secret.
_NOT_A_VALUE = re.compile(r"-|\.{0,2}/|~/|[^\s]*/$|[\w.-]+(?:/[\w.-]+)+\.[A-Za-z0-9]{1,5}$|"
                          r"[\w-]+\.(?:py|js|ts|go|rs|rb|java|json|ya?ml|toml|ini|cfg|conf|"
                          r"txt|md|sh|env|tf)$")
# A quoted JSON key and its value: {"password":"x"}, also with its quotes
# escaped inside a shell string (\"token\":\"x\").
_JSON = re.compile(r"(?i)(\\?[\"'])(" + _NAME + r")(\\?[\"']\s*:\s*)"
                   r"(\\?\"(?:[^\"\\]|\\(?!\"))*\\?\"|'[^']*'|[^\s,}\]]+)")
# mysql -pVALUE (the value attached to -p), in a mysql-like command.
_MYSQL_P = re.compile(r"(?<![\w-])((?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|"
                      r"mariadb|mariadb-dump)\b[^|;&\n]*?\s-p)(?=[^\s])[^\s]+")
# docker login -p VALUE (podman, helm registry login...): -p after `login`.
_LOGIN_P = re.compile(r"(\b(?:docker|podman|nerdctl|buildah|skopeo|oras|crane|"
                      r"helm\s+registry)\s+login\b[^|;&\n'\"]*?\s-p\s+)(?!-)[^\s'\"]+")
# aws configure set NAME VALUE, npm config set NAME VALUE.
_CONFIG_SET = re.compile(r"(?i)(\bconfig(?:ure)?\s+set\s+[^\s=]*?" + _NAME + r"\s+)"
                         r"(?!-)[^\s]+")
# Tokens in a URL's path: Slack and Discord webhooks, Telegram bots.
_PATH_TOKENS = [
    (re.compile(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]+"),
     rf"\1{MARK}"),
    (re.compile(r"(/api/webhooks/\d+/)[A-Za-z0-9_-]+"), rf"\1{MARK}"),
    (re.compile(r"(/bot)\d{5,}:[A-Za-z0-9_-]{20,}"), rf"\1{MARK}"),
]
# An Authorization header's scheme and credential.
_SCHEME = re.compile(r"(?i)(\bbearer|authorization:\s*(?:basic|token|digest))(\s+)"
                     r"[A-Za-z0-9._~+/=-]{6,}")
# --token VALUE, --password=VALUE, -H is handled by _SCHEME.
_FLAG = re.compile(r"(?i)(?<![A-Za-z0-9_])(--?(" + _NAME + r"))(\s+|=)(?!-)(" + _VALUE + ")")
# name=value, name: value (an environment assignment, a header, a query).
_ASSIGN = re.compile(r"(?i)(?<![A-Za-z0-9_-])(" + _NAME + r")(\s*[=:]\s*)"
                     r"(?!(?:bearer|basic|token|digest)\s)(" + _VALUE + ")")
# user:password@host:path (scp-like ssh)
_SCP = re.compile(r"(?<![\w/@])[A-Za-z0-9._%+-]+:[^\s@/]+@(?=[A-Za-z0-9.-]+:)")
# curl -u user:password
_USER_OPT = re.compile(r"(?<![A-Za-z0-9_-])(-u|--user)(\s+|=)([^\s:]+):\S+")


def _url(match: re.Match[str]) -> str:
    scheme, rest = match.group(1), match.group(2)
    authority, slash, path = rest.partition("/")
    user, at, host = authority.rpartition("@")
    if at and not (scheme.lower() in _SSH_SCHEMES and _SSH_USER.fullmatch(user)
                   and not _TOKEN.search(user)):
        authority = f"{MARK}@{host}"
    path, q, _query = (slash + path).partition("?")
    if not q and "?" in authority:  # https://host?token=... (no path)
        authority, q, _query = authority.partition("?")
    path, hashmark, _fragment = path.partition("#")
    return scheme + authority + path + (f"?{MARK}" if q else "") + (f"#{MARK}" if hashmark
                                                                   else "")


def redact(text: str) -> str:
    """``text`` with every credential-shaped part replaced by ``<redacted>``."""
    if not text:
        return text
    text = _URL.sub(_url, text)
    text = _SCP.sub(f"{MARK}@", text)
    text = _SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{MARK}", text)
    text = _USER_OPT.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}:{MARK}", text)
    for pattern, mark in _PATH_TOKENS:
        text = pattern.sub(mark, text)
    text = _JSON.sub(_json, text)
    text = _MYSQL_P.sub(rf"\1{MARK}", text)
    text = _LOGIN_P.sub(rf"\1{MARK}", text)
    text = _CONFIG_SET.sub(rf"\1{MARK}", text)
    text = _FLAG.sub(lambda m: _keep(m, m.group(2), m.group(3), m.group(4)), text)
    text = _ASSIGN.sub(lambda m: _keep(m, m.group(1), m.group(2), m.group(3)), text)
    return _TOKEN.sub(MARK, text)


def _keep(match: re.Match[str], name: str, separator: str, value: str) -> str:
    """``name`` and ``separator``, then the value redacted unless it is no
    secret: a number after a name that only says "token" (a count), or what
    follows white space after a key that has no value of its own (a path or
    an option: ``grep -rn api_key: config/``)."""
    if value == MARK or (value.isdigit() and _COUNT_NAME.match(name)):
        return match.group(0)
    if separator.strip() and separator[-1].isspace() and _NOT_A_VALUE.match(value):
        return match.group(0)
    return match.group(0)[:len(match.group(0)) - len(value)] + MARK


def _json(match: re.Match[str]) -> str:
    value = match.group(4)
    if value.isdigit() and _COUNT_NAME.match(match.group(2)):
        return match.group(0)
    if value.startswith(('\\"', '"', "'")):
        quote = '\\"' if value.startswith('\\"') else value[0]
        value = f"{quote}{MARK}{quote}"
    else:
        value = MARK
    return match.group(1) + match.group(2) + match.group(3) + value


def credential_in_url(url: str) -> str | None:
    """What credential a remote URL holds (a phrase), or None.

    Refused: any user information in a file:// or https:// URL (a password,
    a token given as the user name, percent-encoded or not: git's
    credential helpers hold those); in ssh:// and ``user@host:path`` a user
    that is not a plain name, or is shaped like a token; a query string or a
    fragment anywhere (``?private_token=...``)."""
    if "://" in url:
        scheme, rest = url.split("://", 1)
        authority = rest.split("/", 1)[0]
        ssh = f"{scheme.lower()}://" in _SSH_SCHEMES
    else:  # [user@]host:path
        authority, ssh = url.split("/", 1)[0].partition(":")[0], True
        if "@" in url.split("/", 1)[0] and ":" in url.split("@", 1)[0]:
            return "a password"
    user, at, _host = authority.rpartition("@")
    if at:
        plain = unquote(user)
        if not ssh:
            return "a user name or password"
        if not _SSH_USER.fullmatch(plain) or _TOKEN.search(plain):
            return "a password or token"
    if "?" in url or "#" in url:
        return "a query string"
    return None
