"""Agent tasks: a workflow task that runs an agent CLI headless, durably
(docs/how-to/agents.md, decision record 0045).

::

    wf = Workflow("review")

    @wf.agent(output=Review, harness=("claude", "codex"), max_cost=2.0)
    def review(inputs):            # the prompt, from the dependencies' outputs
        return f"Review the change planned in {inputs['plan'].summary}"

    wf.agent("fix", prompt="Fix the failing test", deps=["review"])

One attempt of an agent task runs the chain's first usable harness through
its adapter (``durability.agents``) in the task's worktree
(``agent_process.AgentProcess``: its own process group, a parent-death
watchdog), folds every usage event into the run's budget as it arrives
(killing the group the moment a limit is passed), fails over to the next
harness on a quota signal without spending a retry, parks the run
``waiting-quota`` when every harness is blocked, and validates the final
answer (correction turns in the same session, then ``OUTPUT_INVALID``).
An interrupted attempt's session is continued on resume, on the tree of
its last completed tool call (``agent_rows.agent_target``).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from durability.agents.protocol import AgentRequest, Event, Final, Harness, QuotaSignal, Usage
from durability.ground.store_errors import (
    BudgetExceeded,
    ClaimLost,
    EngineError,
    InvalidValue,
    QuotaExhausted,
)
from durability.runs import agent_rows, budget
from durability.runs.agent_process import AgentProcess
from durability.runs.budget import Limits
from durability.runs.context import TaskContext

if TYPE_CHECKING:
    from durability.runs.agent_rows import Prior
    from durability.runs.fence import Claim
    from durability.runs.run_rows import Runs

__all__ = [
    "CONTINUE_PROMPT", "AgentConfig", "AgentEnv", "AgentFailed", "AgentSpec", "OutputInvalid",
    "PriceFn", "agent_workflow", "default_hook_command", "register_harness", "resolve_harness",
    "spec_json",
]

log = logging.getLogger(__name__)

#: What a continued session is told (after a crash, a lost claim, a quota).
CONTINUE_PROMPT = ("You were interrupted. Continue the task where you left off: the working "
                   "tree is as it was after your last completed tool call. Finish the task "
                   "and give your final answer as asked.")
#: Appended to the task's prompt when its session could not be continued.
FRESH_NOTE = ("\n\n(An earlier attempt at this task was interrupted and its conversation "
              "is lost; the working tree holds its work up to its last completed tool call. "
              "Continue from the tree as it is.)")
CORRECTION_PROMPT = ("Your final answer does not satisfy the required output schema: {error}. "
                     "Answer again with only a JSON value that satisfies the schema.")

#: A usage's cost in US dollars (None: unknown).
PriceFn = Callable[[Usage], "float | None"]
HarnessFactory = Callable[[], Harness]
_REGISTRY: dict[str, HarnessFactory] = {}


class AgentFailed(EngineError):
    """The agent CLI ended without an answer (its error, its exit status)."""

    code = "AGENT_FAILED"


class OutputInvalid(EngineError):
    """The answer did not validate (after the correction turns), or ``verify`` refused it."""

    code = "OUTPUT_INVALID"


class AgentUnavailable(EngineError):
    code = "AGENT_UNAVAILABLE"


def register_harness(name: str, factory: HarnessFactory) -> None:
    """Use ``factory`` for the harness ``name`` (tests' scripted harnesses;
    a harness of your own)."""
    _REGISTRY[name] = factory


def resolve_harness(name: str) -> Harness:
    """A fresh adapter for ``name``: a registered factory, else the module
    ``durability.agents.<name>`` (its ``harness()``, ``HARNESS`` or
    ``Harness`` class)."""
    if name in _REGISTRY:
        return _REGISTRY[name]()
    try:
        from durability.agents import registry
    except ImportError:  # pragma: no cover - an install without the adapters' registry
        registry = None  # type: ignore[assignment]
    if registry is not None and name in registry.HARNESSES:
        return registry.harness(name)
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,30}", name) or name in ("protocol", "prices"):
        raise AgentUnavailable(f"no adapter for harness {name[:40]!r}")
    try:
        module = importlib.import_module(f"durability.agents.{name}")
    except ModuleNotFoundError:
        raise AgentUnavailable(f"no adapter for harness {name!r} (durability.agents."
                               f"{name})") from None
    for attr in ("harness", "make_harness"):
        made = getattr(module, attr, None)
        if callable(made):
            return made()  # type: ignore[no-any-return]
    found = getattr(module, "HARNESS", None)
    if found is not None:
        return found  # type: ignore[no-any-return]
    for value in vars(module).values():
        if (isinstance(value, type) and getattr(value, "name", None) == name
                and callable(getattr(value, "parse", None))):
            return value()  # type: ignore[no-any-return]
    raise AgentUnavailable(f"durability.agents.{name} defines no harness")


def _table_price(table: Mapping[str, Mapping[str, float]]) -> PriceFn:
    """A price function from ``{model: {input, output, cache_read, cache_write}}``
    in US dollars per million tokens (``*``: any model)."""

    def price(usage: Usage) -> float | None:
        row = table.get(usage.model or "") or table.get("*")
        if row is None:
            return None
        return (usage.input_tokens * row.get("input", 0.0)
                + usage.output_tokens * row.get("output", 0.0)
                + usage.cache_read_tokens * row.get("cache_read", 0.0)
                + usage.cache_write_tokens * row.get("cache_write", 0.0)) / 1_000_000

    return price


def default_price(usage: Usage) -> float | None:
    """The harness's own figure for the response, else the price table of
    ``durability.agents.prices`` (when there is one), else None."""
    if usage.cost_usd is not None:
        return usage.cost_usd
    try:
        prices = importlib.import_module("durability.agents.prices")
    except ModuleNotFoundError:
        return None
    for attr in ("cost_usd", "cost", "price"):
        fn = getattr(prices, attr, None)
        if callable(fn):
            try:
                value = fn(usage)
            except (KeyError, LookupError, TypeError, ValueError):
                return None
            return None if value is None else float(value)
    return None


def default_hook_command(executable: str = sys.executable) -> tuple[str, ...]:
    """The hook every tool call of an agent runs: this interpreter's own
    ``durability`` command when it sits beside it and starts it (its shebang
    names this interpreter), else this interpreter told to run the entry
    point.  Never ``-m durability``: runpy costs ~5 ms of each of a call's two
    hook processes (issue 25), and ``-m`` puts the hook's working folder, the
    agent's worktree, first on ``sys.path``, so a ``durability`` folder the
    agent wrote there would be imported; ``-P`` keeps it off."""
    script = Path(executable).with_name("durability")
    try:
        with open(script, "rb") as f:
            first = f.readline(4096)
    except OSError:
        first = b""
    if os.access(script, os.X_OK) and first.startswith(b"#!"):
        interpreter = first[2:].strip().split(b" ")[0].decode("utf-8", "replace")
        # The same folder (this environment, not another on the same base
        # interpreter) and the same interpreter (python, python3...).
        if (os.path.dirname(os.path.abspath(interpreter)) == str(script.parent.absolute())
                and os.path.realpath(interpreter) == os.path.realpath(executable)):
            return (str(script), "snapshot-hook")
    return (executable, "-P", "-c", "from durability.__main__ import main; main()",
            "snapshot-hook")


@dataclass(frozen=True)
class AgentConfig:
    """How this engine process runs agents; resolved at the entry point."""

    #: The hook every tool call runs (argv; the attempt's identity in its env).
    hook_command: tuple[str, ...] = field(default_factory=lambda: default_hook_command())
    #: harness name -> the executable to run (default: the adapter's, on PATH).
    executables: Mapping[str, str] = field(default_factory=dict)
    #: The cost of a usage; None: ``default_price``.
    price: PriceFn | None = None
    #: Where attempts' private folders go (default: the state folder's ``agents``).
    private_root: Path | None = None
    poll_s: float = 0.05
    #: TERM to KILL, when the watchdog kills an orphaned agent.
    grace_s: float = 2.0


@dataclass(frozen=True)
class AgentEnv:
    """What the runner hands an agent attempt (``TaskContext._agent``)."""

    runs: Runs
    claim: Claim
    config: AgentConfig
    #: The interrupted attempt's session to continue (None: start fresh).
    prior: Prior | None = None


@dataclass(frozen=True)
class AgentSpec:
    """What an agent task runs."""

    prompt: str | Callable[[Mapping[str, Any]], str]
    harness: tuple[str, ...] = ("claude",)
    model: str | None = None
    #: a pydantic model, or a JSON schema (a dict), or None (the last message's text)
    output: type[BaseModel] | dict[str, Any] | None = None
    limits: Limits = field(default_factory=Limits)
    #: correction turns an invalid answer gets, in the same session
    corrections: int = 2
    #: ``verify(output, worktree)``: False, a string (the reason) or an
    #: exception refuses the answer (OUTPUT_INVALID); anything else accepts.
    verify: Callable[[Any, Path], object] | None = None
    #: ``{model: {input, output, cache_read, cache_write}}`` in USD per
    #: million tokens, over the configured price function.
    prices: Mapping[str, Mapping[str, float]] | None = None

    def __post_init__(self) -> None:
        if not self.harness:
            raise InvalidValue("an agent task needs at least one harness")
        if self.corrections < 0:
            raise InvalidValue("corrections must be >= 0")

    def prompt_for(self, inputs: Mapping[str, Any]) -> str:
        text = self.prompt(inputs) if callable(self.prompt) else self.prompt
        if not isinstance(text, str) or not text.strip():
            raise InvalidValue("an agent task's prompt must be non-empty text")
        return text

    def schema(self) -> dict[str, Any] | None:
        if self.output is None:
            return None
        if isinstance(self.output, dict):
            return self.output
        return self.output.model_json_schema()

    def __call__(self, ctx: TaskContext) -> Any:
        """The task's function: one attempt."""
        env = ctx._agent
        if not isinstance(env, AgentEnv):
            raise AgentFailed(f"{ctx.node_id}: an agent task runs under the engine only")
        return _Attempt(self, ctx, env).run()


@dataclass
class _Outcome:
    final: Final | None = None
    quota: QuotaSignal | None = None
    session_id: str | None = None


class _Invalid(Exception):
    pass


class _Attempt:
    def __init__(self, spec: AgentSpec, ctx: TaskContext, env: AgentEnv) -> None:
        self.spec, self.ctx, self.env = spec, ctx, env
        self.runs, self.claim, self.config = env.runs, env.claim, env.config
        self.key = ctx.key
        if ctx.worktree is None:
            raise AgentFailed(f"{ctx.node_id}: an agent task needs a worktree")
        self.worktree = ctx.worktree
        price = self.config.price or default_price
        self.price: PriceFn = _override(_table_price(spec.prices), price) if spec.prices \
            else price
        self.session: str | None = None
        self.invocations = 0

    # -- the chain ----------------------------------------------------------

    def run(self) -> Any:
        prompt = self.spec.prompt_for(self.ctx.inputs)
        blocked = self._blocked()
        prior = self.env.prior
        chain = list(self.spec.harness)
        if prior is not None and prior.harness in chain:  # where the session lives
            chain.remove(prior.harness)
            chain.insert(0, prior.harness)
        for name in chain:
            if name in blocked:
                continue
            harness = resolve_harness(name)
            resume = prior.session_id if prior is not None and prior.harness == name else None
            done, value, quota = self._run_harness(name, harness, prompt, resume)
            if done:
                return value
            assert quota is not None
            agent_rows.record_block(self.runs, self.claim, self.key, name, quota.reset_at_ms,
                                    quota.message)
            blocked[name] = agent_rows.Block(name, quota.reset_at_ms, quota.message,
                                             self.claim.epoch)
            rest = [n for n in chain if n not in blocked]
            if rest:
                agent_rows.note(self.runs, self.claim, self.key, "agent-failover",
                                detail={"from": name, "to": rest[0],
                                        "reset_at_ms": quota.reset_at_ms})
        known = [b.reset_at_ms for b in blocked.values() if b.reset_at_ms is not None]
        names = ", ".join(sorted(n for n in blocked if n in self.spec.harness))
        raise QuotaExhausted(f"every harness is blocked by a quota ({names})",
                             reset_at_ms=min(known) if known else None)

    def _blocked(self) -> dict[str, agent_rows.Block]:
        """The chain's harnesses still blocked: a known reset not yet passed,
        or an unknown one that no person has resumed since (a supervisor's
        claim keeps it; any other claim after the block retries)."""
        now = self.runs._clock()
        found: dict[str, agent_rows.Block] = {}
        for block in agent_rows.blocks(self.runs, self.key.run_id):
            if block.reset_at_ms is not None:
                keep = block.reset_at_ms > now
            else:
                keep = (block.claim_epoch == self.claim.epoch
                        or self.claim.owner.name.startswith("supervisor:"))
            if keep:
                found[block.harness] = block
            else:
                agent_rows.clear_block(self.runs, self.claim, self.key.run_id, block.harness)
        return found

    # -- one harness: invocations and correction turns ------------------------

    def _run_harness(self, name: str, harness: Harness, prompt: str,
                     resume: str | None) -> tuple[bool, Any, QuotaSignal | None]:
        text = CONTINUE_PROMPT if resume else prompt
        corrections = self.spec.corrections
        while True:
            out = self._invoke(name, harness, text, resume)
            if out.quota is not None:
                return False, None, out.quota
            final = out.final
            assert final is not None
            if resume is not None and final.session_lost:
                agent_rows.note(self.runs, self.claim, self.key, "agent-session-lost", detail={
                    "harness": name, "session_id": resume,
                    "reason": (final.error or "the session could not be resumed")[:500]})
                resume, text = None, prompt + FRESH_NOTE
                continue
            if not final.ok:
                raise AgentFailed(f"{name} ended without an answer: "
                                  f"{(final.error or 'no error given')[:500]}")
            session = final.session_id or out.session_id
            try:
                value = self._answer(final)
            except _Invalid as exc:
                if corrections <= 0 or session is None:
                    raise OutputInvalid(f"{self.key.node_id}: the answer does not fit the "
                                        f"output schema: {exc}") from None
                corrections -= 1
                agent_rows.note(self.runs, self.claim, self.key, "agent-correction", detail={
                    "harness": name, "session_id": session, "error": str(exc)[:500],
                    "left": corrections})
                resume, text = session, CORRECTION_PROMPT.format(error=str(exc)[:2000])
                continue
            self._verify(value)
            return True, value, None

    def _answer(self, final: Final) -> Any:
        output = self.spec.output
        if output is None:
            return final.structured if final.structured is not None else final.text
        data = final.structured if final.structured is not None else _json_in(final.text)
        if isinstance(output, dict):
            try:
                import jsonschema  # type: ignore[import-untyped]
            except ImportError:  # pragma: no cover - the dev and mcp extras bring it
                raise AgentFailed("a JSON-schema output needs the jsonschema package") from None
            try:
                jsonschema.validate(data, output)
            except jsonschema.ValidationError as exc:
                raise _Invalid(exc.message) from None
            return data
        try:
            return output.model_validate(data)
        except ValidationError as exc:
            raise _Invalid("; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: "
                                     f"{e['msg']}" for e in exc.errors()[:5])) from None

    def _verify(self, value: Any) -> None:
        if self.spec.verify is None:
            return
        try:
            verdict = self.spec.verify(value, Path(self.worktree))
        except Exception as exc:
            verdict = f"{type(exc).__name__}: {exc}"
        if verdict is False or isinstance(verdict, str):
            reason = verdict if isinstance(verdict, str) else "verify refused the answer"
            agent_rows.note(self.runs, self.claim, self.key, "agent-refused",
                            detail={"reason": reason[:500]})
            raise OutputInvalid(f"{self.key.node_id}: verify refused the answer: {reason}")

    # -- one invocation -----------------------------------------------------

    def _invoke(self, name: str, harness: Harness, prompt: str,
                resume: str | None) -> _Outcome:
        self.invocations += 1
        request = AgentRequest(
            prompt=prompt, worktree=Path(self.worktree), private_dir=self._private(name),
            hook_command=self.config.hook_command,
            hook_env={k: v for k, v in self.ctx.env.items() if k.startswith("DURABILITY_")},
            model=self.spec.model, resume_id=resume,
            session_id=None if resume else str(uuid.uuid4()),
            output_schema=self.spec.schema(), max_turns=self.spec.limits.turns)
        harness.prepare(request)
        env = harness.env(request, dict(self.ctx.env))
        executable = _executable(self.config.executables.get(name) or harness.executable, env)
        argv = harness.argv(request, executable)
        if resume is not None:
            agent_rows.note(self.runs, self.claim, self.key, "agent-resume",
                            detail={"harness": name, "session_id": resume})
        out = _Outcome(session_id=resume)
        self.session = None
        if resume is not None:  # this attempt continues it: a later resume finds it here
            self._session(name, resume, out)
        spent = _Spent()
        events: list[Event] = []
        proc = AgentProcess(argv, cwd=self.worktree, env=env, stdin=harness.stdin(request),
                            grace_s=self.config.grace_s)
        code: int | None = None
        try:
            for line in proc.lines(self.config.poll_s):
                if self.ctx.stop_requested:
                    proc.kill("stop")
                    self.ctx.check()
                if line is None:
                    continue
                try:
                    parsed = harness.parse(line)
                except Exception as exc:  # an adapter's bug must not end the attempt
                    parsed = [Event("error", text=f"unparsed line: {type(exc).__name__}: {exc}")]
                for event in parsed:
                    events.append(event)
                    self._on_event(name, event, proc, spent, out)
                    if out.quota is not None:
                        break
                if out.quota is not None:
                    proc.kill("quota")
                    break
        except BaseException:
            proc.kill("error")
            raise
        finally:
            code = proc.close()
            self._ended(name, proc, code, spent, events)
        final = harness.finish(events, code, proc.stderr_head)
        if out.quota is None and final.quota is not None:
            out.quota = final.quota
        out.final = final
        if final.session_id and final.session_id != self.session:
            self._session(name, final.session_id, out)
        self._reconcile(name, final, spent)
        return out

    def _on_event(self, name: str, event: Event, proc: AgentProcess, spent: _Spent,
                  out: _Outcome) -> None:
        if event.session_id and event.session_id != self.session:
            self._session(name, event.session_id, out)
        if event.kind == "usage" and event.usage is not None:
            cost = self.price(event.usage)
            spent.add(event.usage, cost)
            try:
                self.ctx.progress(turns=spent.turn(event), tokens=event.usage.tokens,
                                  cost=cost or 0.0)
                budget.check(self.spec.limits, self.runs.usage(self.key.run_id))
            except BudgetExceeded:
                proc.kill("budget")  # within the event that crossed the limit
                raise
        elif event.kind == "quota" and event.quota is not None:
            out.quota = event.quota
        elif (event.kind == "tool_result" and event.tool is not None and self.session
              and event.tool.id):
            agent_rows.complete_call(self.runs, self.claim, self.key, self.session,
                                     event.tool.id, event.tool.name)

    def _session(self, name: str, session_id: str, out: _Outcome) -> None:
        self.session = out.session_id = session_id
        agent_rows.record_session(self.runs, self.claim, self.key, name, session_id)

    def _ended(self, name: str, proc: AgentProcess, code: int, spent: _Spent,
               events: list[Event]) -> None:
        """The invocation's log entry: exit, spending, stderr's head, stdout's tail."""
        detail = {"harness": name, "session_id": self.session, "exit": code,
                  "killed": proc.killed, "events": len(events), **spent.as_dict(),
                  "stderr_head": proc.stderr_head[:4000],
                  "stdout_tail": [ln[:500] for ln in list(proc.tail)[-8:]]}
        try:
            agent_rows.note(self.runs, self.claim, self.key, "agent-ended", detail=detail)
        except ClaimLost:
            log.debug("run %s: not ours any more: nothing logged", self.key.run_id)

    def _reconcile(self, name: str, final: Final, spent: _Spent) -> None:
        """The harness's own cost figure against ours; a higher one is counted
        (the difference), so the budget never under-counts."""
        reported = final.reported_cost_usd
        detail = {"harness": name, "estimated_usd": round(spent.cost, 6),
                  "reported_usd": reported, "unpriced": spent.unpriced,
                  "turns": final.num_turns}
        if reported is not None and reported > spent.cost:
            self.runs.add_usage(self.key.run_id, turns=0, tokens=0, cost=reported - spent.cost)
            detail["counted_usd"] = round(reported - spent.cost, 6)
        agent_rows.note(self.runs, self.claim, self.key, "agent-usage", detail=detail)

    def _private(self, name: str) -> Path:
        from durability.ground.paths import ensure_private_dir, state_dir

        root = self.config.private_root or state_dir(self.ctx.env) / "agents"
        k = self.key
        folder = (root / k.run_id / f"{k.node_id}.{k.iteration}.{k.attempt}"
                  / f"{name}.{self.invocations}")
        ensure_private_dir(root)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if Path(self.worktree).resolve() in (folder.resolve(), *folder.resolve().parents):
            raise AgentFailed(f"the private folder {folder} is inside the worktree")
        return folder


@dataclass
class _Spent:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    #: usages with no price (counted as 0)
    unpriced: int = 0

    @staticmethod
    def turn(event: Event) -> int:
        """The turns a usage event counts: one per model response.  A
        response's first usage carries its input (fresh or cached); what
        follows for the same response (its closing delta, a line repeating
        it: output tokens only) and a figure the harness added with no line
        of its own (no ``raw``: an end-of-run remainder) count none."""
        usage = event.usage
        if event.raw is None or usage is None:
            return 0
        return 1 if usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens else 0

    def add(self, usage: Usage, cost: float | None) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        if cost is None:
            self.unpriced += 1
        else:
            self.cost += cost

    def as_dict(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens, "cost_usd": round(self.cost, 6)}


def _executable(name: str, env: Mapping[str, str]) -> str:
    """The absolute path of the harness's program, looked up on the agent's
    own PATH (not this process's)."""
    if os.path.isabs(name):
        return name
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        raise AgentUnavailable(f"the {name!r} program is not on the agent's PATH")
    return found


def _override(first: PriceFn, then: PriceFn) -> PriceFn:
    def price(usage: Usage) -> float | None:
        value = first(usage)
        return then(usage) if value is None else value

    return price


def _json_in(text: str | None) -> Any:
    """The JSON value of a last message: all of it, a fenced block, or the
    outermost braces."""
    if not text or not text.strip():
        raise _Invalid("the answer is empty")
    candidates = [text.strip()]
    fenced = re.search(r"```(?:json)?\s*\n(.*?)```", text, re.DOTALL)
    if fenced:
        candidates.append(fenced.group(1).strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise _Invalid(f"the answer is not JSON: {text.strip()[:200]!r}")


# -- the one-task run (``durability agent run``) ------------------------------


def spec_json(*, prompt: str, harness: Sequence[str] = ("claude",), model: str | None = None,
              max_turns: int | None = None, output_schema: dict[str, Any] | None = None,
              corrections: int = 2, retries: int = 0) -> str:
    """The spec of a one-task agent run, as the generated workflow file holds it."""
    return json.dumps({"prompt": prompt, "harness": list(harness), "model": model,
                       "max_turns": max_turns, "output_schema": output_schema,
                       "corrections": corrections, "retries": retries}, sort_keys=True)


def agent_workflow(spec: str) -> Any:
    """The one-task workflow of a ``spec_json`` (its task's id: ``agent``)."""
    from durability.runs.workflow import Workflow

    data = json.loads(spec)
    wf = Workflow("agent")
    wf.agent("agent", prompt=data["prompt"], harness=tuple(data["harness"]),
             model=data.get("model"), output=data.get("output_schema"),
             max_turns=data.get("max_turns"), corrections=int(data.get("corrections", 2)),
             retries=int(data.get("retries", 0)))
    return wf


def write_workflow_file(folder: Path, run_id: str, spec: str) -> Path:
    """The workflow file of a one-task agent run (kept beside the state, so
    ``durability resume RUN`` finds it like any workflow file)."""
    from durability.ground.fsutil import replace_file
    from durability.ground.paths import ensure_private_dir

    ensure_private_dir(folder)
    path = folder / f"{run_id}.py"
    text = ('"""A one-task agent run (written by `durability agent run`; its spec is '
            'the run\'s)."""\n\nfrom durability.runs.agent import agent_workflow\n\n'
            f"SPEC = {spec!r}\n\nworkflow = agent_workflow(SPEC)\n")
    if not path.exists() or path.read_text() != text:
        replace_file(path, text.encode(), mode=0o600)
    return path


def agents_folder(env: Mapping[str, str] = os.environ) -> Path:
    from durability.ground.paths import state_dir

    return state_dir(env) / "agent-runs"
