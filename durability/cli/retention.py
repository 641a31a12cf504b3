"""The retention command: ``gc`` (docs/how-to/retention.md)."""

from __future__ import annotations

from typing import Any

import click

from durability.cli import options

__all__ = ["COMMANDS"]

#: Per-command overrides of the policy: option name -> policy field.
_OVERRIDES = {
    "keep_all_days": "every checkpoint younger than this is kept",
    "hourly_days": "then the newest per attempt and hour, up to this age",
    "daily_days": "then the newest per attempt and day, up to this age",
    "pre_restore_days": "pre-restore checkpoints are kept this long",
    "jj_op_log_days": "abandon jj operations older than this, in days (0: never)",
    "prune_grace_s": "unreachable objects younger than this many seconds survive (0: prune now)",
}


def _policy_options(f: Any) -> Any:
    for name, text in reversed(_OVERRIDES.items()):
        flag = "--" + name.removesuffix("_s").replace("_", "-")
        f = click.option(flag, name, type=click.FloatRange(min=0), default=None,
                         help=f"{text.capitalize()} (overrides the config file).")(f)
    return f


@click.command()
@click.option("--dry-run", is_flag=True, help="Say what would be dropped; change nothing.")
@_policy_options
@options.json_option
def gc(dry_run: bool, as_json: bool, **overrides: float | None) -> None:
    """Drop expired checkpoints and let git or jj collect what they held.

    Applies the retention policy (defaults, then the [retention] table of the
    config file, then these options): never a checkpoint of an unfinished run,
    never an attempt's newest. Reports checkpoints, refs, objects and bytes
    before and after.

    \b
    Example:
      durability gc --dry-run
      durability gc --keep-all-days 3 --json
    """
    from durability.cli.progress import Bar
    from durability.retention.gc import extra_keepers, run_gc
    from durability.retention.policy import load_policy
    from durability.store import now_ms

    settings = options.settings()
    policy = load_policy().with_values({k: v for k, v in overrides.items() if v is not None})
    with Bar("gc", quiet=as_json) as bar:
        report = run_gc(settings, options.store(settings), policy, now_ms=now_ms(),
                        dry_run=dry_run, keepers=extra_keepers(settings), progress=bar)
    if as_json:
        options.emit(report.to_dict())
        return
    click.echo(_summary(report.to_dict()))


def _summary(data: dict[str, Any]) -> str:
    c = data["checkpoints"]
    verb = "would drop" if data["dry_run"] else "dropped"
    kept = ", ".join(f"{n} {why}" for why, n in c["kept_by"].items()) or "none"
    lines = [f"{verb} {c['dropped']} of {c['before']} checkpoints (kept: {kept})"]
    if not data["dry_run"]:
        refs, objs, size = data["refs"], data["objects"], data["bytes"]
        lines.append(f"refs {refs['before']} -> {refs['after']}, objects {objs['before']} -> "
                     f"{objs['after']}, disk {_size(size['before'])} -> {_size(size['after'])}")
    for repo in data["repositories"]:
        if repo["note"]:
            lines.append(f"{repo['store']}: {repo['note']}")
    for skipped in data["skipped"]:
        lines.append(f"skipped {skipped['worktree']}: {skipped['reason']}")
    return "\n".join(lines)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{n} B"


COMMANDS = [gc]
