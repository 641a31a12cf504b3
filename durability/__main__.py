"""Entry point of the ``durability`` command.

``snapshot-hook`` runs on every tool call of every agent session, so it is
dispatched here before click, pydantic or anything else is imported.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["snapshot-hook"] and len(sys.argv) == 2:
        from durability.hook.entry import main as hook_main

        code = hook_main()
        _skip_teardown(code)
        sys.exit(code)
    from durability.cli.main import main as cli_main

    cli_main()


def _skip_teardown(code: int) -> None:
    """Once the hook is done, leave without the interpreter's teardown.

    Tearing the modules down costs 5-8 ms, on every tool call
    (bench/RESULTS.md), and nothing the hook leaves needs it: its files
    and locks are closed by their ``with`` blocks, SQLite has committed, and
    the output is flushed here.  Registered with atexit, so the usual
    SystemExit unwinding (and anything a caller does after catching it) runs
    first; the hook's exit status is always ``code`` (0, contract 6 in docs/DESIGN.md).
    """
    import atexit
    import os

    def leave() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass  # a closed or broken pipe: nothing more can be said
        os._exit(code)

    atexit.register(leave)


if __name__ == "__main__":
    main()
