"""``durability mcp``: the durability surface as MCP tools for an agent
(docs/how-to/mcp.md); a thin command over ``durability.mcp``."""

from __future__ import annotations

from pathlib import Path

import click

from durability.cli import options
from durability.ground.errors import DurabilityError

__all__ = ["COMMANDS"]

INSTALL = "pip install 'worktree-durability[mcp]'"


@click.command("mcp")
@click.option("--allow-approve", is_flag=True,
              help="Also serve `approve` (off: an agent must not pass its own gates).")
@click.option("--any-worktree", is_flag=True,
              help="Serve every worktree the state knows (off: only the one it is started "
              "in, so the agent cannot restore or read another project's files).")
def mcp_command(allow_approve: bool, any_worktree: bool) -> None:
    """Serve the Model Context Protocol on stdin and stdout (for an agent).

    Tools: sessions, snapshots, show, diff, log, gaps, attempts, restore,
    snapshot_now, runs, run_status, service_status, logs, gc_preview, remotes,
    deny, run, resume, pause, cancel, fork (and approve with --allow-approve).
    A run, resume or fork is driven by a detached worker process.
    Run ids default to the newest session of the worktree it runs in, and
    only that worktree is served unless --any-worktree.
    Register it for Claude Code with `durability install-hook --mcp`.

    \b
    Example:
      durability mcp        # started by the agent's harness, not by hand
    """
    try:
        from durability.mcp.stdio import serve
        from durability.mcp.tools import Here
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise DurabilityError(f"the MCP server needs the MCP SDK, which is not installed: "
                              f"{INSTALL}", code="missing-extra") from None
    serve(Here(settings=options.settings(), cwd=Path.cwd(), allow_approve=allow_approve,
               any_worktree=any_worktree))


COMMANDS = [mcp_command]
