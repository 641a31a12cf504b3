"""Entry point of the ``durability`` command.

``snapshot-hook`` runs on every tool call of every agent session, so it is
dispatched here before click, pydantic or anything else is imported.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["snapshot-hook"] and len(sys.argv) == 2:
        from durability.hook import main as hook_main

        sys.exit(hook_main())
    from durability.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
