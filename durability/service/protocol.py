"""The service's wire protocol: newline-delimited JSON, version 1.

Each request is one JSON object on one line, at most ``MAX_REQUEST_BYTES``;
each response is one line.  The hook and other stdlib-only clients build the
same objects by hand (``durability.ground.client``); the service validates them here.

Request (``op`` ``capture``)::

    {"v": 1, "op": "capture", "request_id": "...", "run_id": "...",
     "node_id": "...", "iteration": 0, "attempt": 1, "worktree": "/abs/path",
     "source": "hook", "tool_use_id": "...", "label": "...", "timeout_ms": 9000,
     "deadline_ms": 1764496800000}

``deadline_ms`` (optional, added compatibly: an older service ignores it) is
when the requester stops waiting, in ms since the epoch.  A request still
waiting for its capture to begin at that time is dropped, and a capture that
finishes past it records nothing for it: the requester has captured or filed
the request itself (docs/RELIABILITY.md).  Such a request is answered
``{"ok": false, "error": {"code": "expired", ...}, "gap_recorded": false}``.
A connection over the service's limits is answered ``service-busy`` and closed.

Response::

    {"v": 1, "ok": true, "request_id": "...", "seq": 3, "commit_id": "...",
     "deduped": false}
    (plus "skipped": [{"path": "...", "reason": "unreadable-path"}, ...] when
     the checkpoint left paths out; each is also a gap)
    {"v": 1, "ok": false, "request_id": "...",
     "error": {"code": "jj-failed", "message": "..."}, "gap_recorded": true}

``ping`` answers ``{"v": 1, "ok": true, "pid": ..., "version": ...,
"captures": ..., "pushes": ..., "pushed": ...}`` (``pushes``: git pushes of
checkpoints to remotes since the service started; ``pushed``: the
checkpoints they carried, docs/how-to/remote.md; ``capture``: what its captures
depend on beyond the worktree, ``durability.backends.capture_settings``,
which doctor compares with its own shell's).

``watch`` (``run_id``, ``node_id``, ``iteration``, ``attempt``, ``worktree``,
``settle_ms``, ``max_delay_ms``, ``poll``) answers ``{"ok": true, "watch":
{...}, "mode": "inotify"|"poll"}``; ``unwatch`` (``worktree``) answers with the
final capture under ``"final"``; ``watches`` lists them under ``"watches"``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from durability.capture.capturer import Outcome
from durability.ground import ids
from durability.ground.errors import ProtocolError

if TYPE_CHECKING:
    from durability.store.models import AttemptKey

__all__ = [
    "MAX_REQUEST_BYTES",
    "PROTOCOL_VERSION",
    "CaptureReq",
    "PingReq",
    "UnwatchReq",
    "WatchReq",
    "WatchesReq",
    "error_response",
    "outcome_response",
    "parse_request",
]

PROTOCOL_VERSION = 1
# A capture request is a few hundred bytes; 64 KiB leaves room for long labels
# and paths while bounding what one connection can make the service hold.
MAX_REQUEST_BYTES = 64 * 1024

def _valid_id(value: str) -> str:
    return ids.validate_id(value, "id")


def _absolute(value: str) -> str:
    # A path that is not UTF-8 arrives as \udcXX escapes (surrogateescape) and
    # is kept as such; a lone surrogate that names no bytes is not a path.
    if not ids.is_path(value):
        raise ValueError("worktree must be an absolute path")
    return value


Id = Annotated[str, Field(min_length=1, max_length=200)]
#: A run or node id: also safe as part of a file name (``ids.validate_id``).
RunId = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_valid_id)]
Worktree = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_absolute)]
Iteration = Annotated[int, Field(ge=0, lt=10**9)]
AttemptNo = Annotated[int, Field(ge=1, lt=10**9)]


class _Base(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    v: Literal[1]


class PingReq(_Base):
    op: Literal["ping"]


class CaptureReq(_Base):
    op: Literal["capture"]
    request_id: Id
    run_id: RunId
    node_id: RunId
    iteration: Iteration = 0
    attempt: AttemptNo = 1
    worktree: Worktree
    source: Literal["hook", "wrap", "watch", "manual", "pre-restore", "attempt"]
    tool_use_id: Annotated[str, Field(max_length=200)] | None = None
    label: Annotated[str, Field(max_length=1000)] | None = None
    timeout_ms: Annotated[int, Field(ge=100, le=3_600_000)] = 60_000
    deadline_ms: Annotated[int, Field(ge=0, lt=2**53)] | None = None
    harness: Literal["claude", "codex", "gemini"] | None = None
    agent_id: Annotated[str, Field(max_length=200)] | None = None
    agent_type: Annotated[str, Field(max_length=200)] | None = None
    #: A hook's tool call (issue 24: its boundary), all optional.
    tool_name: Annotated[str, Field(max_length=200)] | None = None
    event: Annotated[str, Field(max_length=64)] | None = None
    transcript_path: Annotated[str, Field(max_length=4096)] | None = None
    transcript_bytes: Annotated[int, Field(ge=0, lt=2**63)] | None = None
    session_id: Annotated[str, Field(max_length=200)] | None = None
    #: An engine attempt's start or end capture carrying its watch step
    #: (decision 0056): ``take``, after the capture, hands the run's watch of
    #: the worktree to this attempt (armed if there is none, no baseline);
    #: ``park``, before it, parks the watch if it is this attempt's.  The
    #: answer's ``watch`` is that step's own answer (an older service sends
    #: none: then the caller asks for it itself).
    watch: Literal["take", "park"] | None = None


class WatchReq(_Base):
    """Watch a worktree for an attempt (Tier 2); the service records it."""

    op: Literal["watch"]
    run_id: RunId
    node_id: RunId
    iteration: Iteration = 0
    attempt: AttemptNo = 1
    worktree: Worktree
    settle_ms: Annotated[int, Field(ge=10, le=600_000)] = 300
    max_delay_ms: Annotated[int, Field(ge=10, le=3_600_000)] = 5_000
    poll: bool = False
    #: False: no capture when watching starts (an engine attempt took its own).
    baseline: bool = True
    #: True: a watch of the worktree for the same run, with the same timings
    #: (one an earlier attempt parked), passes to this attempt in place
    #: instead of being ended and armed again (decision 0056).
    reuse: bool = False


class UnwatchReq(_Base):
    """End the watch of a worktree with a final capture."""

    op: Literal["unwatch"]
    worktree: Worktree
    #: False: no final capture; the caller captures the tree next (an engine
    #: attempt's end capture), which answers what the watch heard.
    final: bool = True
    #: True: park the watch instead (armed, capturing for nobody) until the
    #: run's next attempt takes it with ``reuse`` (decision 0056); implies
    #: no final capture.
    keep: bool = False
    #: With all four: only if the watch is still this attempt's (an engine
    #: run ends or parks only its own watch, never one another owner of the
    #: run has taken over since); otherwise the answer says it was left.
    run_id: RunId | None = None
    node_id: RunId | None = None
    iteration: Iteration | None = None
    attempt: AttemptNo | None = None

    def key(self) -> AttemptKey | None:
        """The attempt the unwatch is limited to, or None."""
        from durability.store.models import AttemptKey

        if self.run_id is None or self.node_id is None or self.iteration is None \
                or self.attempt is None:
            return None
        return AttemptKey(self.run_id, self.node_id, self.iteration, self.attempt)


class WatchesReq(_Base):
    """List the service's watches."""

    op: Literal["watches"]


AnyReq = PingReq | CaptureReq | WatchReq | UnwatchReq | WatchesReq
_Request = Annotated[AnyReq, Field(discriminator="op")]
_adapter: TypeAdapter[AnyReq] = TypeAdapter(_Request)


def parse_request(line: bytes) -> AnyReq:
    """Validate one request line; ``ProtocolError`` says what is wrong."""
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError("request is not valid JSON") from None
    if not isinstance(data, dict):
        raise ProtocolError("request must be a JSON object")
    if data.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(f"unsupported protocol version {data.get('v')!r}; this is v1")
    raw = {k: v for k, v in data.items() if isinstance(v, str) and _has_surrogate(v)}
    try:
        req = _adapter.validate_python({**data, **{k: _stand_in(v) for k, v in raw.items()}})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "request"
        raise ProtocolError(f"{where}: {first['msg']}") from None
    if not raw:
        return req
    if "worktree" in raw and not ids.is_path(raw["worktree"]):
        raise ProtocolError("worktree: worktree must be an absolute path")
    fields = type(req).model_fields
    return req.model_copy(update={k: v for k, v in raw.items() if k in fields})


# pydantic-core cannot hold a lone surrogate, which is how Python spells a path
# that is not UTF-8 (surrogateescape) and what a broken \ud800 escape decodes
# to.  Such a field is validated as a stand-in of the same length (each
# surrogate U+FFFD) and then given back as sent: paths stay lossless.
_SURROGATES = {c: 0xFFFD for c in range(0xD800, 0xE000)}


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _stand_in(text: str) -> str:
    return text.translate(_SURROGATES)


def outcome_response(outcome: Outcome) -> dict[str, Any]:
    return {"v": 1, "ok": outcome.ok, "request_id": outcome.request_id, **outcome.to_dict()}


def error_response(code: str, message: str, request_id: str | None = None) -> dict[str, Any]:
    return {"v": 1, "ok": False, "request_id": request_id,
            "error": {"code": code, "message": message}, "gap_recorded": False}
