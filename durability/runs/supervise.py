"""Supervision: find runs that need a process and give them one.

A run needs one when it is ``running`` but its owner's heartbeat is stale
(the owner died or hung), or it waits for a quota whose reset time has
passed.  The supervisor claims each (compare-and-swap, as
``supervisor:<id>``) and hands the claim to a child process it launches.
Two supervisors at once are safe: of two claims on one run, one fails, and
the loser moves on without a word.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from durability.ground.store_errors import EngineError
from durability.runs.fence import Claim, Owner
from durability.runs.run_rows import RunRow, Runs
from durability.store.clock import Clock, system_clock

__all__ = ["Child", "Supervisor"]

log = logging.getLogger(__name__)


class Child(Protocol):
    def poll(self) -> int | None:
        """None while the child still runs."""
        ...


class Supervisor:
    """Claims stale and wakeable runs and launches a child for each."""

    def __init__(self, runs: Runs, *, supervisor_id: str, launch: Callable[[Claim], Child],
                 stale_after_ms: int, max_concurrent: int = 3, clock: Clock = system_clock,
                 run_ids: list[str] | None = None) -> None:
        self.runs = runs
        self.owner = Owner.this_process(f"supervisor:{supervisor_id}")
        self.launch = launch
        self.stale_after_ms = stale_after_ms
        self.max_concurrent = max_concurrent
        self.clock = clock
        self.run_ids = run_ids
        self.children: list[Child] = []

    def tick(self) -> list[Claim]:
        """One poll: the claims this supervisor won and launched."""
        self.children = [c for c in self.children if c.poll() is None]
        launched: list[Claim] = []
        for row in self.runs.supervisable(now=self.clock(), stale_after_ms=self.stale_after_ms,
                                          run_ids=self.run_ids):
            if len(self.children) >= self.max_concurrent:
                break
            claim = self._claim(row)
            if claim is not None:
                self.children.append(self.launch(claim))
                launched.append(claim)
        return launched

    def _claim(self, row: RunRow) -> Claim | None:
        if row.state == "running" and row.requested in ("pause", "cancel"):
            # Its owner died before acting on the request: act on it here.
            try:
                self.runs.request(row.run_id, row.requested, live_within_ms=0)
            except EngineError as exc:
                log.warning("run %s: %s", row.run_id, exc)
            return None
        claim = self.runs.claim(row.run_id, expected_epoch=row.claim_epoch, owner=self.owner)
        if claim is None:
            log.debug("run %s: another process claimed it first", row.run_id)
        return claim

    def run(self, stop: threading.Event, *, poll_s: float) -> None:
        """Poll every ``poll_s`` seconds until ``stop`` is set."""
        while not stop.is_set():
            try:
                for claim in self.tick():
                    log.info("resumed run %s (claim %d)", claim.run_id, claim.epoch)
            except EngineError as exc:  # a busy database: try again next poll
                log.warning("supervise: %s: %s", exc.code, exc)
            stop.wait(poll_s)
