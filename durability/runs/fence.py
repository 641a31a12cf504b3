"""Claims on a run, and the fenced write transaction every owner write uses.

A claim is the run's ``claim_epoch`` at the moment it was taken.  A fenced
transaction first checks that epoch is still current, inside the same
``BEGIN IMMEDIATE``, so a displaced owner's write fails instead of landing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from durability.ground.store_errors import ClaimLost, StoreUnavailable
from durability.store.database import DB_ERRORS, Connection
from durability.store.db import write_transaction
from durability.store.host import host_id
from durability.store.store import Store

__all__ = ["Claim", "FencedStore", "Owner", "host_id"]


@dataclass(frozen=True)
class Owner:
    """Who works on a run: a name, and the process that holds the claim."""

    name: str
    pid: int
    host: str

    @classmethod
    def this_process(cls, name: str | None = None) -> Owner:
        host = host_id()
        return cls(name or f"pid:{os.getpid()}@{host}", os.getpid(), host)


@dataclass(frozen=True)
class Claim:
    """The right to work on a run, valid while its epoch is current."""

    run_id: str
    epoch: int
    owner: Owner


class FencedStore(Store):
    @contextmanager
    def _write(self) -> Iterator[Connection]:
        try:
            with self._conn() as db, write_transaction(db) as conn:
                yield conn
        except DB_ERRORS as exc:
            raise StoreUnavailable(f"cannot write the state database: {exc}") from exc

    @contextmanager
    def fenced(self, claim: Claim) -> Iterator[Connection]:
        """A write transaction that only goes ahead while ``claim`` is current."""
        with self._write() as conn:
            row = conn.execute("SELECT claim_epoch FROM runs WHERE run_id=$1",
                               (claim.run_id,)).fetchone()
            if row is None or row[0] != claim.epoch:
                raise ClaimLost(f"run {claim.run_id} was claimed by another process")
            yield conn
