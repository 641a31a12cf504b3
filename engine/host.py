"""This machine's name in the store: ``host_id``.

A worktree is known by its machine and its path together: two machines
sharing one PostgreSQL store whose repositories sit at one path (a fleet of
containers at ``/workspace``) are two worktrees, never one.  Run ownership
uses the same name (``engine.fence``).
"""

from __future__ import annotations

import os
import socket

__all__ = ["host_id", "sql_literal"]


def host_id() -> str:
    """This machine's name in run ownership and worktree keys:
    ``DURABILITY_HOST_ID``, else the host name.  Processes that share one
    PostgreSQL store from several machines tell a live owner on this machine
    (whose pid can be checked) from one elsewhere (whose heartbeat is all
    there is) by it, and their worktrees apart; machines that share a host
    name (cloned containers) must set it apart."""
    return os.environ.get("DURABILITY_HOST_ID", "").strip() or socket.gethostname()


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal (for a migration, which takes no
    parameters)."""
    return "'" + text.replace("'", "''") + "'"
