"""``durability snapshot-hook``: the Claude Code PostToolUse hook (Tier 1).

It also reads OpenAI Codex CLI ``PostToolUse`` and Gemini CLI ``AfterTool``
payloads, told apart by their shape (``harness``), and each harness's pre-call
event (``PreToolUse``, ``BeforeTool``), which captures nothing: it records the
call announced (``gaps.calls``), so that one never finished is a gap.

Contract 6 (docs/DESIGN.md): it exits 0 whatever happens, within ``DURABILITY_HOOK_TIMEOUT_MS``,
prints nothing on stdout, and turns every failure into a gap.  Its fast path
(service reachable) imports only the standard library and this package's
stdlib-only modules; the in-process fallback imports the rest on demand.
"""

from __future__ import annotations

import _thread
import os
import sys
import time

from durability.gaps import calls
from durability.ground import client, envms, fastjson, ids, paths
from durability.ground.errors import InsecurePath, ServiceBusy, ServiceTimeout, ServiceUnreachable

# Imports kept off the fast path, which runs on every tool call (see
# bench/RESULTS.md): typing (~3 ms) is for annotations only, uuid (~3 ms,
# it imports platform) is replaced by _random_id, and spool (~9 ms with
# dataclasses) is imported when a gap is actually filed.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, BinaryIO

__all__ = ["main", "run_hook", "tool_label"]

# Claude Code sends the tool's input and response; a Read of a large file can
# make that big.  Beyond this the payload is refused (a bad-hook-input gap)
# rather than held in memory.
MAX_INPUT_BYTES = 16 * 1024 * 1024
DEFAULT_BUDGET_MS = 10_000
# Time kept back from the budget to write a gap and exit before the deadline.
_MARGIN_S = 0.3
# Kept back from the fallback's jj before that deadline: time to stop a
# hanging jj and file its jj-timeout gap (spool, then store: on PostgreSQL a
# round trip) on a loaded machine before the watchdog files a timeout instead.
# 0.2 s was too little there (1 of 15 loaded runs of test_hook_postgres.py).
# The lock wait keeps its 0.1 s: its gap is a timeout either way.
_RESERVE_S = 0.5
# Where a tool names the file it touched: Claude Code and Codex use file_path
# (notebook_path, path); Gemini CLI's read tools use absolute_path.
_PATH_KEYS = ("file_path", "notebook_path", "path", "absolute_path")
# Codex apply_patch headers that name a file.
_PATCH_HEADS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")
# A shell command in a label is cut here: enough to recognise it in a listing.
_COMMAND_CHARS = 200
_SESSION_RE = rb'"session_id"\s*:\s*"([^"\\]{1,200})"'
_EVENT_RE = rb'"hook_event_name"\s*:\s*"([^"\\]{1,64})"'


class _Hook:
    """What the hook knows so far, so a failure at any point files a gap."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.request_id = _random_id()
        self.fields: dict[str, Any] = {"source": "hook"}
        self.run_id = env.get("DURABILITY_RUN_ID") or ids.INVALID_RUN
        self.done = _thread.allocate_lock()
        self.finished = False
        self.budget_s = _budget_ms(env) / 1000
        self.alarms = 0
        self.disarms: list[Callable[[], None]] = []
        #: A pre-call (or refused call's) hook: it files no gap of its own, the
        #: same call's post-call hook meets the same problem and files it once.
        self.quiet = False
        #: No service answered: one is to be started for the calls after
        #: this one, once this call's capture is done (or the budget ran out).
        self.autostart = False
        #: Held while one thread starts it: a second watchdog (the alarm and
        #: the fallback's timer both fire) must not exit the process mid-spawn.
        self.autostarting = _thread.allocate_lock()

    def gap(self, reason: str, detail: str, *, last: bool = False) -> None:
        """File one gap for this request (at most once); ``last`` when the
        process exits right after (see ``spool.append_last_gap``)."""
        # Held while writing: the watchdog, which exits the process next, waits
        # for a gap being written instead of cutting it off (briefly, so that
        # it still exits on time).
        if not self.done.acquire(timeout=_MARGIN_S / 2 if last else -1):
            return
        try:
            if self.finished:
                return
            self.finished = True
            self._write(reason, detail, last=last)
        finally:
            self.done.release()

    def _write(self, reason: str, detail: str, *, last: bool) -> None:
        try:
            from durability.gaps import spool

            record = spool.gap_record(run_id=self.run_id, request_id=self.request_id,
                                      reason=reason, detail=detail, **self.fields)
            try:
                spool.append_anywhere(paths.spool_dirs(self.env), record, last=last)
            except spool.SpoolUnavailable:
                _store_gap(self.env, record)  # every spool folder failed: the last resort
        except Exception as exc:
            sys.stderr.write(f"durability: could not record gap {reason}: {exc}\n")
            return
        sys.stderr.write(f"durability: snapshot not taken ({reason}): {detail[:200]}\n")

    def succeed(self) -> None:
        with self.done:
            self.finished = True


def _store_gap(env: Mapping[str, str], record: dict[str, Any]) -> None:
    """Record a gap straight into the store (no spool folder took it)."""
    from durability.config import database_location
    from durability.gaps.ingest import ingest_records
    from durability.store import Store

    with Store(database_location(env)) as store:
        ingest_records(store, [record])


def _random_id() -> str:
    """A random version-4 UUID in its usual text form, as ``str(uuid.uuid4())``."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def main(stdin: BinaryIO | None = None, env: Mapping[str, str] | None = None) -> int:
    """Entry point: always returns 0."""
    env = os.environ if env is None else env
    hook = _Hook(env)
    budget_s = hook.budget_s
    hook.disarms.append(_arm_alarm(hook))
    try:
        run_hook(hook, stdin or sys.stdin.buffer, time.monotonic() + budget_s - _MARGIN_S)
    except Exception as exc:  # contract 6: never a traceback, never a failure
        hook.gap("internal-error", f"{type(exc).__name__}: {exc}")
    finally:
        for disarm in hook.disarms:
            disarm()
    return 0


def _arm_alarm(hook: _Hook) -> Callable[[], None]:
    """The watchdog of the fast path: a SIGALRM timer rather than a thread
    (``threading`` costs ~4 ms per tool call).  Every wait on that path (stdin,
    the socket) is interruptible, so the handler runs on time.  Off the main
    thread, or without SIGALRM, a watchdog thread does the same."""
    delay = max(hook.budget_s - _MARGIN_S, 0.05)
    try:
        # The C module: ``signal`` imports enum, functools and collections
        # (~3-5 ms of every hook process, pre-call ones included: issue 25).
        import _signal as signal  # type: ignore[import-not-found]

        # Past a file size limit a write fails with EFBIG (and the spool tries
        # its next folder) instead of the signal killing the hook mid-gap.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        signal.signal(signal.SIGALRM, lambda signum, frame: _on_alarm(hook))
        signal.setitimer(signal.ITIMER_REAL, delay)
    except (ValueError, OSError, AttributeError):
        return _arm_thread(hook, delay)

    def disarm() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)

    return disarm


def _arm_thread(hook: _Hook, delay: float) -> Callable[[], None]:
    """A watchdog thread: it fires even while this thread is inside C code
    that does not return to Python (SQLite's busy wait, pygit2), so the
    in-process fallback arms one too."""
    import threading

    timer = threading.Timer(delay, _give_up, args=(hook, hook.budget_s))
    timer.daemon = True
    timer.start()
    return timer.cancel


def _on_alarm(hook: _Hook) -> None:
    # The handler runs on the main thread: if that thread is writing a gap,
    # let it finish (briefly), since it holds the lock _give_up would wait on.
    if hook.done.locked() and hook.alarms < 2:
        import _signal as signal

        hook.alarms += 1
        signal.setitimer(signal.ITIMER_REAL, _MARGIN_S / 3)
        return
    _give_up(hook, hook.budget_s)


def _give_up(hook: _Hook, budget_s: float) -> None:
    """The watchdog: past the budget, file a timeout gap, stop jj, exit 0."""
    try:
        _import_spool()
        # Record first, keeping the spool locked until exit: the main thread,
        # whose jj is killed next, must not file a second gap for this request.
        if hook.quiet:
            hook.succeed()
        else:
            hook.gap("timeout", f"hook budget of {budget_s:g}s ran out", last=True)
        # Not imported means no jj was started; importing it here could race
        # the main thread's imports (see _import_spool).
        kill_all = getattr(sys.modules.get("durability.ground.proc"), "kill_all", None)
        if kill_all is not None:
            kill_all()
        _autostart_once(hook)
    except Exception as exc:  # the exit below must happen whatever failed
        sys.stderr.write(f"durability: hook watchdog: {type(exc).__name__}: {exc}\n")
    finally:
        sys.stderr.flush()
        os._exit(0)


def _import_spool() -> None:
    """Import the spool module from the watchdog thread.

    The main thread may be importing modules the spool needs at this very
    moment (its own gap, the in-process fallback); two threads importing
    each other's dependencies can be handed a partially initialised module.
    A failed import is undone, so trying again once the other is done works.
    """
    for _ in range(10):
        try:
            from durability.gaps import spool  # noqa: F401
        except (ImportError, AttributeError):
            time.sleep(0.02)
        else:
            return


def _budget_ms(env: Mapping[str, str]) -> int:
    """The budget, read as ``Settings`` reads it; an invalid value is filed as
    an invalid-value gap by ``run_hook``, which needs a budget meanwhile."""
    try:
        return int(envms.read_ms(env, "DURABILITY_HOOK_TIMEOUT_MS"))
    except envms.InvalidSetting:
        return DEFAULT_BUDGET_MS


def run_hook(hook: _Hook, stdin: BinaryIO, deadline: float) -> None:
    raw = stdin.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        return _unreadable(hook, raw, f"hook input exceeds {MAX_INPUT_BYTES} bytes")
    try:
        payload = fastjson.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return _unreadable(hook, raw, "hook input is not valid JSON")
    except RecursionError:  # nested deeper than the parser goes
        return _unreadable(hook, raw, "hook input is nested too deeply")
    if not isinstance(payload, dict):
        return hook.gap("bad-hook-input", "hook input is not a JSON object")
    event_kind = calls.kind(payload.get("hook_event_name"))
    # A pre-call hook files no gap of its own: the same call's post-call
    # hook meets the same problem and files it, once (the watchdog too).  A
    # refused call's hook neither: nothing ran.
    hook.quiet = quiet = event_kind in ("pre", "denied")
    problem = _identify(hook, payload)
    if problem:
        return hook.succeed() if quiet else hook.gap("bad-hook-input", problem)
    # Checked before any capture, service or not, so every path agrees: a
    # setting the user wrote and we cannot honour is one invalid-value gap
    # naming it, not a capture with a guessed value (a default budget could
    # outlast the harness's own hook timeout and leave no record at all).
    invalid = envms.first_invalid(hook.env)
    if invalid:
        return hook.succeed() if quiet else hook.gap("invalid-value", invalid)
    reason, detail = _locate_worktree(hook, payload)
    if reason:
        return hook.succeed() if quiet else hook.gap(reason, detail)
    _announced_calls(hook, payload, event_kind)
    if event_kind in ("pre", "denied"):
        return hook.succeed()  # announced, or refused: nothing ran to capture
    hook.fields["call"] = call_fields(payload) if event_kind == "post" else None
    _request(hook, deadline)


def call_fields(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The tool call a post-call payload reports, for its boundary (issue
    24): the event, the tool, the harness's transcript and its size now
    (one stat); None when the payload names no tool."""
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        return None
    event = payload.get("hook_event_name")
    found: dict[str, Any] = {"event": event[:64] if isinstance(event, str) else "post",
                             "tool_name": ids.printable(tool)[:200]}
    path = payload.get("transcript_path")
    if ids.is_path(path) and len(path) <= 4096:  # type: ignore[arg-type]
        found["transcript_path"] = path
        try:
            found["transcript_bytes"] = os.stat(path).st_size  # type: ignore[arg-type]
        except (OSError, ValueError):
            pass
    return found


def _announced_calls(hook: _Hook, payload: dict[str, Any], event_kind: str) -> None:
    """Record a pre-call hook's call, or a post-call hook's end of one; file
    a ``call-unfinished`` gap for each call this hook shows was never
    finished (``gaps.calls``), and name those in the label of the capture
    that follows, which holds what they wrote.  Fails open: a calls file that
    cannot be used costs these gaps, never the capture."""
    f = hook.fields
    call = None if event_kind == "end" else _announced_key(hook, payload)
    if call is None and event_kind != "end":
        return
    event = payload.get("hook_event_name")
    folder = paths.spool_dir_str(hook.env)
    lane = calls.Lane(calls.calls_file(folder, hook.run_id),
                      calls.lane_key(f["node_id"], f["iteration"], f["attempt"], f["agent"]))
    try:
        if event_kind == "pre":
            paths.ensure_private_dir(folder)  # type: ignore[arg-type]
        if not lane.open(create=event_kind == "pre"):
            return  # no call was ever announced here (an install without the event)
        for entry in lane.unfinished(call, event_kind, event):
            if _file_unfinished(hook, entry):
                lane.add(k="gap", call=entry["call"], lane=entry["lane"])
        if event_kind == "pre":
            tool = payload.get("tool_name")
            tool = ids.printable(tool)[:100] if isinstance(tool, str) and tool else "tool"
            tool_input = payload.get("tool_input")
            detail = _input_summary(tool_input, f["worktree"]) \
                if isinstance(tool_input, dict) else None
            lane.add(k="pre", call=call, run=hook.run_id, tid=f["tool_use_id"], tool=tool,
                     summary=calls.summary(detail), ts=calls.now_ms(),
                     proc=calls.harness_process(), worktree=f["worktree"])
        elif event_kind == "denied":
            if call is not None:
                lane.add(k="post", call=call)  # over, and nothing ran
        else:
            if call is not None:
                lane.add(k="post", call=call)
            told = lane.untold(f["worktree"])
            if told:
                notes = ", ".join(f"{e['tool']} {e['summary']}".strip() for e in told)
                f["label"] = (f"{f.get('label') or ''} [after unfinished: {notes}]".strip())[:1000]
                for entry in told:
                    lane.add(k="told", call=entry["call"], lane=entry["lane"])
        lane.save()
    except (OSError, InsecurePath) as exc:
        sys.stderr.write(f"durability: announced calls not kept: {exc}\n")
    finally:
        lane.close()


def _announced_key(hook: _Hook, payload: dict[str, Any]) -> str | None:
    """What ties a call's pre-call hook to its post-call hook: the tool call
    id; for Gemini CLI, which sends none, the tool and its input."""
    if hook.fields.get("tool_use_id"):
        return str(hook.fields["tool_use_id"])
    tool = payload.get("tool_name")
    if harness(payload) != "gemini" or not isinstance(tool, str) or not tool:
        return None
    text = fastjson.dumps([tool, payload.get("tool_input")])
    return "gemini:" + ids.sha256_hex(text.encode("utf-8", "surrogatepass"))[:16]


def _file_unfinished(hook: _Hook, entry: dict[str, Any]) -> bool:
    """One ``call-unfinished`` gap for an announced call (the same gap when
    two hooks decide it: its request id is the call's); whether it was filed
    (if not, a later hook tries again)."""
    try:
        _write_unfinished(hook, entry)
    except Exception as exc:  # never at the cost of this hook's own capture
        sys.stderr.write(f"durability: could not record gap call-unfinished: {exc}\n")
        return False
    return True


def _write_unfinished(hook: _Hook, entry: dict[str, Any]) -> None:
    from durability.gaps import spool

    record = calls.unfinished_gap(entry)
    try:
        spool.append_anywhere(paths.spool_dirs(hook.env), record)
    except spool.SpoolUnavailable:
        _store_gap(hook.env, record)
    sys.stderr.write(f"durability: call-unfinished: {str(record['detail'])[:200]}\n")


def _unreadable(hook: _Hook, raw: bytes, detail: str) -> None:
    """A payload that cannot be read: one bad-hook-input gap, filed by the
    post-call hook (a pre-call hook's payload says which it is, near its start)."""
    import re  # only for unreadable input: re costs ~6 ms

    found = re.search(_EVENT_RE, raw[:65536])  # the first: the payload's own
    if found and calls.kind(found.group(1).decode("ascii", "replace")) in ("pre", "denied"):
        hook.quiet = True
        return hook.succeed()
    _guess_run(hook, raw)
    hook.gap("bad-hook-input", detail)


def _guess_run(hook: _Hook, raw: bytes) -> None:
    """Attribute a gap for unreadable input to its session when possible."""
    if hook.env.get("DURABILITY_RUN_ID"):
        return
    import re  # only for unreadable input: re costs ~6 ms

    found = re.search(_SESSION_RE, raw[:65536])
    if found and ids.is_valid_id(found.group(1).decode("ascii", "replace")):
        hook.run_id = found.group(1).decode("ascii")


def _identify(hook: _Hook, payload: dict[str, Any]) -> str | None:
    """Fill in run, node, iteration, attempt; a message when they are bad."""
    env = hook.env
    run_id = env.get("DURABILITY_RUN_ID") or payload.get("session_id")
    if not ids.is_valid_id(run_id):
        hook.run_id = ids.INVALID_RUN
        return f"unusable run id {str(run_id)[:80]!r} (session_id or DURABILITY_RUN_ID)"
    assert isinstance(run_id, str)
    hook.run_id = run_id
    node_id = env.get("DURABILITY_NODE_ID") or "session"
    try:
        ids.validate_id(node_id, "node id")
        iteration = ids.validate_count(env.get("DURABILITY_ITERATION", "0"), "iteration", 0)
        attempt = ids.validate_count(env.get("DURABILITY_ATTEMPT", "1"), "attempt", 1)
    except ValueError as exc:
        return str(exc)
    tool_use_id = payload.get("tool_use_id")
    tool_use_id = tool_use_id[:200] if isinstance(tool_use_id, str) and tool_use_id else None
    hook.fields.update(node_id=node_id, iteration=iteration, attempt=attempt,
                       tool_use_id=tool_use_id)
    call_key = tool_use_id or _call_key(payload)
    if call_key:
        # A hook installed twice (plugin and settings) sends the same request
        # twice; a deterministic id makes the second one a replay.
        hook.request_id = ids.call_request_id(run_id, node_id, iteration, attempt, call_key,
                                              payload.get("hook_event_name"))
    return None


def harness(payload: dict[str, Any]) -> str:
    """Which agent harness sent a post-tool payload, from its shape.

    Gemini CLI names its event ``AfterTool`` and sends no tool call id; OpenAI
    Codex CLI's ``PostToolUse`` carries a ``turn_id``, which Claude Code's
    does not.  All three share ``session_id``, ``cwd``, ``tool_name`` and
    ``tool_input``, which is all a snapshot needs.
    """
    if payload.get("hook_event_name") in ("AfterTool", "BeforeTool", "AfterAgent"):
        return "gemini"
    if "turn_id" in payload:
        return "codex"
    return "claude"


def _call_key(payload: dict[str, Any]) -> str | None:
    """A stand-in call id for a payload without one: Codex's ``Stop`` (the
    turn it ends), Gemini CLI's calls (the payload's own timestamp and tool
    call); each identical when one event is reported twice."""
    turn = payload.get("turn_id")
    if payload.get("hook_event_name") == "Stop" and isinstance(turn, str) and turn:
        return f"turn:{turn[:200]}"
    stamp = payload.get("timestamp")
    if harness(payload) != "gemini" or not isinstance(stamp, str) or not stamp:
        return None
    # fastjson, not json (whose import costs ~6 ms of every Gemini call): the
    # same call reported twice is the same payload text, so the same key order.
    call = fastjson.dumps([payload.get("tool_name"), payload.get("tool_input")])
    return f"gemini:{stamp[:64]}:{ids.sha256_hex(call.encode())[:16]}"


def _locate_worktree(hook: _Hook, payload: dict[str, Any]) -> tuple[str | None, str]:
    where = hook.env.get("DURABILITY_WORKTREE") or payload.get("cwd")
    if not ids.is_path(where):
        return "bad-hook-input", f"cwd {str(where)[:200]!r} is not an absolute path"
    assert isinstance(where, str)
    hook.fields["worktree"] = where
    if not os.path.isdir(where):
        return "worktree-missing", f"{where} does not exist"
    try:
        forced = ids.backend_choice(hook.env)
    except ValueError as exc:
        return "invalid-backend", str(exc)
    found = ids.find_root_str(where, forced)
    if found is None:
        if forced == "jj":
            return "not-a-jj-repo", f"{where} is not inside a jj working copy"
        return "not-a-repo", f"{where} is not inside a jj working copy or a git working tree"
    root = found[0]
    if not hook.env.get("DURABILITY_WORKTREE"):
        root = _nested_root(payload, root, forced) or root
    hook.fields["worktree"] = root
    hook.fields["label"] = tool_label(payload, root) or _event_label(payload)
    hook.fields["agent"] = agent_identity(payload)
    return None, ""


def _nested_root(payload: dict[str, Any], root: str, forced: str | None) -> str | None:
    """The repository inside ``root`` that holds the file a file tool names
    (a vendored repository, an agent's ``git clone``, a submodule), else None.
    ``root`` records such a repository as a gitlink to its HEAD (jj leaves it
    out), so an edit in it would be in no checkpoint of ``root``.  Only a
    repository inside ``root``: a file elsewhere never moves the capture to
    another project, or to a home folder that happens to be a repository."""
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    # The keys that name the file a tool wrote (Write, Edit, MultiEdit,
    # NotebookEdit; Gemini's write_file and replace), not a folder searched.
    for key in ("file_path", "notebook_path"):
        value = tool_input.get(key)
        if isinstance(value, str) and os.path.isabs(value):
            found = ids.find_root_str(os.path.dirname(value), forced)
            inner = found[0] if found is not None else None
            return inner if inner is not None and inner.startswith(root + os.sep) else None
    return None


def nested_worktree(payload: dict[str, Any], cwd: str, env: Mapping[str, str]) -> str | None:
    """``_nested_root`` from a cwd (the Agent SDK's hook, which has no root
    yet); None when the cwd is in no repository or the backend is unusable."""
    try:
        forced = ids.backend_choice(env)
    except ValueError:
        return None
    found = ids.find_root_str(cwd, forced)
    return _nested_root(payload, found[0], forced) if found is not None else None


def agent_identity(payload: dict[str, Any]) -> dict[str, str]:
    """Who made the call, as far as the payload says: the harness, the
    ``agent_id`` / ``agent_type`` Claude Code adds for a sub-agent's calls,
    and the session (``session_id``, which every harness sends: an engine
    run's checkpoint names the agent session it came from)
    (ids from outside: kept only when short, printable text)."""
    found = {"harness": harness(payload)}
    for key in ("agent_id", "agent_type", "session_id"):
        value = payload.get(key)
        if isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable():
            found[key] = value
    return found


def tool_label(payload: dict[str, Any], root: str) -> str | None:
    """The checkpoint label of a post-tool payload: the tool and what it
    touched (the file it names, relative to ``root``; the files a patch
    touches; the command a shell ran, shortened, control characters
    escaped); None when the payload names no tool."""
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        return None
    tool_input = payload.get("tool_input")
    detail = _input_summary(tool_input, root) if isinstance(tool_input, dict) else None
    return (f"{tool} {detail}" if detail else tool)[:1000]


def _event_label(payload: dict[str, Any]) -> str | None:
    """The label of a payload that names no tool: Codex's ``Stop``, which
    ends a turn (an ``apply_patch`` Codex ran from a shell command fires no
    post-tool hook, and its edit is first seen here)."""
    return "turn end" if payload.get("hook_event_name") == "Stop" else None


def _input_summary(tool_input: dict[str, Any], root: str) -> str | None:
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return _relative(value, root)
    patched = _patched_files(tool_input)
    if patched:
        return " ".join(_relative(p, root) for p in patched)
    command = tool_input.get("command")
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        command = " ".join(command)
    if isinstance(command, str) and command.strip():
        return _short(command)
    return None


def _patched_files(tool_input: dict[str, Any]) -> list[str]:
    """The files a Codex ``apply_patch`` touches, from its patch headers
    (``*** Add File: p``, ``*** Update File: p``, ``*** Delete File: p``,
    ``*** Move to: p``), wherever the patch text sits in the input."""
    texts = [v for v in tool_input.values() if isinstance(v, str)]
    for v in tool_input.values():
        if isinstance(v, list):
            texts += [x for x in v if isinstance(x, str)]
    files: list[str] = []
    for text in texts:
        if "*** Begin Patch" not in text:
            continue
        for line in text.splitlines():
            for head in _PATCH_HEADS:
                if line.startswith(head) and line[len(head):].strip():
                    name = line[len(head):].strip()
                    if name not in files:
                        files.append(name)
    return files


def _relative(value: str, root: str) -> str:
    try:
        if os.path.isabs(value):
            # The root is a real path; the payload's may go through a
            # symlink (the cwd as the user reached it).
            rel = os.path.relpath(value, root)
            if rel.startswith(".."):
                rel = os.path.relpath(os.path.realpath(value), root)
            return rel
    except ValueError:
        pass
    return value


def _short(command: str) -> str:
    """A shell command for a label: one line, control characters escaped,
    at most ``_COMMAND_CHARS`` characters."""
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in command.strip())
    return flat if len(flat) <= _COMMAND_CHARS else flat[:_COMMAND_CHARS - 1] + "…"


def _request(hook: _Hook, deadline: float) -> None:
    """Ask the service, for a bounded part of the budget; past it (stopped,
    flooded, slow), capture in-process with the rest.

    The request carries the moment this hook stops waiting (``deadline_ms``):
    the service begins no capture for it after then, and the hook's own
    capture, under the worktree lock, first looks for a record the service
    made in time; with the store's refusals, each call is recorded once and
    never under a later state (docs/RELIABILITY.md).
    """
    f = hook.fields
    answer_s = _answer_s(hook.env, deadline)
    request = client.capture_request(
        request_id=hook.request_id, run_id=hook.run_id, node_id=f["node_id"],
        iteration=f["iteration"], attempt=f["attempt"], worktree=f["worktree"],
        source="hook", tool_use_id=f["tool_use_id"], label=f.get("label"),
        timeout_ms=max(100, int(answer_s * 1000)),
        deadline_ms=time.time_ns() // 1_000_000 + int(answer_s * 1000),
        agent=f.get("agent"), call=f.get("call"))
    connect_s = envms.read_ms(hook.env, "DURABILITY_SERVICE_CONNECT_MS") / 1000
    try:
        response = client.call(paths.socket_path_str(hook.env), request, timeout_s=answer_s,
                               connect_timeout_s=connect_s)
    except (ServiceTimeout, ServiceBusy):  # there, but stopped or flooded: capture here
        return _fallback(hook, deadline)
    except ServiceUnreachable:  # none, or it went away (ConnectionLost): capture here
        # and start one for the calls after this, once this capture is done:
        # its start-up would take the CPU this capture and its git need
        hook.autostart = True
        return _fallback(hook, deadline)
    if response.get("ok"):
        return hook.succeed()
    if (response.get("error") or {}).get("code") == "expired":
        return _fallback(hook, deadline)  # answered just too late: ours now
    if response.get("gap_recorded"):
        return hook.succeed()  # the service saw the failure and filed it
    error = response.get("error") or {}
    hook.gap(str(error.get("code") or "internal-error"), str(error.get("message")))


def _autostart(env: Mapping[str, str], worktree: str | None = None) -> None:
    """Start a service for the calls after this one (``hook.autostart``),
    warming ``worktree`` (this call's)."""
    from durability.hook import autostart

    if autostart.enabled(env):
        autostart.start_service(env, warm=worktree)


def _answer_s(env: Mapping[str, str], deadline: float) -> float:
    """How long to wait for the service: ``DURABILITY_SERVICE_ANSWER_MS``,
    but never more than half of what is left, so the in-process capture
    after it has at least as long as the wait before it."""
    left = deadline - time.monotonic()
    configured = envms.read_ms(env, "DURABILITY_SERVICE_ANSWER_MS") / 1000
    return max(min(configured, left / 2), 0.1)


def _fallback(hook: _Hook, deadline: float) -> None:
    """No service: capture here, under the same per-worktree lock; then,
    when none answered, start one for the calls after this one."""
    _preload_database_driver(hook.env)
    prescan = _prescan(hook)
    try:
        _capture_here(hook, deadline)
    finally:
        if prescan is not None:
            prescan.discard_all()
        _autostart_once(hook)


def _autostart_once(hook: _Hook) -> None:
    """``_autostart`` if this call is to start a service and has not yet
    (after its capture, or from the watchdog when the budget ran out)."""
    # Bounded: the alarm's handler may run on a thread already holding it.
    if not hook.autostarting.acquire(timeout=_MARGIN_S / 2):
        return
    try:
        if hook.autostart:
            hook.autostart = False
            worktree = hook.fields.get("worktree")
            _autostart(hook.env, worktree if isinstance(worktree, str) else None)
    finally:
        hook.autostarting.release()


def _prescan(hook: _Hook) -> Any:
    """A first git capture: start ``git status`` on the new private index
    now, so that it runs while the capture's imports do (``git_prescan``,
    decision 0055); the module, or None when there is nothing to start."""
    try:
        found = ids.find_root_str(hook.fields["worktree"], ids.backend_choice(hook.env))
    except ValueError:
        return None
    if found is None or found != (hook.fields["worktree"], "git"):
        return None
    from durability.ground import git_prescan

    path = git_prescan.start(found[0], hook.env)
    if path is not None:
        # pygit2 now (the capture imports it anyway), and the copy read on
        # a thread while the rest of the capture path is imported.
        from durability.backends.git_repo import read_ahead

        read_ahead(path)
    return git_prescan


def _capture_here(hook: _Hook, deadline: float) -> None:
    from pathlib import Path

    from durability.capture.inprocess import capture_once
    from durability.config import Settings
    from durability.store import AttemptKey

    f = hook.fields
    hook.disarms.append(_arm_thread(hook, max(deadline - time.monotonic(), 0.05)))
    settings = Settings.from_env(hook.env)
    remaining = deadline - time.monotonic()
    # jj's timeout is measured from when jj starts (the capturer's deadline),
    # not from here: the lock and the store's opening come first.
    outcome = capture_once(
        settings, key=AttemptKey(hook.run_id, f["node_id"], f["iteration"], f["attempt"]),
        worktree=Path(f["worktree"]), source="hook", request_id=hook.request_id,
        tool_use_id=f["tool_use_id"], label=f.get("label"), agent=f.get("agent"),
        lock_timeout_s=max(remaining - 0.1, 0.05), env=hook.env, deadline=deadline - _RESERVE_S,
        call=_call_info(f.get("call")),
    )
    if outcome.ok or outcome.gap_recorded:
        return hook.succeed()
    hook.gap(outcome.error_code or "internal-error", outcome.error_message or "")


def _call_info(call: dict[str, Any] | None) -> Any:
    """``call_fields``'s answer as the capture takes it (off the fast path)."""
    from durability.store.boundaries import CallInfo

    return None if call is None else CallInfo(**call)


def _preload_database_driver(env: Mapping[str, str]) -> None:
    """On PostgreSQL, import psycopg on a thread of its own as the fallback
    begins, so that its import (0.2-1.1 s) overlaps the fallback's waits (the
    worktree lock, held by a stopped or slow service) instead of following
    them into the budget's last tenth: a lock timeout's gap then reaches the
    store before the hook exits, not only the spool.  Without a wait it gains
    nothing (both threads need the GIL) and costs nothing; the fast path never
    gets here.  psycopg imports none of this package's modules, so the two
    threads cannot hand each other a half-imported module; the main thread's
    own ``import psycopg`` waits for this one to finish.
    """
    url = env.get("DURABILITY_DATABASE_URL", "").strip()
    if not url.startswith(("postgresql://", "postgres://")):
        return
    import threading

    def load() -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            pass  # the store's opening says so, as a store-unavailable gap

    threading.Thread(target=load, name="durability-psycopg", daemon=True).start()
