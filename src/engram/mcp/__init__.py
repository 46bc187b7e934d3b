"""The MCP server: Engram's tools for agents that speak the Model Context Protocol, over streamable
HTTP (mounted in the API at /mcp) or stdio (`engram mcp`). The tools call the same capabilities as the
HTTP API, in process.

Inside this package the MCP SDK is always imported absolutely (`import mcp...`): with
`from __future__ import annotations` and no implicit relative imports, `engram.mcp` never shadows it.
"""

# Where the HTTP endpoint puts the bank a request is for (None: every bank) in the ASGI scope.
BANK_SCOPE_KEY = "engram.mcp_bank"
