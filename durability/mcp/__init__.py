"""The MCP server (``durability mcp``, docs/how-to/mcp.md): models.py (typed inputs
and outputs), tools.py (one function per tool, over the library the CLI
uses), server.py (the SDK's stdio server; failures as answers with codes).

Needs the ``mcp`` extra; nothing else imports this package."""
